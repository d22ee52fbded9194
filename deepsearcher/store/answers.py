"""The answer cache's storage in Milvus: one internal collection, ``_deepsearcher_answers``,
beside the user collections of the same store, so every process serving that store (a Lite
file or a Milvus server) shares the cache and a restart keeps it."""

from __future__ import annotations

from deepsearcher.store._client import MilvusConnection
from deepsearcher.store.base import INTERNAL_PREFIX

ANSWERS_COLLECTION = f"{INTERNAL_PREFIX}_answers"
PAYLOAD_MAX = 65535
_KEY_MAX = 64


class MilvusAnswerStore:
    """``AnswerStore`` over one Milvus connection; the collection is made on the first put."""

    def __init__(self, conn: MilvusConnection) -> None:
        self._conn = conn

    def _ready(self, create: bool) -> bool:
        if not self._conn.has(ANSWERS_COLLECTION):
            if not create:
                return False
            self._create()
        self._conn.ensure_loaded(ANSWERS_COLLECTION)
        return True

    def _create(self) -> None:
        from pymilvus import DataType  # lazy, as in MilvusConnection

        client = self._conn.client
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("key", DataType.VARCHAR, is_primary=True, max_length=_KEY_MAX)
        schema.add_field("expires_at", DataType.DOUBLE)
        schema.add_field("payload", DataType.VARCHAR, max_length=PAYLOAD_MAX)
        # Milvus requires a vector field in every collection; this one is never searched.
        schema.add_field("_unused", DataType.FLOAT_VECTOR, dim=2)
        index = client.prepare_index_params()
        index.add_index(field_name="_unused", index_type="FLAT", metric_type="L2")
        self._conn.call(
            client.create_collection, ANSWERS_COLLECTION, schema=schema, index_params=index
        )

    def get_answer(self, key: str, now: float) -> str | None:
        if not self._ready(create=False):
            return None
        rows = self._conn.call(
            self._conn.client.get,
            ANSWERS_COLLECTION,
            ids=[key],
            output_fields=["expires_at", "payload"],
        )
        if not rows or float(rows[0]["expires_at"]) <= now:
            return None
        return str(rows[0]["payload"])

    def put_answer(self, key: str, payload: str, expires_at: float) -> None:
        """Store ``payload`` under ``key``; a payload over the field's limit is not stored."""
        if len(payload) > PAYLOAD_MAX or len(key) > _KEY_MAX:
            return
        self._ready(create=True)
        row = {"key": key, "expires_at": expires_at, "payload": payload, "_unused": [0.0, 0.0]}
        self._conn.call(self._conn.client.upsert, ANSWERS_COLLECTION, [row])

    def prune_answers(self, now: float) -> None:
        if self._ready(create=False):
            self._conn.call(
                self._conn.client.delete, ANSWERS_COLLECTION, filter=f"expires_at <= {now!r}"
            )
