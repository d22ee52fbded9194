"""Vector stores and file manifests.

``VectorStore`` holds chunks, searches them and administers collections; ``FileManifest``
(``store.manifest``) records which file was loaded with which content, for incremental loads;
``LoadLeases`` (``store.leases``) lets one load at a time write into a collection;
``AsyncStore`` holds the thread hops that let async code await them.
One backend today, Milvus (``MilvusStore``: Lite file, server or Zilliz Cloud), chosen by
``vector_store.provider`` through ``STORES``. A new backend is a module here implementing
both protocols of ``deepsearcher.store.base``, registered in ``STORES``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from deepsearcher.config import VectorStoreSettings, registry
from deepsearcher.errors import StoreError
from deepsearcher.store._client import lock_holders
from deepsearcher.store.aio import AsyncStore
from deepsearcher.store.base import (
    INTERNAL_PREFIX,
    MANIFEST_SUFFIX,
    AnswerStore,
    CollectionInfo,
    CollectionMeta,
    FileManifest,
    FileRecord,
    LeaseClaim,
    LoadLeases,
    VectorStore,
    check_compatible,
    validate_collection_name,
)
from deepsearcher.store.lease import LocalLoadLeases, MilvusLoadLeases
from deepsearcher.store.milvus import MilvusStore

__all__ = [
    "INTERNAL_PREFIX",
    "MANIFEST_SUFFIX",
    "STORES",
    "AnswerStore",
    "AsyncStore",
    "CollectionInfo",
    "CollectionMeta",
    "FileManifest",
    "FileRecord",
    "LeaseClaim",
    "LoadLeases",
    "LocalLoadLeases",
    "MilvusLoadLeases",
    "MilvusStore",
    "VectorStore",
    "build_store",
    "check_compatible",
    "lock_holders",
    "validate_collection_name",
]

# Registered in deepsearcher.config.registry, where the settings read the names too.
STORES: Mapping[str, Callable[[VectorStoreSettings], VectorStore]] = registry.STORES


def build_store(settings: VectorStoreSettings) -> VectorStore:
    """Instantiate the vector store named by ``settings.provider``."""
    try:
        return STORES[settings.provider](settings)
    except KeyError:
        raise StoreError(
            f"unknown vector store provider '{settings.provider}'",
            f"use one of: {', '.join(STORES)}",
        ) from None
