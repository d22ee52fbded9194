"""The load pipeline: discover -> hash -> parse+chunk -> embed -> upsert -> record.

Stages overlap: files are parsed in worker threads while the previous batch is being embedded
and the one before that inserted, so on a small machine the encoder (the slowest stage) stays
busy instead of waiting for parsing or Milvus.

Incremental and crash-safe: a file whose content hash matches its manifest record is skipped
without parsing; a changed file's new chunks are written before its old ones are deleted; the
manifest record is written last.

One load at a time per collection, across processes: ``aload`` runs under the collection's
load lease (``deepsearcher.load_lease``, which explains what goes wrong without it). Chunk
writes check the lease first and manifest writes re-read it, so a loader that lost it stops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepsearcher.chunking import Chunker, doc_id_for
from deepsearcher.config import Settings
from deepsearcher.embedding import Embedder
from deepsearcher.errors import DeepSearcherError, LoaderError
from deepsearcher.load_lease import HeldLease, describe_holder, hold_load_lease
from deepsearcher.options import LoadOptions
from deepsearcher.store import (
    CollectionMeta,
    FileManifest,
    FileRecord,
    LeaseClaim,
    LoadLeases,
    VectorStore,
    check_compatible,
)
from deepsearcher.types import Chunk, LoadFailure, LoadProgress, LoadReport, ProgressCallback
from loaders import discover_files, parse_file
from loaders.discovery import hash_file, modified_time

logger = logging.getLogger(__name__)

# Chunks per encode call: large enough to keep the encoder efficient, small enough that
# inserts and progress keep flowing.
_EMBED_BATCH = 256
_MAX_BUFFERED = 4 * _EMBED_BATCH


@dataclass
class _FileJob:
    path: Path
    source: str
    content_hash: str
    changed: bool  # a record existed with another hash (or --force)
    remaining: int = 0
    chunks: int = 0


class Ingestor:
    """Loads files into one collection. Construct per load; cheap."""

    def __init__(
        self,
        settings: Settings,
        store: VectorStore,
        embedder_factory: Callable[[], Embedder],
        on_progress: ProgressCallback | None = None,
        *,
        manifest: FileManifest | None = None,
        leases: LoadLeases | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        # The store's own manifest and leases unless others are handed in (tests, benchmarks).
        self.manifest = manifest if manifest is not None else store.manifest
        self.leases = leases if leases is not None else store.leases
        self._lease: HeldLease | None = None
        self._embedder_factory = embedder_factory
        self._on_progress = on_progress or (lambda _p: None)
        self._has_listener = on_progress is not None

    def _emit(self, stage: str, **kw: object) -> None:
        try:
            self._on_progress(LoadProgress(stage, **kw))  # type: ignore[arg-type]
        except Exception:  # a broken progress display must not break a load
            logger.debug("progress callback failed", exc_info=True)

    async def aload(
        self, paths: Sequence[str | Path], collection: str, options: LoadOptions | None = None
    ) -> LoadReport:
        """Load ``paths`` into ``collection`` under its load lease: a load of the same
        collection elsewhere (another process or host on this store) finishes first."""
        async with hold_load_lease(
            self.leases, collection, self.settings.loading, lambda c: self._waiting(collection, c)
        ) as lease:
            self._lease = lease
            try:
                return await self._load(paths, collection, options or LoadOptions())
            finally:
                self._lease = None

    def _waiting(self, collection: str, holder: LeaseClaim) -> None:
        message = describe_holder(collection, holder)
        # As for skipped files: a progress display shows it, otherwise the log does.
        logger.log(logging.DEBUG if self._has_listener else logging.WARNING, "%s; waiting", message)
        self._emit("waiting", message=message)

    def check_lease(self) -> None:
        """Before a chunk write: raise if this load may have lost its lease (no I/O)."""
        if self._lease is not None:
            self._lease.check()

    async def verify_lease(self) -> None:
        """Before a manifest write or delete: re-read the lease in the store."""
        if self._lease is not None:
            await asyncio.to_thread(self._lease.verify)

    async def _load(
        self, paths: Sequence[str | Path], collection: str, options: LoadOptions
    ) -> LoadReport:
        description, rebuild = options.description, options.rebuild
        t0 = time.perf_counter()
        report = LoadReport(collection=collection)
        files, skipped = await asyncio.to_thread(discover_files, list(paths), self.settings.loading)
        for s in skipped:
            self._fail(report, s.path, s.reason)
        self._emit("discovered", total=len(files))

        existing_meta = await asyncio.to_thread(self.store.get_meta, collection)
        records: dict[str, FileRecord] = {}
        if existing_meta is not None and not rebuild:
            # Checked up front so even a load with nothing new refuses a mismatched collection.
            check_compatible(
                collection, existing_meta, CollectionMeta.of(self.settings, existing_meta.dimension)
            )
            records = await asyncio.to_thread(self.manifest.file_records, collection)

        jobs = await self._hash_jobs(files, records, report, force=options.force)
        embedder: Embedder | None = None
        if jobs or rebuild:
            # Only now is the model needed: an unchanged reload never loads it.
            embedder = await asyncio.to_thread(self._embedder_factory)
            meta = CollectionMeta.of(self.settings, embedder.dimension, description or "")
            if existing_meta is not None and not description:
                meta.description = existing_meta.description
            # Creating a collection and its indexes takes Milvus Lite ~1.7 s; parsing and the
            # first encode batches run meanwhile, and only the first insert waits for it.
            created = asyncio.ensure_future(
                asyncio.to_thread(self.store.ensure_collection, collection, meta, rebuild=rebuild)
            )
            try:
                if jobs:
                    if existing_meta is not None and not rebuild:
                        # Before the first write, so no answer cached from here on outlives
                        # the load even if it is killed midway (the cache keys on the version).
                        await asyncio.to_thread(self.store.bump_version, collection)
                    await self._run_pipeline(jobs, collection, embedder, report, created)
                await created
            finally:
                if not created.done():
                    created.cancel()
        elif (
            existing_meta is not None
            and description is not None
            and existing_meta.description != description
        ):
            await asyncio.to_thread(self.store.set_description, collection, description)
        if existing_meta is None and not rebuild and not report.files_loaded and jobs:
            # Every file failed: a load that stored nothing leaves no empty collection behind
            # (one with no files to load never created it).
            await asyncio.to_thread(self.store.drop_collection, collection)

        if options.prune:
            await self._prune(collection, records, report)
        if (
            existing_meta is not None
            and not rebuild
            and (report.files_loaded or report.chunks_removed)
        ):
            # Again after the last write: answers cached during the load drew on part of it.
            # (A new or rebuilt collection got a fresh version when it was created.)
            await asyncio.to_thread(self.store.bump_version, collection)

        report.chunks_total = await asyncio.to_thread(self.store.count, collection)
        report.seconds = time.perf_counter() - t0
        return report

    async def _hash_jobs(
        self, files: list[Path], records: dict[str, FileRecord], report: LoadReport, *, force: bool
    ) -> list[_FileJob]:
        """The files to load: those whose content hash differs from their record (all with
        ``force``); the rest count as unchanged without being parsed."""
        jobs: list[_FileJob] = []
        for path in files:
            source = str(path)
            try:
                digest = await asyncio.to_thread(hash_file, path)
            except OSError as exc:
                self._fail(report, source, f"unreadable: {exc.strerror or exc}")
                continue
            rec = records.get(source)
            if rec is not None and rec.content_hash == digest and not force:
                report.files_unchanged += 1
                self._emit("hashed", path=source, message="unchanged")
                continue
            jobs.append(_FileJob(path, source, digest, changed=rec is not None))
            self._emit("hashed", path=source)
        return jobs

    def _fail(self, report: LoadReport, source: str, reason: str) -> None:
        report.files_failed += 1
        report.failures.append(LoadFailure(source, reason))
        # A progress listener shows the skip (the CLI prints one line for it); a warning as well
        # would report it twice.
        logger.log(
            logging.DEBUG if self._has_listener else logging.WARNING,
            "skipped %s: %s",
            source,
            reason,
        )
        self._emit("failed", path=source, message=reason)

    async def _run_pipeline(
        self,
        jobs: list[_FileJob],
        collection: str,
        embedder: Embedder,
        report: LoadReport,
        collection_ready: asyncio.Future[None],
    ) -> None:
        if self.settings.loading.engine == "ray":
            await self._run_on_ray(jobs, collection, report, collection_ready)
        else:
            await _Pipeline(self, jobs, collection, embedder, report, collection_ready).run()

    async def _run_on_ray(
        self,
        jobs: list[_FileJob],
        collection: str,
        report: LoadReport,
        collection_ready: asyncio.Future[None],
    ) -> None:
        """Parse, chunk and embed on Ray workers; store and record here, as the local pipeline
        does, so chunk ids and manifest semantics are the same."""
        from deepsearcher.ingest_ray import FileTask, embedded_batches  # lazy: ray when chosen

        tasks = [
            FileTask(str(j.path), j.source, j.content_hash, modified_time(j.path)) for j in jobs
        ]
        by_source = {j.source: j for j in jobs}
        workers: set[int] = set()
        async for out in embedded_batches(self.settings, tasks, collection_ready):
            workers |= out.workers
            for source, reason in out.failures:
                self._fail(report, source, reason)
            for source, n in out.chunk_counts.items():
                job = by_source[source]
                if not job.chunks:  # first sight of the file
                    job.remaining = job.chunks = n
                    self._emit("parsed", path=source, count=n)
            if out.chunks:
                self._emit("embedded", count=len(out.chunks))
                await self._store_batch(collection, out.chunks, out.vectors, by_source, report)
        logger.info(
            "ray: %d worker process(es) parsed and embedded %d file(s): pids %s",
            len(workers),
            len(jobs),
            sorted(workers),
        )

    async def _store_batch(
        self,
        collection: str,
        chunks: list[Chunk],
        vectors: np.ndarray,
        by_source: dict[str, _FileJob],
        report: LoadReport,
    ) -> None:
        """Write embedded chunks (the lease still held), then finish the files they complete."""
        self.check_lease()
        await asyncio.to_thread(self.store.upsert_chunks, collection, chunks, vectors)
        await self._finish_files(_count_down(by_source, chunks), collection, report)

    async def _finish_files(
        self, jobs: list[_FileJob], collection: str, report: LoadReport
    ) -> None:
        """Files whose chunks are all stored: drop their old chunks, then record them. The
        manifest records come last, so a crash before them only means re-embedding."""
        if not jobs:
            return
        # A loader that lost its lease would delete its successor's chunks as stale.
        await self.verify_lease()
        removed: dict[str, int] = {}
        for job in jobs:
            if job.changed:
                removed[job.source] = await asyncio.to_thread(
                    self.store.delete_stale_chunks,
                    collection,
                    doc_id_for(job.source),
                    job.content_hash,
                )
        records = [
            FileRecord(job.source, doc_id_for(job.source), job.content_hash, job.chunks)
            for job in jobs
        ]
        await asyncio.to_thread(self.manifest.put_file_records, collection, records)
        for job in jobs:
            if job.changed:
                report.files_changed += 1
            else:
                report.files_new += 1
            report.chunks_added += job.chunks
            report.chunks_removed += removed.get(job.source, 0)
            self._emit("file_done", path=job.source, count=job.chunks)

    async def _prune(
        self, collection: str, records: dict[str, FileRecord], report: LoadReport
    ) -> None:
        gone = await asyncio.to_thread(lambda: [s for s in records if not Path(s).exists()])
        if gone:
            await asyncio.to_thread(self.store.bump_version, collection)
        for source in gone:
            await self.verify_lease()
            rec = records[source]
            removed = await asyncio.to_thread(
                self.store.delete_stale_chunks, collection, rec.doc_id, None
            )
            await asyncio.to_thread(self.manifest.delete_file_record, collection, source)
            report.chunks_removed += removed
            self._emit("pruned", path=source, count=removed)


class _Pipeline:
    """One load's overlapping stages, parse -> embed -> insert, and the state they share."""

    def __init__(
        self,
        ingestor: Ingestor,
        jobs: list[_FileJob],
        collection: str,
        embedder: Embedder,
        report: LoadReport,
        collection_ready: asyncio.Future[None],
    ) -> None:
        settings = ingestor.settings
        self.ingestor = ingestor
        self.jobs = jobs
        self.collection = collection
        self.embedder = embedder
        self.report = report
        self.collection_ready = collection_ready
        self.chunker = Chunker(settings.chunking, embedder.count_tokens, embedder.max_tokens)
        self.parse_sem = asyncio.Semaphore(settings.loading.parse_workers)
        # Parsed chunks wait in a buffer bounded in chunks, not files: parsing runs ahead of the
        # encoder by a few batches (memory stays flat on large loads) and the encoder always
        # finds a full batch when parsing is faster than encoding. A bound in files starved it:
        # four small text files give a 5-chunk batch, and 250 tiny encode calls cost 20%.
        self.buffer: list[Chunk] = []
        self.buffer_changed = asyncio.Condition()
        self.parsing_done = False
        self.insert_q: asyncio.Queue[tuple[list[Chunk], np.ndarray] | None] = asyncio.Queue(
            maxsize=2
        )
        # Always the same thread: each thread that runs the encoder keeps its own malloc arena
        # of freed activations (~250 MB at batch 64), so spreading batches over to_thread's
        # pool raised peak RSS by several hundred MB.
        self.encode_pool = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="deepsearcher-encode"
        )
        self.by_source = {j.source: j for j in jobs}

    async def run(self) -> None:
        stages = [asyncio.ensure_future(c) for c in (self.parse(), self.embed(), self.write())]
        try:
            await asyncio.gather(*stages)
        except BaseException:
            # A failed stage (store down, collection not creatable) must not leave the others
            # blocked on a queue in a long-lived loop such as the server's.
            for task in stages:
                task.cancel()
            raise
        finally:
            self.encode_pool.shutdown(wait=False)

    # -- parse ----------------------------------------------------------------------------------

    async def parse(self) -> None:
        """Parse and chunk every file, ``parse_workers`` at a time, into the buffer."""
        try:
            await asyncio.gather(*(self.parse_one(j) for j in self.jobs))
        finally:
            async with self.buffer_changed:
                self.parsing_done = True
                self.buffer_changed.notify_all()

    def chunk_file(self, job: _FileJob) -> list[Chunk]:
        """Blocking: runs in a worker thread."""
        doc = parse_file(job.path, self.ingestor.settings.loading)
        chunks = self.chunker.split(doc, content_hash=job.content_hash)
        modified = modified_time(job.path)
        for chunk in chunks:
            chunk.modified = modified
        return chunks

    async def parse_one(self, job: _FileJob) -> None:
        fail = self.ingestor._fail
        async with self.parse_sem:
            try:
                chunks = await asyncio.to_thread(self.chunk_file, job)
            except LoaderError as exc:
                fail(self.report, job.source, exc.message)
                return
            except Exception as exc:  # any parser bug is one file's failure, not the load's
                fail(self.report, job.source, f"could not parse: {type(exc).__name__}: {exc}"[:300])
                return
            if not chunks:
                fail(self.report, job.source, "no text found")
                return
        job.remaining = job.chunks = len(chunks)
        self.ingestor._emit("parsed", path=job.source, count=len(chunks))
        async with self.buffer_changed:
            await self.buffer_changed.wait_for(lambda: len(self.buffer) < _MAX_BUFFERED)
            self.buffer.extend(chunks)
            self.buffer_changed.notify_all()

    # -- embed ----------------------------------------------------------------------------------

    async def next_batch(self) -> list[Chunk]:
        """Up to ``_EMBED_BATCH`` buffered chunks; empty once parsing is done and drained."""
        async with self.buffer_changed:
            # Encode as soon as anything is buffered: waiting for a full batch would idle the
            # encoder when parsing is the slower stage.
            await self.buffer_changed.wait_for(lambda: bool(self.buffer) or self.parsing_done)
            batch = self.buffer[:_EMBED_BATCH]
            del self.buffer[:_EMBED_BATCH]
            self.buffer_changed.notify_all()
            return batch

    async def embed(self) -> None:
        loop = asyncio.get_running_loop()
        while batch := await self.next_batch():
            vectors = await loop.run_in_executor(
                self.encode_pool, self.embedder.embed, [c.indexed_text for c in batch]
            )
            self.ingestor._emit("embedded", count=len(batch))
            await self.insert_q.put((batch, vectors))
        await self.insert_q.put(None)

    # -- write ----------------------------------------------------------------------------------

    async def write(self) -> None:
        """Insert embedded batches; files whose last chunk is in are finished and recorded."""
        await self.collection_ready
        while (item := await self.insert_q.get()) is not None:
            batch, vectors = item
            await self.ingestor._store_batch(
                self.collection, batch, vectors, self.by_source, self.report
            )


def _count_down(by_source: dict[str, _FileJob], batch: list[Chunk]) -> list[_FileJob]:
    """The files whose last chunk is in ``batch`` (now stored)."""
    counts: dict[str, int] = {}
    for c in batch:
        counts[c.source] = counts.get(c.source, 0) + 1
    finished = []
    for source, n in counts.items():
        job = by_source[source]
        job.remaining -= n
        if job.remaining == 0:
            finished.append(job)
    return finished


def require_loaded(report: LoadReport) -> None:
    """Raise when a load produced nothing at all (the CLI then exits non-zero)."""
    if report.files_loaded == 0 and report.files_unchanged == 0:
        raise DeepSearcherError(
            f"nothing could be loaded: {report.files_failed} file(s) failed, none found otherwise",
            "see the reasons above; fix the files or the include/exclude globs",
        )
