"""``MilvusStore``: chunks, search and collection admin in Milvus Lite (a local ``.db``
directory), a Milvus server or Zilliz Cloud through the same ``MilvusClient``; only the URI
differs. Its file manifest (``store.manifest``), answer cache (``store.answers``) and load
leases (``store.leases``) share the connection.

All methods are blocking; async callers run them with ``asyncio.to_thread`` (pymilvus's async
client does not work with Milvus Lite).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from deepsearcher.config import VectorStoreSettings
from deepsearcher.errors import CollectionNotFoundError, IncompatibleCollectionError, StoreError
from deepsearcher.filters import Filter
from deepsearcher.store._client import MilvusConnection
from deepsearcher.store.answers import MilvusAnswerStore
from deepsearcher.store.base import (
    INTERNAL_PREFIX,
    MANIFEST_SUFFIX,
    CollectionInfo,
    CollectionMeta,
    LoadLeases,
    check_compatible,
    validate_collection_name,
)
from deepsearcher.store.lease import LocalLoadLeases, MilvusLoadLeases
from deepsearcher.store.manifest import SOURCE_MAX, MilvusFileManifest
from deepsearcher.store.milvus_filter import FILTER_MARKER_EXPR, MilvusFilter, compile_filter
from deepsearcher.types import Chunk, Hit

logger = logging.getLogger(__name__)

_META_KEY = "deepsearcher.meta"
# A random token, new whenever the collection's content may have changed (see VectorStore).
_VERSION_KEY = "deepsearcher.version"
_TEXT_MAX = 65535
_SEARCH_FIELDS = ["doc_id", "source", "text", "meta"]

# BM25 analyzers by config name. Milvus Lite knows only the standard and jieba tokenizers (no
# icu, no language_identifier); jieba cuts Chinese into words and Latin-script text at spaces
# and punctuation, so one jieba collection serves both. The lowercase filter is explicit for
# Milvus servers; "chinese" keeps its original parameters so existing collections stay valid.
_ANALYZERS: dict[str, dict[str, Any]] = {
    "standard": {"type": "standard"},
    "chinese": {"tokenizer": "jieba"},
    "multilingual": {"tokenizer": "jieba", "filter": ["lowercase"]},
}


# A source glob that LIKE cannot express exactly is checked on the hits: fetch this many times
# the candidates so top_k stays full unless few chunks match (Milvus caps a search at 16384).
_POST_FILTER_FETCH = 4
_MAX_LIMIT = 16384

# milvus-lite's server (3.2.2) writes a collection's schema.json through one fixed
# schema.json.tmp, so two property writes at once (two servers bumping a version) make one of
# them fail renaming a temp file the other already moved. The write is idempotent: try again.
_ALTER_ATTEMPTS = 6
_LOST_SCHEMA_RACE = "schema.json.tmp"


class MilvusStore:
    """Milvus through ``pymilvus.MilvusClient``: Lite file by default, server/Zilliz by URI."""

    def __init__(self, settings: VectorStoreSettings) -> None:
        self._settings = settings
        self._conn = MilvusConnection(settings)
        self.uri = self._conn.uri
        self._manifest = MilvusFileManifest(self._conn)
        self._answers = MilvusAnswerStore(self._conn)
        # A Lite file admits one process (its LOCK), so only this process's loads need ordering.
        self._leases: LoadLeases = (
            MilvusLoadLeases(self._conn) if self._conn.remote else LocalLoadLeases()
        )
        # Property writes to one collection, one at a time in this process (see _ALTER_ATTEMPTS).
        self._alter_locks: dict[str, threading.Lock] = {}
        self._alter_locks_guard = threading.Lock()

    @property
    def manifest(self) -> MilvusFileManifest:
        return self._manifest

    @property
    def answers(self) -> MilvusAnswerStore:
        return self._answers

    @property
    def leases(self) -> LoadLeases:
        return self._leases

    @property
    def _client(self) -> Any:  # the raw client, for tests that read rows directly
        return self._conn.client

    # -- collections ------------------------------------------------------------------------

    def list_collections(self) -> list[CollectionInfo]:
        names = sorted(self._conn.call(self._client.list_collections))
        infos = []
        for name in names:
            if name.endswith(MANIFEST_SUFFIX) or name.startswith(INTERNAL_PREFIX):
                continue
            meta = self.get_meta(name)  # a property: readable without loading the collection
            try:
                rows = self.count(name)
                files = self._manifest.count(name) if name + MANIFEST_SUFFIX in names else 0
            except StoreError as exc:  # one collection that cannot be opened fails only itself
                logger.info("%s", exc.message)  # the caller reports it, with its hint
                infos.append(CollectionInfo(name, 0, meta, 0, error=exc))
                continue
            infos.append(CollectionInfo(name, rows, meta, files))
        return infos

    def get_meta(self, name: str) -> CollectionMeta | None:
        if not self._conn.has(name):
            return None
        desc = self._conn.call(self._client.describe_collection, name)
        raw = (desc.get("properties") or {}).get(_META_KEY)
        if not raw:
            return None
        try:
            return CollectionMeta(**json.loads(raw))
        except (TypeError, ValueError):
            return None

    def ensure_collection(self, name: str, meta: CollectionMeta, *, rebuild: bool = False) -> None:
        """Create the collection (and manifest) or check the existing one was built alike."""
        validate_collection_name(name)
        if rebuild:
            self.drop_collection(name)
        if self._conn.has(name):
            existing = self.get_meta(name)
            if existing is None:
                raise IncompatibleCollectionError(
                    f"collection '{name}' was not created by deepsearcher",
                    f"use another --collection, or --rebuild to replace '{name}'",
                )
            check_compatible(name, existing, meta)
            if meta.description and meta.description != existing.description:
                self.set_description(name, meta.description)
            if not self._manifest.exists(name):
                self._manifest.create(name)
            return
        self._create_chunks_collection(name, meta)
        self._manifest.create(name)

    def _create_chunks_collection(self, name: str, meta: CollectionMeta) -> None:
        from pymilvus import DataType, Function, FunctionType  # lazy, as in __init__

        client = self._client
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("doc_id", DataType.VARCHAR, max_length=64)
        schema.add_field("source", DataType.VARCHAR, max_length=SOURCE_MAX)
        schema.add_field("content_hash", DataType.VARCHAR, max_length=64)
        schema.add_field("chunk_index", DataType.INT64)
        analyzer = _ANALYZERS.get(meta.analyzer, _ANALYZERS["standard"])
        schema.add_field(
            "text",
            DataType.VARCHAR,
            max_length=_TEXT_MAX,
            enable_analyzer=True,
            analyzer_params=analyzer,
        )
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=meta.dimension)
        schema.add_field("meta", DataType.JSON)
        schema.add_function(
            Function(
                name="text_bm25",
                function_type=FunctionType.BM25,
                input_field_names=["text"],
                output_field_names=["sparse"],
            )
        )
        index = client.prepare_index_params()
        index.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
        index.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        self._conn.call(
            client.create_collection,
            name,
            schema=schema,
            index_params=index,
            properties={_META_KEY: json.dumps(asdict(meta)), _VERSION_KEY: _new_version()},
        )

    def collection_versions(self, names: Sequence[str] | None) -> dict[str, str]:
        """The version of each named collection that exists (all user collections when
        ``names`` is None); "" for one made before versions existed."""
        if names is None:
            every = self._conn.call(self._client.list_collections)
            names = [
                n
                for n in every
                if not n.endswith(MANIFEST_SUFFIX) and not n.startswith(INTERNAL_PREFIX)
            ]
        versions: dict[str, str] = {}
        for name in names:
            if self._conn.has(name):
                desc = self._conn.call(self._client.describe_collection, name)
                versions[name] = str((desc.get("properties") or {}).get(_VERSION_KEY, ""))
        return versions

    def bump_version(self, name: str) -> None:
        self._alter_properties(name, {_VERSION_KEY: _new_version()})

    def _alter_properties(self, name: str, properties: dict[str, str]) -> None:
        """Set collection properties; retried when milvus-lite's server loses its temp-file
        race to another writer (a real Milvus never fails that way, so never retries)."""
        with self._alter_locks_guard:
            lock = self._alter_locks.setdefault(name, threading.Lock())
        for attempt in range(1, _ALTER_ATTEMPTS + 1):
            try:
                with lock:
                    self._conn.call(
                        self._client.alter_collection_properties, name, properties=properties
                    )
                return
            except StoreError as exc:
                if _LOST_SCHEMA_RACE not in str(exc.__cause__ or exc):
                    raise
                if attempt == _ALTER_ATTEMPTS:
                    # The rename that failed may have been the other writer's file carrying
                    # ours: what is stored now decides.
                    if self._properties(name).items() >= properties.items():
                        return
                    raise
                logger.info("property write on %s lost a race in the store; retrying", name)
                time.sleep(random.uniform(0.02, 0.1) * attempt)  # apart from the other writer

    def _properties(self, name: str) -> dict[str, str]:
        desc = self._conn.call(self._client.describe_collection, name)
        return {str(k): str(v) for k, v in (desc.get("properties") or {}).items()}

    def set_description(self, name: str, description: str) -> None:
        meta = self.get_meta(name)
        if meta is None:
            raise CollectionNotFoundError(f"collection '{name}' does not exist")
        meta.description = description
        # The description steers routing between collections: answers may change.
        self._alter_properties(
            name, {_META_KEY: json.dumps(asdict(meta)), _VERSION_KEY: _new_version()}
        )

    def drop_collection(self, name: str) -> None:
        self._conn.drop(name)
        self._manifest.drop(name)

    def count(self, name: str) -> int:
        return self._conn.count(name)

    # -- chunks -----------------------------------------------------------------------------

    def upsert_chunks(self, name: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        if not chunks:
            return
        self._conn.ensure_loaded(name)
        rows = [_chunk_row(c, vectors[i]) for i, c in enumerate(chunks)]
        self._conn.call(self._client.upsert, name, rows)

    def delete_stale_chunks(self, name: str, doc_id: str, keep_hash: str | None) -> int:
        """Delete a document's chunks except those of ``keep_hash`` (all when None)."""
        self._conn.ensure_loaded(name)
        expr = f'doc_id == "{doc_id}"'
        if keep_hash is not None:
            expr += f' and content_hash != "{keep_hash}"'
        res = self._conn.call(self._client.delete, name, filter=expr)
        return _deleted_count(res)

    # -- search -----------------------------------------------------------------------------

    def search(
        self,
        name: str,
        vectors: np.ndarray,
        top_k: int,
        *,
        texts: Sequence[str] | None = None,
        hybrid: bool = False,
        filter: Filter | None = None,
    ) -> list[list[Hit]]:
        self._conn.require(name)
        data = [v.tolist() for v in vectors]
        flt = compile_filter(filter)
        if hybrid and texts:
            results = self._fused_search(name, data, list(texts), top_k, flt)
        else:
            results = self._search_field(name, data, "vector", top_k, flt)
        return [[_to_hit(h, name) for h in per_query] for per_query in results]

    def get_chunk(self, name: str, chunk_id: str) -> Hit | None:
        """One stored passage by its chunk id (score 0), or None when there is none."""
        self._conn.require(name)
        rows = self._conn.call(
            self._client.get,
            name,
            ids=[chunk_id],
            output_fields=_SEARCH_FIELDS,
        )
        return _to_hit(rows[0], name) if rows else None

    def has_filter_fields(self, name: str) -> bool:
        """Whether the collection's chunks carry the keys filters read (``modified``, ``page``,
        loader metadata): chunks loaded before filters existed do not, until reloaded."""
        self._conn.require(name)
        rows = self._conn.call(
            self._client.query, name, filter=FILTER_MARKER_EXPR, output_fields=["id"], limit=1
        )
        return bool(rows)

    def _search_field(
        self,
        name: str,
        data: list[list[float]] | list[str],
        field: str,
        limit: int,
        flt: MilvusFilter | None = None,
    ) -> list[list[dict[str, Any]]]:
        """One batched search: dense vectors against ``vector`` (cosine) or query texts
        against the BM25 ``sparse`` field, narrowed by ``flt``."""
        metric = "BM25" if field == "sparse" else "COSINE"
        post = flt.post if flt else None
        fetch = min(limit * _POST_FILTER_FETCH, _MAX_LIMIT) if post else limit
        extra = {"filter": flt.expr} if flt and flt.expr else {}
        results = self._conn.call(
            self._client.search,
            name,
            data=data,
            anns_field=field,
            limit=fetch,
            output_fields=_SEARCH_FIELDS,
            search_params={"metric_type": metric},
            **extra,
        )
        if post is None:
            return results
        return [
            [h for h in hits if post(str(h.get("entity", h).get("source", "")))][:limit]
            for hits in results
        ]

    def _fused_search(
        self,
        name: str,
        data: list[list[float]],
        texts: list[str],
        top_k: int,
        flt: MilvusFilter | None = None,
    ) -> list[list[dict[str, Any]]]:
        """Dense and BM25 lists fused by weighted reciprocal rank (k: hybrid_rrf_k), computed here so the
        dense list can weigh more than BM25's (Milvus's RRFRanker weighs both alike), and both
        lists come from one batched search each instead of one hybrid call per query.

        RRF scores a chunk by its ranks in the candidate lists, so the lists' length must not
        follow top_k: with a window of 2 x top_k, a chunk ranked 3rd in both lists was cut at
        top_k 1 and beat the top hit at top_k 2, so a larger top_k dropped a result a smaller
        one returned. A fixed window makes every top k a prefix of any larger top k up to it.
        """
        window = max(self._settings.hybrid_candidates, top_k)
        dense = self._search_field(name, data, "vector", window, flt)
        sparse = self._search_field(name, texts, "sparse", window, flt)
        weights = (self._settings.dense_weight, 1.0)
        rrf_k = self._settings.hybrid_rrf_k
        fused = []
        for lists in zip(dense, sparse, strict=True):
            scores: dict[str, float] = {}
            raw: dict[str, dict[str, Any]] = {}
            for weight, hits in zip(weights, lists, strict=True):
                for rank, hit in enumerate(hits, start=1):
                    key = str(hit.get("id"))
                    scores[key] = scores.get(key, 0.0) + weight / (rrf_k + rank)
                    raw.setdefault(key, hit)
            # sorted() is stable: ties keep dense-then-BM25 order, independent of top_k.
            ranked = sorted(scores, key=lambda key: -scores[key])[:top_k]
            fused.append([{**raw[key], "distance": scores[key]} for key in ranked])
        return fused

    def close(self) -> None:
        self._conn.close()


def _new_version() -> str:
    return uuid.uuid4().hex


def _chunk_row(c: Chunk, vector: np.ndarray) -> dict[str, Any]:
    # BM25 runs on the ``text`` field, so it holds what is indexed (context prefix + text);
    # the passage a reader sees goes to meta["body"] when the two differ.
    indexed = c.indexed_text
    meta: dict[str, Any] = {
        "start": c.start,
        "end": c.end,
        "pages": c.pages,
        "heading": c.heading,
        "file_type": c.file_type,
    }
    if indexed != c.text:
        meta["body"] = _truncate_utf8(c.text, _TEXT_MAX)
    if c.record_id is not None:
        meta["record_id"] = c.record_id
    # What filters read: the first and last page, the file's modification time, and the
    # loader's metadata (e-mail from/date...).
    if c.pages:
        meta["page"], meta["page_end"] = min(c.pages), max(c.pages)
    if c.modified is not None:
        meta["modified"] = c.modified
    if c.doc_meta:
        meta["doc"] = c.doc_meta
    return {
        "id": c.id,
        "doc_id": c.doc_id,
        "source": c.source[:SOURCE_MAX],
        "content_hash": c.content_hash,
        "chunk_index": c.index,
        "text": _truncate_utf8(indexed, _TEXT_MAX),
        "vector": vector.tolist(),
        "meta": meta,
    }


def _to_hit(raw: dict[str, Any], collection: str) -> Hit:
    ent = raw.get("entity", raw)
    meta = ent.get("meta") or {}
    pages = meta.get("pages") or []
    body = meta.get("body")
    return Hit(
        id=str(raw.get("id", ent.get("id"))),
        text=body if isinstance(body, str) else ent.get("text", ""),
        source=ent.get("source", ""),
        score=float(raw.get("distance", 0.0)),
        collection=collection,
        start=meta.get("start"),
        end=meta.get("end"),
        page=min(pages) if pages else None,
        heading=meta.get("heading"),
        doc_id=ent.get("doc_id"),
        page_end=max(pages) if pages else None,
        record_id=meta.get("record_id"),
    )


def _deleted_count(res: Any) -> int:
    if isinstance(res, dict):
        return int(res.get("delete_count", len(res.get("ids", []))))
    if isinstance(res, list):
        return len(res)
    return int(getattr(res, "delete_count", 0) or 0)


def _truncate_utf8(text: str, max_bytes: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")
