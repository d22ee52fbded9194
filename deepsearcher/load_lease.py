"""One load at a time per collection, across processes and hosts: the load lease.

Why loads collide without it
----------------------------
Chunk ids are deterministic and chunks are upserted, so two loaders writing the same file
version only overwrite each other. The damage comes from each loader acting on its own reading
of the manifest and the files, read at different moments:

* A file edited between two loaders' reads: A hashed v1, B hashed v2. Each finishes the file by
  deleting the document's chunks of any other hash ("stale") and then recording its own hash.
  Interleaved as B upserts v2, A deletes non-v1 (B's chunks), A records v1, B deletes non-v2
  (A's chunks), B records v2, the manifest says v2 (the file's real content) while no chunk of
  the file is left: every later load skips it as unchanged, so it is lost for good. Other
  orders leave v1 chunks under a v2 record (stale chunks nobody removes) or the reverse.
* ``--rebuild`` drops and recreates the collection while another loader writes: that loader's
  chunks written before the drop are gone, its manifest records written after it remain, so
  its files are skipped forever.
* ``--prune`` deletes the chunks and record of a file whose path is gone; a loader that hashed
  the file just before it was removed (or that sees it re-created) writes them back in
  between, or a pruner's delete lands after the other loader's new record.
* Two first loads create the collection at once: one fails on "already exists".
* Both read the manifest before either recorded anything, so both embed every file: twice the
  work for the same result.

A load while servers answer is not a collision: servers only read. They may see a changed file
with both versions' chunks for the moment between its new chunks' insert and the stale chunks'
delete, and the collection's version changes before and after the load, so no cached answer
outlives it.

The lease
---------
Every load (``Ingestor.aload``, whatever pipeline it runs) first takes its collection's lease,
kept in the store (``VectorStore.leases``) so every process of that store sees it: a claim row
with its owner ("host:pid:random"), the claim time and an expiry. The holder renews it from a
background thread every third of ``loading.lease_ttl_s``; the load ends by deleting it. A load
that finds the lease held waits, saying who holds it and until when (``lease_wait_s`` bounds
the wait; the CLI's ``--no-wait`` makes it 0). A loader killed with ``kill -9`` stops renewing,
so its claim lapses within the TTL and the next loader takes over: chunks before records makes
the dead load's partial work either complete (recorded) or redone.

Acquisition without compare-and-swap (``MilvusLoadLeases.try_acquire``)
-----------------------------------------------------------------------
Milvus has no conditional write. A contender (1) reads the live claims; if another owner has
one, it waits; else (2) writes its own claim with claim time ``t`` = its clock now, (3) reads
all live claims with Strong consistency: if the earliest (claim time, owner) is not its own, it
deletes its claim and waits; (4) sleeps the settle delay S and reads again: still earliest, it
holds the lease; otherwise it deletes its claim and waits.

Assumptions: a claim's write is acknowledged within L of its claim time being taken; hosts'
clocks differ by at most E; S > L + E; and a Strong read sees every write acknowledged before
it began (Milvus's Strong level).

Claim: two contenders never both pass step (4) while both claims are live. Say A and B both
pass, and A's claim is the later: (t_B, B) < (t_A, A). B's claim time was taken at real time
r_B <= r_A + E (t_B <= t_A and the clocks differ by at most E), so it was acknowledged by
r_B + L <= r_A + E + L < r_A + S. A's second read began after r_A + S, so it saw B's claim (live:
TTL > S) as earlier than its own, and A did not pass. A contender that arrives once A holds,
claims at r_C >= r_A + S, so t_C >= t_A + S - E > t_A: it loses to A at step (3) or (4).

The holder keeps the lease only while it renews in time: a renewal is refused once its clock is
within a margin (S) of the expiry, so a renewal always lands before any contender (whose clock
may run E ahead) counts the claim expired; a lapsed claim is never revived. Before each chunk
write the holder checks its local deadline, and before each manifest write or prune it also
re-reads the claims (Strong): a loader that lost its lease (a pause longer than the TTL, an
outage of the store) stops with ``LoadLeaseLostError`` instead of writing over its successor.
What remains is the usual limit of leases without fencing: a write issued just before the
deadline must land within the margin. A Milvus Lite file admits one process, so its leases are
kept in process memory, claimed atomically, and need no settle delay.

Not covered: ``collections drop`` does not take the lease (a load running meanwhile fails on
its next write, and a rerun recreates the collection), and a killed load's chunks of a file
that was new to the collection and is deleted before the next load stay until ``--rebuild``
(``--prune`` finds deleted files through their manifest records, which such a file never got).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import DeepSearcherError, LoadBusyError, LoadLeaseLostError
from deepsearcher.store import LeaseClaim, LoadLeases

logger = logging.getLogger(__name__)

# A waiting loader polls this often at most: a released lease is taken within it.
_MAX_POLL_S = 2.0


def new_owner() -> str:
    """This loader's owner id: host and pid for people, a random part so two loaders in one
    process (or a reused pid) differ."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def describe_owner(owner: str) -> str:
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return f"{host} pid {pid}" if pid.isdigit() else owner


def _clock_text(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S UTC")


def describe_holder(collection: str, claim: LeaseClaim) -> str:
    """'collection 'docs' is being loaded by host pid 42 (lease until 20:51:03 UTC)'."""
    return (
        f"collection '{collection}' is being loaded by {describe_owner(claim.owner)} "
        f"(lease until {_clock_text(claim.expires_at)}, renewed while that load runs)"
    )


class HeldLease:
    """A held load lease, renewed by a daemon thread until ``release``. ``check`` (local, no
    I/O) and ``verify`` (reads the store; blocking) raise ``LoadLeaseLostError`` once the lease
    may belong to someone else."""

    def __init__(
        self,
        leases: LoadLeases,
        collection: str,
        claim: LeaseClaim,
        settings: LoadingSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._leases = leases
        self.collection = collection
        self._claim = claim
        self._ttl_s = settings.lease_ttl_s
        self._margin_s = settings.lease_settle_s
        self._clock = clock
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._heartbeat, name=f"deepsearcher-lease-{collection}", daemon=True
        )
        self._thread.start()

    @property
    def claim(self) -> LeaseClaim:
        return self._claim

    def _heartbeat(self) -> None:
        interval = self._ttl_s / 3
        wait = interval
        while not self._stop.wait(wait):
            try:
                renewed = self._leases.renew(
                    self.collection, self._claim, self._ttl_s, self._margin_s
                )
            except DeepSearcherError as exc:
                # The store may be back before the claim lapses: retry sooner than usual.
                logger.warning("could not renew the load lease of '%s': %s", self.collection, exc)
                wait = min(interval, 1.0)
                continue
            if renewed is None:
                self._lost = "it was not renewed before it expired"
                logger.warning("lost the load lease of '%s': %s", self.collection, self._lost)
                return
            self._claim = renewed
            wait = interval

    def check(self) -> None:
        """Raise unless the lease is still surely ours by the local clock."""
        if self._lost is None and self._clock() >= self._claim.expires_at - self._margin_s:
            self._lost = "it expired before it could be renewed"
        if self._lost is not None:
            raise LoadLeaseLostError(
                f"this load of '{self.collection}' lost its load lease ({self._lost}) and "
                "stopped writing; another load may have taken over",
            )

    def verify(self) -> None:
        """``check``, then confirm in the store that this claim is still the holder."""
        self.check()
        holder = self._leases.holder(self.collection)
        if holder is None or holder.owner != self._claim.owner:
            who = f"held by {describe_owner(holder.owner)}" if holder else "no longer held"
            self._lost = f"the lease is {who}"
        self.check()

    async def averify(self) -> None:
        """``verify`` in a worker thread."""
        await asyncio.to_thread(self.verify)

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        try:
            self._leases.release(self.collection, self._claim.owner)
        except DeepSearcherError as exc:
            logger.warning(
                "could not release the load lease of '%s' (it lapses in %.0f s): %s",
                self.collection,
                self._ttl_s,
                exc,
            )


async def acquire_load_lease(
    leases: LoadLeases,
    collection: str,
    settings: LoadingSettings,
    on_wait: Callable[[LeaseClaim], None] | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> HeldLease:
    """Wait for and take ``collection``'s load lease. ``on_wait`` hears of each new holder met
    while waiting; past ``settings.lease_wait_s``, ``LoadBusyError``."""
    owner = new_owner()
    ttl, settle = settings.lease_ttl_s, settings.lease_settle_s
    deadline = None if settings.lease_wait_s is None else clock() + settings.lease_wait_s
    poll = min(_MAX_POLL_S, ttl / 4)
    seen: str | None = None
    while True:
        try:
            got = await asyncio.to_thread(leases.try_acquire, collection, owner, ttl, settle)
        except BaseException:
            # Cancelled mid-claim (Ctrl-C): a claim left behind would block others for a TTL.
            await asyncio.shield(asyncio.to_thread(_release_quietly, leases, collection, owner))
            raise
        if got is not None and got.owner == owner:
            logger.debug("holding the load lease of '%s' as %s", collection, owner)
            return HeldLease(leases, collection, got, settings, clock)
        if got is not None and deadline is not None and clock() >= deadline:
            raise LoadBusyError(
                describe_holder(collection, got),
                "wait for that load to finish (or let this one wait: drop --no-wait, raise "
                "loading.lease_wait_s); a killed loader's lease lapses after "
                f"loading.lease_ttl_s ({ttl:g} s)",
            )
        if got is not None and got.owner != seen:
            seen = got.owner
            if on_wait is not None:
                on_wait(got)
        # Jittered, so contenders that lost to each other do not meet again in step.
        await asyncio.sleep(poll * random.uniform(0.5, 1.0))


def _release_quietly(leases: LoadLeases, collection: str, owner: str) -> None:
    try:
        leases.release(collection, owner)
    except DeepSearcherError:
        logger.debug("could not withdraw the claim on '%s'", collection, exc_info=True)


@asynccontextmanager
async def hold_load_lease(
    leases: LoadLeases,
    collection: str,
    settings: LoadingSettings,
    on_wait: Callable[[LeaseClaim], None] | None = None,
) -> AsyncIterator[HeldLease]:
    """``async with hold_load_lease(...) as lease:`` the load; released however it ends."""
    lease = await acquire_load_lease(leases, collection, settings, on_wait)
    try:
        yield lease
    finally:
        await asyncio.shield(asyncio.to_thread(lease.release))
