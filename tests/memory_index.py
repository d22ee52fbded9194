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

from deepsearcher.store import CollectionInfo, CollectionMeta, LocalLoadLeases
from deepsearcher.types import Hit

MODEL = "word-hash"
DIMENSION = 512
_WORD = re.compile(r"[a-z0-9]{3,}")


# A small corpus the in-process agent and research tests search: source -> its passages.
CORPUS = {
    "robots.txt": [
        "The NR-7 robot carries a payload of twelve kilograms on its arm.",
        "The NR-7 battery lasts ten hours and is supplied by Kestrel Energy.",
    ],
    "offices.txt": [
        "Rafael Ortega is the office manager in Austin.",
        "The Lyon office has forty employees and a robotics lab.",
    ],
    "travel.md": [
        "Travel expenses above 500 dollars need approval from the CFO.",
        "The international per diem is 95 dollars per day.",
    ],
}


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
        self._versions: dict[str, int] = {}
        self.answers = MemoryAnswers()
        self.leases = LocalLoadLeases()  # the store's own kind for a single process

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
        self.bump_version(collection)

    def collection_versions(self, names: Sequence[str] | None) -> dict[str, str]:
        wanted = self._passages if names is None else [n for n in names if n in self._passages]
        return {n: str(self._versions.get(n, 0)) for n in wanted}

    def bump_version(self, name: str) -> None:
        self._versions[name] = self._versions.get(name, 0) + 1

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


class MemoryAnswers:
    """The answer cache's storage in a dict: payloads with their expiry time."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[str, float]] = {}

    def get_answer(self, key: str, now: float) -> str | None:
        row = self._rows.get(key)
        return row[0] if row and row[1] > now else None

    def put_answer(self, key: str, payload: str, expires_at: float) -> None:
        self._rows[key] = (payload, expires_at)

    def prune_answers(self, now: float) -> None:
        self._rows = {k: row for k, row in self._rows.items() if row[1] > now}
