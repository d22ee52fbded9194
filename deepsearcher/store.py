"""Vector stores. ``MilvusStore`` speaks to Milvus Lite (a local ``.db`` directory), a Milvus
server or Zilliz Cloud through the same ``MilvusClient``; only the URI differs.

Each user collection ``NAME`` has a companion ``NAME__files`` manifest with one row per loaded
file (path, content hash, chunk count). A file's row is written only after all its chunks are
in, so a load killed at any point is finished by simply loading again: chunk ids are
deterministic, upserts overwrite, and files without a manifest row are redone.

All methods are blocking; async callers run them with ``asyncio.to_thread`` (pymilvus's async
client does not work with Milvus Lite).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from deepsearcher.config import VectorStoreSettings
from deepsearcher.errors import (
    CollectionNotFoundError,
    IncompatibleCollectionError,
    StoreError,
    StoreLockedError,
)
from deepsearcher.types import Chunk, Hit

logger = logging.getLogger(__name__)

MANIFEST_SUFFIX = "__files"
_META_KEY = "deepsearcher.meta"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,200}$")
_TEXT_MAX = 65535
_SOURCE_MAX = 4096
_QUERY_BATCH = 1000
# BM25 analyzers by config name. Milvus Lite knows only the standard and jieba tokenizers (no
# icu, no language_identifier); jieba cuts Chinese into words and Latin-script text at spaces
# and punctuation, so one jieba collection serves both. The lowercase filter is explicit for
# Milvus servers; "chinese" keeps its original parameters so existing collections stay valid.
_ANALYZERS: dict[str, dict[str, Any]] = {
    "standard": {"type": "standard"},
    "chinese": {"tokenizer": "jieba"},
    "multilingual": {"tokenizer": "jieba", "filter": ["lowercase"]},
}


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


@dataclass
class FileRecord:
    source: str
    doc_id: str
    content_hash: str
    chunks: int
    extra: dict[str, Any] = field(default_factory=dict)


class VectorStore(Protocol):
    """Chunk storage and similarity search, one logical collection per document set."""

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
    def file_records(self, name: str) -> dict[str, FileRecord]: ...
    def put_file_records(self, name: str, records: Sequence[FileRecord]) -> None: ...
    def delete_file_record(self, name: str, source: str) -> None: ...
    def search(
        self,
        name: str,
        vectors: np.ndarray,
        top_k: int,
        *,
        texts: Sequence[str] | None = None,
        hybrid: bool = False,
    ) -> list[list[Hit]]: ...
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
    if not _NAME_RE.match(name) or name.endswith(MANIFEST_SUFFIX):
        raise StoreError(
            f"invalid collection name '{name}'",
            "use letters, digits and underscores, starting with a letter (not ending in __files)",
        )
    return name


def _is_remote(uri: str) -> bool:
    return uri.startswith(("http://", "https://", "tcp://", "grpc://"))


class _DropLiteIteratorNoise(logging.Filter):
    """Milvus Lite does not implement AllocTimestamp; pymilvus's query iterator asks for it,
    falls back to a client timestamp (correct), and Lite's gRPC server logs a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Method not implemented" not in record.getMessage()


def _quiet_lite_grpc() -> None:
    grpc_log = logging.getLogger("grpc._server")
    if not any(isinstance(f, _DropLiteIteratorNoise) for f in grpc_log.filters):
        grpc_log.addFilter(_DropLiteIteratorNoise())


class MilvusStore:
    """Milvus through ``pymilvus.MilvusClient``: Lite file by default, server/Zilliz by URI."""

    def __init__(self, settings: VectorStoreSettings) -> None:
        from pymilvus import MilvusClient

        self._settings = settings
        self._remote = _is_remote(settings.uri)
        uri = settings.uri if self._remote else str(Path(settings.uri).expanduser().resolve())
        self.uri = uri
        token = os.environ.get(settings.token_env, "")
        # Milvus Lite runs in-process; one lock keeps its client single-threaded. A server
        # handles concurrent requests itself.
        self._lock: threading.Lock | None = None if self._remote else threading.Lock()
        self._loaded: set[str] = set()
        if not self._remote:
            _quiet_lite_grpc()
        try:
            if not self._remote:
                Path(uri).parent.mkdir(parents=True, exist_ok=True)
            self._client = MilvusClient(uri=uri, token=token)
        except Exception as exc:
            raise _open_error(exc, settings.uri, self._remote) from exc

    # -- helpers ---------------------------------------------------------------------------

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            if self._lock is None:
                return fn(*args, **kwargs)
            with self._lock:
                return fn(*args, **kwargs)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(
                f"Milvus {getattr(fn, '__name__', 'call')} failed: {_short(exc)}",
                "check that the store is reachable and the collection exists",
            ) from exc

    def _has(self, name: str) -> bool:
        return bool(self._call(self._client.has_collection, name))

    def _require(self, name: str) -> None:
        if not self._has(name):
            raise CollectionNotFoundError(f"collection '{name}' does not exist")
        self._ensure_loaded(name)

    def _ensure_loaded(self, name: str) -> None:
        # A database reopened after a crash holds its collections "released"; queries then
        # fail until they are loaded into memory again. Loading a loaded collection is a no-op.
        if name not in self._loaded:
            self._call(self._client.load_collection, name)
            self._loaded.add(name)

    # -- collections ------------------------------------------------------------------------

    def list_collections(self) -> list[CollectionInfo]:
        names = sorted(self._call(self._client.list_collections))
        infos = []
        for name in names:
            if name.endswith(MANIFEST_SUFFIX):
                continue
            files = self.count(name + MANIFEST_SUFFIX) if name + MANIFEST_SUFFIX in names else 0
            infos.append(CollectionInfo(name, self.count(name), self.get_meta(name), files))
        return infos

    def get_meta(self, name: str) -> CollectionMeta | None:
        if not self._has(name):
            return None
        desc = self._call(self._client.describe_collection, name)
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
        if self._has(name):
            existing = self.get_meta(name)
            if existing is None:
                raise IncompatibleCollectionError(
                    f"collection '{name}' was not created by deepsearcher",
                    f"use another --collection, or --rebuild to replace '{name}'",
                )
            check_compatible(name, existing, meta)
            if meta.description and meta.description != existing.description:
                self.set_description(name, meta.description)
            if not self._has(name + MANIFEST_SUFFIX):
                self._create_manifest(name)
            return
        self._create_chunks_collection(name, meta)
        self._create_manifest(name)

    def _create_chunks_collection(self, name: str, meta: CollectionMeta) -> None:
        from pymilvus import DataType, Function, FunctionType

        client = self._client
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("doc_id", DataType.VARCHAR, max_length=64)
        schema.add_field("source", DataType.VARCHAR, max_length=_SOURCE_MAX)
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
        self._call(
            client.create_collection,
            name,
            schema=schema,
            index_params=index,
            properties={_META_KEY: json.dumps(asdict(meta))},
        )

    def _create_manifest(self, name: str) -> None:
        from pymilvus import DataType

        client = self._client
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("source", DataType.VARCHAR, is_primary=True, max_length=_SOURCE_MAX)
        schema.add_field("doc_id", DataType.VARCHAR, max_length=64)
        schema.add_field("content_hash", DataType.VARCHAR, max_length=64)
        schema.add_field("chunks", DataType.INT64)
        schema.add_field("extra", DataType.JSON)
        # Milvus requires a vector field in every collection; this one is never searched.
        schema.add_field("_unused", DataType.FLOAT_VECTOR, dim=2)
        index = client.prepare_index_params()
        index.add_index(field_name="_unused", index_type="FLAT", metric_type="L2")
        self._call(
            client.create_collection, name + MANIFEST_SUFFIX, schema=schema, index_params=index
        )

    def set_description(self, name: str, description: str) -> None:
        meta = self.get_meta(name)
        if meta is None:
            raise CollectionNotFoundError(f"collection '{name}' does not exist")
        meta.description = description
        self._call(
            self._client.alter_collection_properties,
            name,
            properties={_META_KEY: json.dumps(asdict(meta))},
        )

    def drop_collection(self, name: str) -> None:
        for n in (name, name + MANIFEST_SUFFIX):
            if self._has(n):
                self._call(self._client.drop_collection, n)
            self._loaded.discard(n)

    def count(self, name: str) -> int:
        if not self._has(name):
            return 0
        self._ensure_loaded(name)
        res = self._call(self._client.query, name, filter="", output_fields=["count(*)"])
        return int(res[0]["count(*)"]) if res else 0

    # -- chunks -----------------------------------------------------------------------------

    def upsert_chunks(self, name: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        if not chunks:
            return
        self._ensure_loaded(name)
        rows = [_chunk_row(c, vectors[i]) for i, c in enumerate(chunks)]
        self._call(self._client.upsert, name, rows)

    def delete_stale_chunks(self, name: str, doc_id: str, keep_hash: str | None) -> int:
        """Delete a document's chunks except those of ``keep_hash`` (all when None)."""
        self._ensure_loaded(name)
        expr = f'doc_id == "{doc_id}"'
        if keep_hash is not None:
            expr += f' and content_hash != "{keep_hash}"'
        res = self._call(self._client.delete, name, filter=expr)
        return _deleted_count(res)

    # -- manifest ---------------------------------------------------------------------------

    def file_records(self, name: str) -> dict[str, FileRecord]:
        manifest = name + MANIFEST_SUFFIX
        if not self._has(manifest):
            return {}
        self._ensure_loaded(manifest)
        out: dict[str, FileRecord] = {}
        fields = ["source", "doc_id", "content_hash", "chunks", "extra"]
        for row in self._iterate(manifest, fields):
            out[row["source"]] = FileRecord(
                row["source"],
                row["doc_id"],
                row["content_hash"],
                int(row["chunks"]),
                row.get("extra") or {},
            )
        return out

    def _iterate(self, name: str, fields: list[str]) -> Iterable[dict[str, Any]]:
        it = self._call(
            self._client.query_iterator,
            name,
            batch_size=_QUERY_BATCH,
            filter="",
            output_fields=fields,
        )
        try:
            while True:
                batch = self._call(it.next)
                if not batch:
                    break
                yield from batch
        finally:
            it.close()

    def put_file_records(self, name: str, records: Sequence[FileRecord]) -> None:
        """One upsert for many files: a corpus of small files finishes hundreds per insert
        batch, and one manifest write each cost 1-2 ms of Lite time per file."""
        if not records:
            return
        self._ensure_loaded(name + MANIFEST_SUFFIX)
        rows = [
            {
                "source": record.source[:_SOURCE_MAX],
                "doc_id": record.doc_id,
                "content_hash": record.content_hash,
                "chunks": record.chunks,
                "extra": record.extra,
                "_unused": [0.0, 0.0],
            }
            for record in records
        ]
        self._call(self._client.upsert, name + MANIFEST_SUFFIX, rows)

    def delete_file_record(self, name: str, source: str) -> None:
        self._ensure_loaded(name + MANIFEST_SUFFIX)
        self._call(self._client.delete, name + MANIFEST_SUFFIX, ids=[source])

    # -- search -----------------------------------------------------------------------------

    def search(
        self,
        name: str,
        vectors: np.ndarray,
        top_k: int,
        *,
        texts: Sequence[str] | None = None,
        hybrid: bool = False,
    ) -> list[list[Hit]]:
        self._require(name)
        fields = ["doc_id", "source", "text", "meta"]
        data = [v.tolist() for v in vectors]
        if hybrid and texts:
            results = self._fused_search(name, data, list(texts), top_k, fields)
        else:
            results = self._call(
                self._client.search,
                name,
                data=data,
                anns_field="vector",
                limit=top_k,
                output_fields=fields,
                search_params={"metric_type": "COSINE"},
            )
        return [[_to_hit(h, name) for h in per_query] for per_query in results]

    def _fused_search(
        self, name: str, data: list[list[float]], texts: list[str], top_k: int, fields: list[str]
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
        dense = self._call(
            self._client.search,
            name,
            data=data,
            anns_field="vector",
            limit=window,
            output_fields=fields,
            search_params={"metric_type": "COSINE"},
        )
        sparse = self._call(
            self._client.search,
            name,
            data=texts,
            anns_field="sparse",
            limit=window,
            output_fields=fields,
            search_params={"metric_type": "BM25"},
        )
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
        try:
            self._client.close()
        except Exception:  # closing twice or after a failed open is harmless
            logger.debug("closing Milvus client failed", exc_info=True)


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
    return {
        "id": c.id,
        "doc_id": c.doc_id,
        "source": c.source[:_SOURCE_MAX],
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


def _short(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}"[:300]


def lock_holders(db_dir: str | Path) -> list[str]:
    """Processes holding the Milvus Lite LOCK file open, as "pid (command)". Linux /proc only;
    elsewhere, or without permission, an empty list."""
    lock = Path(db_dir) / "LOCK"
    proc = Path("/proc")
    holders: list[str] = []
    if not lock.exists() or not proc.is_dir():
        return holders
    target = str(lock.resolve())
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            if any(os.readlink(fd) == target for fd in (pid_dir / "fd").iterdir()):
                argv = (pid_dir / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
                args = [a.decode(errors="replace") for a in argv]
                holders.append(f"{pid_dir.name} ({_shorten_command(args)})")
        except OSError:
            continue
    return holders


def _shorten_command(args: list[str], limit: int = 120) -> str:
    """The command line quoted as a shell would take it, cut between arguments (never inside
    one) once it passes ``limit`` characters; the program is always shown whole."""
    shown: list[str] = []
    for arg in args:
        quoted = shlex.quote(arg)
        if shown and sum(len(a) + 1 for a in shown) + len(quoted) > limit:
            return " ".join([*shown, "…"])
        shown.append(quoted)
    return " ".join(shown)


def _open_error(exc: Exception, uri: str, remote: bool) -> StoreError:
    text = f"{exc} {exc.__cause__ or ''}"
    if not remote and (
        "Open local milvus failed" in text or "DataDirLocked" in text or "lock" in text.lower()
    ):
        holders = lock_holders(uri)
        who = f" (held by process {', '.join(holders)})" if holders else ""
        return StoreLockedError(
            f"the Milvus Lite database {uri} is in use by another process{who}",
            "Milvus Lite allows one process per database: stop the other process (often "
            "`deepsearcher serve`), load through the server's POST /v1/load, or use a Milvus "
            "server URI (see README: milvus-lite server)",
        )
    if remote:
        return StoreError(
            f"could not connect to Milvus at {uri}: {_short(exc)}",
            "check that the server is running and vector_store.uri / the token are right",
        )
    return StoreError(
        f"could not open Milvus Lite at {uri}: {_short(exc)}", "check the path is writable"
    )


STORES: dict[str, Callable[[VectorStoreSettings], VectorStore]] = {"milvus": MilvusStore}


def build_store(settings: VectorStoreSettings) -> VectorStore:
    """Instantiate the vector store named by ``settings.provider``."""
    try:
        return STORES[settings.provider](settings)
    except KeyError:
        raise StoreError(
            f"unknown vector store provider '{settings.provider}'",
            f"use one of: {', '.join(STORES)}",
        ) from None
