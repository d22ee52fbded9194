"""``OpenAIEmbedder``: any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama, TEI)."""

from __future__ import annotations

import base64
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

import numpy as np

from deepsearcher.config import EmbeddingSettings
from deepsearcher.errors import EmbeddingError
from deepsearcher.retry import Backoff, Retryable, RetryPolicy, retry_log, retryable_reason
from deepsearcher.retry_after import retry_after_s

logger = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"


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
        policy = RetryPolicy(
            attempts=self._settings.max_retries + 1,
            backoff=Backoff(self._backoff_base_s, self._backoff_cap_s, self._retry_after_cap_s),
            retry_on=(Retryable,),
            reason=retryable_reason,
            exhausted=self._exhausted,
            log=retry_log(logger, "embedding request"),
        )
        for attempt in policy.attempts_in_thread():
            with attempt:
                return self._check_dimension(self._request(batch))
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def _exhausted(self, attempts: int, reason: str) -> EmbeddingError:
        return EmbeddingError(
            f"embedding server at {self.endpoint} failed after {attempts} attempts: {reason}",
            "check that the server is up and not overloaded, or raise "
            "embedding.timeout_s / embedding.max_retries (or lower "
            "embedding.max_concurrency)",
        )

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
            raise Retryable(f"timed out after {self._settings.timeout_s:g}s") from exc
        except httpx.ConnectError as exc:
            # Refused or unknown host: the next attempt would be refused alike.
            raise EmbeddingError(
                f"cannot connect to the embedding server at {self.endpoint} ({type(exc).__name__})",
                "check embedding.base_url and that the server is running",
            ) from exc
        except httpx.HTTPError as exc:  # a connection dropped mid-reply
            raise Retryable(f"{type(exc).__name__}: {exc}") from exc
        status = resp.status_code
        if status == 429 or status >= 500:
            raise Retryable(f"{status} {_server_message(resp)}", retry_after_s(resp.headers))
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
            raise Retryable(f"unreadable response ({type(exc).__name__})") from exc
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
