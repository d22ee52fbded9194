"""Load leases (``LoadLeases``): who may load into a collection now. How a load waits for,
holds and renews its lease, and why the acquisition below is safe, is in
``deepsearcher.load_lease``.

On a Milvus server the claims are rows of one internal collection, ``_deepsearcher_leases``
(one row per contender and collection), read with Strong consistency: a read sees every write
acknowledged before it began. Milvus has no conditional write, so a claim wins by order, not
by an atomic swap: the holder is the earliest (claim time, owner) claim that has not expired,
and a contender that finds itself earliest waits a settle delay and reads again before it
believes it.

A Milvus Lite file is opened by one process at a time (its LOCK file), so a Lite store's loads
only need ordering within that process: ``LocalLoadLeases`` keeps the claims in memory under a
lock, where reading and claiming are one step and no settle delay is needed. They belong to one
store object: two ``MilvusStore`` objects opened on one Lite file in one process do not see
each other's claims (``DeepSearcher`` keeps one store).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from deepsearcher.errors import StoreError
from deepsearcher.store._client import MilvusConnection
from deepsearcher.store.base import INTERNAL_PREFIX, LeaseClaim

LEASES_COLLECTION = f"{INTERNAL_PREFIX}_leases"
_NAME_MAX = 256
_FIELDS = ["owner", "claimed_at", "expires_at"]
Clock = Callable[[], float]


def earliest_live(claims: Sequence[LeaseClaim], now: float) -> LeaseClaim | None:
    """The holder among ``claims``: the earliest (claim time, owner) one not expired."""
    live = [c for c in claims if c.expires_at > now]
    return min(live, key=LeaseClaim.rank) if live else None


class MilvusLoadLeases:
    """``LoadLeases`` over one Milvus connection; the collection is made on the first claim."""

    def __init__(
        self,
        conn: MilvusConnection,
        *,
        clock: Clock = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._conn = conn
        self._clock = clock
        self._sleep = sleep

    # -- storage --------------------------------------------------------------------------------

    def _ready(self, create: bool) -> bool:
        if not self._conn.has(LEASES_COLLECTION):
            if not create:
                return False
            try:
                self._create()
            except StoreError:
                # Two first loaders create it at once: one create fails, the collection exists.
                if not self._conn.has(LEASES_COLLECTION):
                    raise
        self._conn.ensure_loaded(LEASES_COLLECTION)
        return True

    def _create(self) -> None:
        from pymilvus import DataType  # lazy, as in MilvusConnection

        client = self._conn.client
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("claim", DataType.VARCHAR, is_primary=True, max_length=2 * _NAME_MAX + 1)
        schema.add_field("collection", DataType.VARCHAR, max_length=_NAME_MAX)
        schema.add_field("owner", DataType.VARCHAR, max_length=_NAME_MAX)
        schema.add_field("claimed_at", DataType.DOUBLE)
        schema.add_field("expires_at", DataType.DOUBLE)
        # Milvus requires a vector field in every collection; this one is never searched.
        schema.add_field("_unused", DataType.FLOAT_VECTOR, dim=2)
        index = client.prepare_index_params()
        index.add_index(field_name="_unused", index_type="FLAT", metric_type="L2")
        self._conn.call(
            client.create_collection,
            LEASES_COLLECTION,
            schema=schema,
            index_params=index,
            consistency_level="Strong",
        )

    def _claims(self, collection: str) -> list[LeaseClaim]:
        rows = self._conn.call(
            self._conn.client.query,
            LEASES_COLLECTION,
            filter=f"collection == {json.dumps(collection)}",
            output_fields=_FIELDS,
            # The protocol rests on this: a read sees every claim written before it began.
            consistency_level="Strong",
        )
        return [
            LeaseClaim(str(r["owner"]), float(r["claimed_at"]), float(r["expires_at"]))
            for r in rows
        ]

    def _put(self, collection: str, claim: LeaseClaim) -> None:
        row: dict[str, Any] = {
            "claim": _key(collection, claim.owner),
            "collection": collection,
            "owner": claim.owner,
            "claimed_at": claim.claimed_at,
            "expires_at": claim.expires_at,
            "_unused": [0.0, 0.0],
        }
        self._conn.call(self._conn.client.upsert, LEASES_COLLECTION, [row])

    def _delete(self, collection: str, owners: Sequence[str]) -> None:
        if owners:
            ids = [_key(collection, o) for o in owners]
            self._conn.call(self._conn.client.delete, LEASES_COLLECTION, ids=ids)

    # -- LoadLeases -----------------------------------------------------------------------------

    def holder(self, collection: str) -> LeaseClaim | None:
        if not self._ready(create=False):
            return None
        return earliest_live(self._claims(collection), self._clock())

    def try_acquire(
        self, collection: str, owner: str, ttl_s: float, settle_s: float
    ) -> LeaseClaim | None:
        """Claim, read, settle, read again (see ``deepsearcher.load_lease`` for why)."""
        self._ready(create=True)
        now = self._clock()
        claims = self._claims(collection)
        others = [c for c in claims if c.owner != owner and c.expires_at > now]
        if others:
            # A holder or a contender: claiming now could only lose (its claim is earlier).
            return min(others, key=LeaseClaim.rank)
        # Lapsed claims (a killed loader's) go, so they do not accumulate.
        self._delete(collection, [c.owner for c in claims if c.expires_at <= now])
        # The claim time is taken just before the write: the settle delay must cover the time
        # from here until the write is acknowledged.
        now = self._clock()
        mine = LeaseClaim(owner, now, now + ttl_s)
        self._put(collection, mine)
        for delay in (0.0, settle_s):
            if delay:
                self._sleep(delay)
            winner = earliest_live(self._claims(collection), self._clock())
            if winner is None or winner.owner != owner:
                self._delete(collection, [owner])
                return winner
        return mine

    def renew(
        self, collection: str, claim: LeaseClaim, ttl_s: float, margin_s: float
    ) -> LeaseClaim | None:
        # A claim within margin_s of its expiry is let go, never extended: the write could land
        # after another loader counted it expired and took over.
        if self._clock() >= claim.expires_at - margin_s:
            return None
        winner = earliest_live(self._claims(collection), self._clock())
        if winner is None or winner.owner != claim.owner:
            return None
        now = self._clock()
        if now >= claim.expires_at - margin_s:
            return None
        renewed = LeaseClaim(claim.owner, claim.claimed_at, now + ttl_s)
        self._put(collection, renewed)
        return renewed

    def release(self, collection: str, owner: str) -> None:
        if self._ready(create=False):
            self._delete(collection, [owner])


class LocalLoadLeases:
    """``LoadLeases`` in this process's memory: for a store only this process can open (a
    Milvus Lite file) and for tests. Claiming is atomic here, so the settle delay is skipped."""

    def __init__(self, *, clock: Clock = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._claims: dict[str, dict[str, LeaseClaim]] = {}

    def holder(self, collection: str) -> LeaseClaim | None:
        with self._lock:
            return earliest_live(list(self._claims.get(collection, {}).values()), self._clock())

    def try_acquire(
        self, collection: str, owner: str, ttl_s: float, settle_s: float
    ) -> LeaseClaim | None:
        with self._lock:
            now = self._clock()
            claims = self._claims.setdefault(collection, {})
            for key in [k for k, c in claims.items() if c.expires_at <= now]:
                del claims[key]
            others = [c for c in claims.values() if c.owner != owner]
            if others:
                return min(others, key=LeaseClaim.rank)
            claims[owner] = LeaseClaim(owner, now, now + ttl_s)
            return claims[owner]

    def renew(
        self, collection: str, claim: LeaseClaim, ttl_s: float, margin_s: float
    ) -> LeaseClaim | None:
        with self._lock:
            now = self._clock()
            held = self._claims.get(collection, {}).get(claim.owner)
            if held is None or now >= held.expires_at - margin_s:
                return None
            renewed = LeaseClaim(claim.owner, held.claimed_at, now + ttl_s)
            self._claims[collection][claim.owner] = renewed
            return renewed

    def release(self, collection: str, owner: str) -> None:
        with self._lock:
            self._claims.get(collection, {}).pop(owner, None)


def _key(collection: str, owner: str) -> str:
    # Collection names cannot hold "/", so the key splits one way only.
    return f"{collection}/{owner}"
