"""``AsyncStore``: the store for async code, every call in a worker thread.

pymilvus's async client does not work with Milvus Lite, so the blocking ``MilvusClient`` runs in
threads; this adapter is the one place those thread hops are written. Callers ``await
store.search(...)`` as if the store were async, and the loop never blocks on Milvus (nor on
opening it: a store built lazily is opened in the thread of the first call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from deepsearcher.filters import Filter
from deepsearcher.store.base import (
    CollectionInfo,
    CollectionMeta,
    FileManifest,
    FileRecord,
    VectorStore,
)
from deepsearcher.types import Chunk, Hit

T = TypeVar("T")


class AsyncStore:
    """``VectorStore`` and its ``FileManifest`` as coroutines. ``open_store`` returns the store
    (building it on first use, say); ``manifest`` replaces the store's own (an older layout,
    a test's)."""

    def __init__(
        self, open_store: Callable[[], VectorStore], manifest: FileManifest | None = None
    ) -> None:
        self._open = open_store
        self._manifest = manifest

    @classmethod
    def of(cls, store: VectorStore, manifest: FileManifest | None = None) -> AsyncStore:
        return cls(lambda: store, manifest)

    async def _call(self, call: Callable[[VectorStore], T]) -> T:
        return await asyncio.to_thread(lambda: call(self._open()))

    async def _call_manifest(self, call: Callable[[FileManifest], T]) -> T:
        return await self._call(lambda store: call(self._manifest or store.manifest))

    async def opened(self) -> VectorStore:
        """The blocking store itself, opened in a thread (a locked database fails here)."""
        return await self._call(lambda store: store)

    # -- collections ------------------------------------------------------------------------------

    async def list_collections(self) -> list[CollectionInfo]:
        return await self._call(lambda s: s.list_collections())

    async def get_meta(self, name: str) -> CollectionMeta | None:
        return await self._call(lambda s: s.get_meta(name))

    async def ensure_collection(
        self, name: str, meta: CollectionMeta, *, rebuild: bool = False
    ) -> None:
        await self._call(lambda s: s.ensure_collection(name, meta, rebuild=rebuild))

    async def set_description(self, name: str, description: str) -> None:
        await self._call(lambda s: s.set_description(name, description))

    async def drop_collection(self, name: str) -> None:
        await self._call(lambda s: s.drop_collection(name))

    async def count(self, name: str) -> int:
        return await self._call(lambda s: s.count(name))

    async def bump_version(self, name: str) -> None:
        await self._call(lambda s: s.bump_version(name))

    async def collection_versions(self, names: Sequence[str] | None) -> dict[str, str]:
        return await self._call(lambda s: s.collection_versions(names))

    async def has_filter_fields(self, name: str) -> bool:
        return await self._call(lambda s: s.has_filter_fields(name))

    # -- chunks -----------------------------------------------------------------------------------

    async def upsert_chunks(self, name: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        await self._call(lambda s: s.upsert_chunks(name, chunks, vectors))

    async def delete_stale_chunks(self, name: str, doc_id: str, keep_hash: str | None) -> int:
        return await self._call(lambda s: s.delete_stale_chunks(name, doc_id, keep_hash))

    async def search(
        self,
        name: str,
        vectors: np.ndarray,
        top_k: int,
        *,
        texts: Sequence[str] | None = None,
        hybrid: bool = False,
        filter: Filter | None = None,
    ) -> list[list[Hit]]:
        return await self._call(
            lambda s: s.search(name, vectors, top_k, texts=texts, hybrid=hybrid, filter=filter)
        )

    async def get_chunk(self, name: str, chunk_id: str) -> Hit | None:
        return await self._call(lambda s: s.get_chunk(name, chunk_id))

    # -- the file manifest ------------------------------------------------------------------------

    async def file_records(self, name: str) -> dict[str, FileRecord]:
        return await self._call_manifest(lambda m: m.file_records(name))

    async def put_file_records(self, name: str, records: Sequence[FileRecord]) -> None:
        await self._call_manifest(lambda m: m.put_file_records(name, records))

    async def delete_file_record(self, name: str, source: str) -> None:
        await self._call_manifest(lambda m: m.delete_file_record(name, source))
