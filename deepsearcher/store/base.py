"""The store roles: ``VectorStore`` (chunks, search, collection admin), ``FileManifest``
(what was loaded from which file, for incremental loads), ``AnswerStore`` (the answer cache) and
``LoadLeases`` (who may load into a collection now), and what a collection records."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from deepsearcher.config import Settings
from deepsearcher.errors import IncompatibleCollectionError, StoreError
from deepsearcher.filters import Filter
from deepsearcher.types import Chunk, Hit

MANIFEST_SUFFIX = "__files"
# Collections the store keeps for itself (the answer cache): never listed, never loadable.
INTERNAL_PREFIX = "_deepsearcher"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,200}$")


@dataclass
class CollectionMeta:
    """What a collection was built with; loading with anything else would mix vectors."""

    embedding_model: str
    dimension: int
    chunk_size: int
    chunk_overlap: int
    analyzer: str = "standard"
    description: str = ""
    # Collections made before the setting existed indexed the bare text: False.
    context_prefix: bool = False

    @classmethod
    def of(cls, settings: Settings, dimension: int, description: str = "") -> CollectionMeta:
        """What a load with ``settings`` and an embedder of ``dimension`` builds."""
        return cls(
            embedding_model=settings.embedding.model,
            dimension=dimension,
            chunk_size=settings.chunking.chunk_size,
            chunk_overlap=settings.chunking.chunk_overlap,
            analyzer=settings.vector_store.analyzer,
            description=description,
            context_prefix=settings.chunking.context_prefix,
        )

    def incompatibilities(self, other: CollectionMeta) -> list[str]:
        diffs = []
        keys = ("embedding_model", "dimension", "chunk_size", "chunk_overlap", "analyzer")
        for key in (*keys, "context_prefix"):
            mine, theirs = getattr(self, key), getattr(other, key)
            if mine != theirs:
                diffs.append(f"{key} {mine!r} (collection) vs {theirs!r} (now)")
        return diffs


@dataclass
class CollectionInfo:
    name: str
    rows: int
    meta: CollectionMeta | None
    files: int = 0
    # Set when the collection could not be opened (rows and files are then 0): the listing and
    # searches go on with the others, and this says why and what fixes it.
    error: StoreError | None = None


@dataclass
class FileRecord:
    source: str
    doc_id: str
    content_hash: str
    chunks: int
    extra: dict[str, Any] = field(default_factory=dict)


class FileManifest(Protocol):
    """One record per loaded file of a collection (path, content hash, chunk count). A file's
    record is written only after all its chunks are stored, so a file without one is redone."""

    def file_records(self, name: str) -> dict[str, FileRecord]: ...
    def put_file_records(self, name: str, records: Sequence[FileRecord]) -> None: ...
    def delete_file_record(self, name: str, source: str) -> None: ...


class AnswerStore(Protocol):
    """Cached answers by key, shared by every process on the store: an opaque payload and the
    time (epoch seconds) it expires. Expired entries are never returned."""

    def get_answer(self, key: str, now: float) -> str | None: ...
    def put_answer(self, key: str, payload: str, expires_at: float) -> None: ...
    def prune_answers(self, now: float) -> None: ...


@dataclass(frozen=True)
class LeaseClaim:
    """One loader's claim on loading a collection. ``owner`` names the process
    ("host:pid:random"); times are epoch seconds. ``claimed_at`` is fixed for the claim's life
    and orders contenders; ``expires_at`` moves forward with each renewal."""

    owner: str
    claimed_at: float
    expires_at: float

    def rank(self) -> tuple[float, str]:
        return (self.claimed_at, self.owner)


class LoadLeases(Protocol):
    """Claims on loading a collection, kept where every loader of the store sees them. The
    holder of a collection is its earliest (``claimed_at``, ``owner``) claim that has not
    expired; ``deepsearcher.load_lease`` waits for, holds and renews it around a load.

    ``try_acquire`` returns the holder after its attempt (its own claim when it won, otherwise
    the claim it lost to, which the caller reports while it waits); ``renew`` returns the
    renewed claim, or None when the owner no longer holds the lease (expired, taken over or
    deleted): a renewal never revives a lapsed claim."""

    def holder(self, collection: str) -> LeaseClaim | None: ...
    def try_acquire(
        self, collection: str, owner: str, ttl_s: float, settle_s: float
    ) -> LeaseClaim | None: ...
    def renew(
        self, collection: str, claim: LeaseClaim, ttl_s: float, margin_s: float
    ) -> LeaseClaim | None: ...
    def release(self, collection: str, owner: str) -> None: ...


class VectorStore(Protocol):
    """Chunk storage and similarity search, one logical collection per document set. Creating
    or dropping a collection creates or drops its file manifest too.

    Every collection carries a version, a token that changes whenever its chunks may have
    changed (created, rebuilt, loaded into, pruned, described anew): the answer cache keys on it,
    so a cached answer stops matching once a collection it drew on changes."""

    @property
    def manifest(self) -> FileManifest: ...
    @property
    def answers(self) -> AnswerStore: ...
    @property
    def leases(self) -> LoadLeases: ...
    def collection_versions(self, names: Sequence[str] | None) -> dict[str, str]: ...
    def bump_version(self, name: str) -> None: ...
    def list_collections(self) -> list[CollectionInfo]: ...
    def get_meta(self, name: str) -> CollectionMeta | None: ...
    def ensure_collection(
        self, name: str, meta: CollectionMeta, *, rebuild: bool = False
    ) -> None: ...
    def set_description(self, name: str, description: str) -> None: ...
    def drop_collection(self, name: str) -> None: ...
    def count(self, name: str) -> int: ...
    def upsert_chunks(self, name: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None: ...
    def delete_stale_chunks(self, name: str, doc_id: str, keep_hash: str | None) -> int: ...
    def search(
        self,
        name: str,
        vectors: np.ndarray,
        top_k: int,
        *,
        texts: Sequence[str] | None = None,
        hybrid: bool = False,
        filter: Filter | None = None,
    ) -> list[list[Hit]]: ...
    def get_chunk(self, name: str, chunk_id: str) -> Hit | None: ...
    def has_filter_fields(self, name: str) -> bool: ...
    def close(self) -> None: ...


def check_compatible(name: str, existing: CollectionMeta, wanted: CollectionMeta) -> None:
    """Refuse to mix vectors or chunkings in one collection."""
    diffs = existing.incompatibilities(wanted)
    if diffs:
        raise IncompatibleCollectionError(
            f"collection '{name}' was built with other settings: {'; '.join(diffs)}",
            f"load into another --collection, or pass --rebuild to re-embed '{name}'",
        )


def validate_collection_name(name: str) -> str:
    internal = name.endswith(MANIFEST_SUFFIX) or name.startswith(INTERNAL_PREFIX)
    if not _NAME_RE.match(name) or internal:
        raise StoreError(
            f"invalid collection name '{name}'",
            "use letters, digits and underscores, starting with a letter (not ending in __files,"
            f" not starting with {INTERNAL_PREFIX})",
        )
    return name
