"""The file manifest in Milvus: each user collection ``NAME`` has a companion ``NAME__files``
collection with one row per loaded file (path, content hash, chunk count). A file's row is
written only after all its chunks are in, so a load killed at any point is finished by simply
loading again: chunk ids are deterministic, upserts overwrite, and files without a row are
redone."""

from __future__ import annotations

from collections.abc import Sequence

from deepsearcher.store._client import MilvusConnection
from deepsearcher.store.base import MANIFEST_SUFFIX, FileRecord

SOURCE_MAX = 4096
_FIELDS = ["source", "doc_id", "content_hash", "chunks", "extra"]


class MilvusFileManifest:
    """``FileManifest`` over the ``NAME__files`` collections of one Milvus connection."""

    def __init__(self, conn: MilvusConnection) -> None:
        self._conn = conn

    # -- admin, driven by the vector store's collection admin -----------------------------------

    def exists(self, name: str) -> bool:
        return self._conn.has(name + MANIFEST_SUFFIX)

    def create(self, name: str) -> None:
        from pymilvus import DataType  # lazy, as in MilvusConnection

        client = self._conn.client
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("source", DataType.VARCHAR, is_primary=True, max_length=SOURCE_MAX)
        schema.add_field("doc_id", DataType.VARCHAR, max_length=64)
        schema.add_field("content_hash", DataType.VARCHAR, max_length=64)
        schema.add_field("chunks", DataType.INT64)
        schema.add_field("extra", DataType.JSON)
        # Milvus requires a vector field in every collection; this one is never searched.
        schema.add_field("_unused", DataType.FLOAT_VECTOR, dim=2)
        index = client.prepare_index_params()
        index.add_index(field_name="_unused", index_type="FLAT", metric_type="L2")
        self._conn.call(
            client.create_collection, name + MANIFEST_SUFFIX, schema=schema, index_params=index
        )

    def drop(self, name: str) -> None:
        self._conn.drop(name + MANIFEST_SUFFIX)

    def count(self, name: str) -> int:
        return self._conn.count(name + MANIFEST_SUFFIX)

    # -- FileManifest -------------------------------------------------------------------------

    def file_records(self, name: str) -> dict[str, FileRecord]:
        manifest = name + MANIFEST_SUFFIX
        if not self._conn.has(manifest):
            return {}
        self._conn.ensure_loaded(manifest)
        out: dict[str, FileRecord] = {}
        for row in self._conn.iterate(manifest, _FIELDS):
            out[row["source"]] = FileRecord(
                row["source"],
                row["doc_id"],
                row["content_hash"],
                int(row["chunks"]),
                row.get("extra") or {},
            )
        return out

    def put_file_records(self, name: str, records: Sequence[FileRecord]) -> None:
        """One upsert for many files: a corpus of small files finishes hundreds per insert
        batch, and one manifest write each cost 1-2 ms of Lite time per file."""
        if not records:
            return
        self._conn.ensure_loaded(name + MANIFEST_SUFFIX)
        rows = [
            {
                "source": record.source[:SOURCE_MAX],
                "doc_id": record.doc_id,
                "content_hash": record.content_hash,
                "chunks": record.chunks,
                "extra": record.extra,
                "_unused": [0.0, 0.0],
            }
            for record in records
        ]
        self._conn.call(self._conn.client.upsert, name + MANIFEST_SUFFIX, rows)

    def delete_file_record(self, name: str, source: str) -> None:
        self._conn.ensure_loaded(name + MANIFEST_SUFFIX)
        self._conn.call(self._conn.client.delete, name + MANIFEST_SUFFIX, ids=[source])
