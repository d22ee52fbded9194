"""A small real embedder and vector store in memory, for agent unit tests: the ``Retriever``
under test runs unchanged over them, without Milvus or an embedding model.

``WordHashEmbedder`` hashes words into a fixed-size bag-of-words vector (L2-normalised), so a
query finds the passages that share its words; ``MemoryStore`` ranks passages by cosine score.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

from deepsearcher.store import CollectionInfo, CollectionMeta
from deepsearcher.types import Hit

MODEL = "word-hash"
DIMENSION = 512
_WORD = re.compile(r"[a-z0-9]{3,}")


class WordHashEmbedder:
    model_name = MODEL
    dimension = DIMENSION
    max_tokens = None

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[row, zlib.crc32(word.encode()) % DIMENSION] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


class MemoryStore:
    """Collections of passages with their vectors; ``search`` is exact cosine top-k."""

    def __init__(self, embedder: WordHashEmbedder) -> None:
        self._embedder = embedder
        self._passages: dict[str, list[Hit]] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._meta: dict[str, CollectionMeta] = {}

    def add(
        self,
        collection: str,
        files: dict[str, list[str]],
        *,
        description: str = "",
        model: str = MODEL,
    ) -> None:
        """``files``: source name -> its passages, in order."""
        hits = [
            Hit(id=f"{source}#{i}", text=text, source=source, score=0.0, collection=collection)
            for source, passages in files.items()
            for i, text in enumerate(passages)
        ]
        self._passages[collection] = hits
        self._vectors[collection] = self._embedder.embed([h.text for h in hits])
        self._meta[collection] = CollectionMeta(
            embedding_model=model,
            dimension=DIMENSION,
            chunk_size=0,
            chunk_overlap=0,
            description=description,
        )

    def list_collections(self) -> list[CollectionInfo]:
        return [
            CollectionInfo(name, len(hits), self._meta[name], files=len({h.source for h in hits}))
            for name, hits in self._passages.items()
        ]

    def search(
        self,
        name: str,
        vectors: np.ndarray,
        top_k: int,
        *,
        texts: Sequence[str] | None = None,
        hybrid: bool = False,
        filter: object = None,
    ) -> list[list[Hit]]:
        if filter:
            raise NotImplementedError("the in-memory index does not filter; use Milvus Lite")
        scores = vectors @ self._vectors[name].T
        results = []
        for row in scores:
            order = [i for i in np.argsort(-row, kind="stable")[:top_k] if row[i] > 0]
            results.append(
                [Hit(**{**self._passages[name][i].__dict__, "score": float(row[i])}) for i in order]
            )
        return results

    def has_filter_fields(self, name: str) -> bool:
        return True

    def close(self) -> None:
        pass
