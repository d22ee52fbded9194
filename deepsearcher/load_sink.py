"""``LoadSink``: where one load's stages report, whichever pipeline runs them (the local
threads of ``load_pipeline`` or Ray workers in ``ingest_ray``).

A pipeline tells the sink three things: a file failed (``fail``), a file was parsed into so
many chunks (``parsed``) or a batch was embedded (``emit``), and a batch of chunks with their
vectors is ready to store (``store_batch``). The sink keeps the load's ``LoadReport``, turns
each into a ``LoadProgress`` event for the caller's display, and writes under the collection's
load lease: chunks first, then, once a file's last chunk is in, its stale chunks are deleted
and its manifest record written, so a crash before the record only means re-embedding.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepsearcher.chunking import doc_id_for
from deepsearcher.config import LoadingSettings
from deepsearcher.load_lease import HeldLease, describe_holder, hold_load_lease
from deepsearcher.store import AsyncStore, FileRecord, LeaseClaim, LoadLeases
from deepsearcher.types import Chunk, LoadFailure, LoadProgress, LoadReport, ProgressCallback

logger = logging.getLogger(__name__)


@dataclass
class FileJob:
    """A file the manifest says needs loading, and how many of its chunks are still unstored."""

    path: Path
    source: str
    content_hash: str
    changed: bool  # a record existed with another hash (or --force)
    remaining: int = 0
    chunks: int = 0


class LoadSink:
    """One load's report, progress events and writes into ``collection`` of ``store``."""

    def __init__(
        self, store: AsyncStore, collection: str, on_progress: ProgressCallback | None = None
    ) -> None:
        self.store = store
        self.collection = collection
        self.report = LoadReport(collection=collection)
        self._on_progress = on_progress
        self._lease: HeldLease | None = None
        self._jobs: dict[str, FileJob] = {}

    @asynccontextmanager
    async def leased(self, leases: LoadLeases, settings: LoadingSettings) -> AsyncIterator[None]:
        """Hold the collection's load lease for the ``async with`` block; while another load
        of the collection holds it (any process or host on this store), wait and say who."""
        async with hold_load_lease(leases, self.collection, settings, self._waiting) as lease:
            self._lease = lease
            try:
                yield
            finally:
                self._lease = None

    # -- what the pipelines report --------------------------------------------------------------

    def emit(self, stage: str, **kw: object) -> None:
        """A ``LoadProgress`` event for the caller's display."""
        if self._on_progress is None:
            return
        try:
            self._on_progress(LoadProgress(stage, **kw))  # type: ignore[arg-type]
        except Exception:  # a broken progress display must not break a load
            logger.debug("progress callback failed", exc_info=True)

    def fail(self, source: str, reason: str) -> None:
        """``source`` is not loaded, for ``reason``; the load goes on with the other files."""
        self.report.files_failed += 1
        self.report.failures.append(LoadFailure(source, reason))
        self._log_unseen("skipped %s: %s", source, reason)
        self.emit("failed", path=source, message=reason)

    def expect(self, jobs: Sequence[FileJob]) -> None:
        """The files the pipeline will load, so stored batches can count each one down."""
        self._jobs = {j.source: j for j in jobs}

    def parsed(self, source: str, count: int) -> None:
        """``source`` makes ``count`` chunks. Said again (Ray reports a file's count with each
        batch holding its chunks), it changes nothing."""
        job = self._jobs[source]
        if job.chunks:
            return
        job.remaining = job.chunks = count
        self.emit("parsed", path=source, count=count)

    async def store_batch(self, chunks: list[Chunk], vectors: np.ndarray) -> None:
        """Write embedded chunks (the lease still held), then finish the files they complete."""
        self.check_lease()
        await self.store.upsert_chunks(self.collection, chunks, vectors)
        await self._finish_files(self._count_down(chunks))

    # -- the lease ------------------------------------------------------------------------------

    def check_lease(self) -> None:
        """Before a chunk write: raise if this load may have lost its lease (no I/O)."""
        if self._lease is not None:
            self._lease.check()

    async def verify_lease(self) -> None:
        """Before a manifest write or delete: re-read the lease in the store."""
        if self._lease is not None:
            await self._lease.averify()

    def _waiting(self, holder: LeaseClaim) -> None:
        message = describe_holder(self.collection, holder)
        self._log_unseen("%s; waiting", message)
        self.emit("waiting", message=message)

    def _log_unseen(self, message: str, *args: object) -> None:
        # A progress display shows it (the CLI prints one line for it); a warning as well
        # would report it twice. Without one, the log is where it is seen.
        level = logging.DEBUG if self._on_progress is not None else logging.WARNING
        logger.log(level, message, *args)

    # -- finishing files ------------------------------------------------------------------------

    def _count_down(self, batch: list[Chunk]) -> list[FileJob]:
        """The files whose last chunk is in ``batch`` (now stored)."""
        counts: dict[str, int] = {}
        for c in batch:
            counts[c.source] = counts.get(c.source, 0) + 1
        finished = []
        for source, n in counts.items():
            job = self._jobs[source]
            job.remaining -= n
            if job.remaining == 0:
                finished.append(job)
        return finished

    async def _finish_files(self, jobs: list[FileJob]) -> None:
        """Files whose chunks are all stored: drop their old chunks, then record them. The
        manifest records come last, so a crash before them only means re-embedding."""
        if not jobs:
            return
        # A loader that lost its lease would delete its successor's chunks as stale.
        await self.verify_lease()
        removed: dict[str, int] = {}
        for job in jobs:
            if job.changed:
                removed[job.source] = await self.store.delete_stale_chunks(
                    self.collection, doc_id_for(job.source), job.content_hash
                )
        records = [
            FileRecord(job.source, doc_id_for(job.source), job.content_hash, job.chunks)
            for job in jobs
        ]
        await self.store.put_file_records(self.collection, records)
        report = self.report
        for job in jobs:
            if job.changed:
                report.files_changed += 1
            else:
                report.files_new += 1
            report.chunks_added += job.chunks
            report.chunks_removed += removed.get(job.source, 0)
            self.emit("file_done", path=job.source, count=job.chunks)
