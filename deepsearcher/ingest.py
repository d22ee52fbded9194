"""The load: discover -> hash -> parse+chunk -> embed -> upsert -> record.

``Ingestor`` decides what a load means: which files are new, changed or gone (their content
hashes against the collection's file manifest), which collection to create, rebuild or keep,
and when the collection's version changes. A pipeline does the heavy part, parse, chunk and
embed: ``load_pipeline.LocalPipeline`` in this process's threads, or Ray workers
(``ingest_ray``, ``loading.engine: ray``); both report to the load's ``LoadSink``, which
keeps the report and the progress events and writes the chunks and manifest records.

Incremental and crash-safe: a file whose content hash matches its manifest record is skipped
without parsing; a changed file's new chunks are written before its old ones are deleted; the
manifest record is written last.

One load at a time per collection, across processes: ``aload`` runs under the collection's
load lease (``deepsearcher.load_lease``, which explains what goes wrong without it). Chunk
writes check the lease first and manifest writes re-read it, so a loader that lost it stops.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from deepsearcher.config import Settings
from deepsearcher.embedding import Embedder
from deepsearcher.errors import DeepSearcherError
from deepsearcher.load_pipeline import LocalPipeline
from deepsearcher.load_sink import FileJob, LoadSink
from deepsearcher.options import LoadOptions
from deepsearcher.store import (
    AsyncStore,
    CollectionMeta,
    FileManifest,
    FileRecord,
    LoadLeases,
    VectorStore,
    check_compatible,
)
from deepsearcher.types import LoadProgress, LoadReport, ProgressCallback
from loaders import discover_files
from loaders.discovery import hash_file

__all__ = ["Ingestor", "LoadProgress", "ProgressCallback", "require_loaded"]


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
        # The store's own manifest and leases unless others are handed in (tests, benchmarks).
        self.store = AsyncStore.of(store, manifest)
        self.leases = leases if leases is not None else store.leases
        self._embedder_factory = embedder_factory
        self._on_progress = on_progress

    async def aload(
        self, paths: Sequence[str | Path], collection: str, options: LoadOptions | None = None
    ) -> LoadReport:
        """Load ``paths`` into ``collection`` under its load lease: a load of the same
        collection elsewhere (another process or host on this store) finishes first."""
        sink = LoadSink(self.store, collection, self._on_progress)
        async with sink.leased(self.leases, self.settings.loading):
            await self._load(paths, sink, options or LoadOptions())
        return sink.report

    async def _load(
        self, paths: Sequence[str | Path], sink: LoadSink, options: LoadOptions
    ) -> None:
        t0 = time.perf_counter()
        collection, report, rebuild = sink.collection, sink.report, options.rebuild
        files, skipped = await asyncio.to_thread(discover_files, list(paths), self.settings.loading)
        for s in skipped:
            sink.fail(s.path, s.reason)
        sink.emit("discovered", total=len(files))

        existing = await self.store.get_meta(collection)
        records: dict[str, FileRecord] = {}
        if existing is not None and not rebuild:
            # Checked up front so even a load with nothing new refuses a mismatched collection.
            check_compatible(
                collection, existing, CollectionMeta.of(self.settings, existing.dimension)
            )
            records = await self.store.file_records(collection)

        jobs = await self._hash_jobs(files, records, sink, force=options.force)
        if jobs or rebuild:
            await self._write(jobs, sink, existing, options)
        elif (
            existing is not None
            and options.description is not None
            and existing.description != options.description
        ):
            await self.store.set_description(collection, options.description)
        if existing is None and not rebuild and not report.files_loaded and jobs:
            # Every file failed: a load that stored nothing leaves no empty collection behind
            # (one with no files to load never created it).
            await self.store.drop_collection(collection)

        if options.prune:
            await self._prune(sink, records)
        if existing is not None and not rebuild and (report.files_loaded or report.chunks_removed):
            # Again after the last write: answers cached during the load drew on part of it.
            # (A new or rebuilt collection got a fresh version when it was created.)
            await self.store.bump_version(collection)

        report.chunks_total = await self.store.count(collection)
        report.seconds = time.perf_counter() - t0

    async def _hash_jobs(
        self, files: list[Path], records: dict[str, FileRecord], sink: LoadSink, *, force: bool
    ) -> list[FileJob]:
        """The files to load: those whose content hash differs from their record (all with
        ``force``); the rest count as unchanged without being parsed."""
        jobs: list[FileJob] = []
        for path in files:
            source = str(path)
            try:
                digest = await asyncio.to_thread(hash_file, path)
            except OSError as exc:
                sink.fail(source, f"unreadable: {exc.strerror or exc}")
                continue
            rec = records.get(source)
            if rec is not None and rec.content_hash == digest and not force:
                sink.report.files_unchanged += 1
                sink.emit("hashed", path=source, message="unchanged")
                continue
            jobs.append(FileJob(path, source, digest, changed=rec is not None))
            sink.emit("hashed", path=source)
        return jobs

    async def _write(
        self,
        jobs: list[FileJob],
        sink: LoadSink,
        existing: CollectionMeta | None,
        options: LoadOptions,
    ) -> None:
        """Make (or rebuild) the collection and run the pipeline over ``jobs`` into it."""
        collection = sink.collection
        # Only now is the model needed: an unchanged reload never loads it.
        embedder = await asyncio.to_thread(self._embedder_factory)
        meta = CollectionMeta.of(self.settings, embedder.dimension, options.description or "")
        if existing is not None and not options.description:
            meta.description = existing.description
        # Creating a collection and its indexes takes Milvus Lite ~1.7 s; parsing and the
        # first encode batches run meanwhile, and only the first insert waits for it.
        created = asyncio.ensure_future(
            self.store.ensure_collection(collection, meta, rebuild=options.rebuild)
        )
        try:
            if jobs:
                if existing is not None and not options.rebuild:
                    # Before the first write, so no answer cached from here on outlives
                    # the load even if it is killed midway (the cache keys on the version).
                    await self.store.bump_version(collection)
                await self._run_pipeline(jobs, embedder, sink, created)
            await created
        finally:
            if not created.done():
                created.cancel()

    async def _run_pipeline(
        self,
        jobs: list[FileJob],
        embedder: Embedder,
        sink: LoadSink,
        collection_ready: asyncio.Future[None],
    ) -> None:
        if self.settings.loading.engine == "ray":
            from deepsearcher.ingest_ray import run_on_ray  # lazy: ray when chosen

            await run_on_ray(self.settings, jobs, sink, collection_ready)
        else:
            await LocalPipeline(self.settings, jobs, embedder, sink, collection_ready).run()

    async def _prune(self, sink: LoadSink, records: dict[str, FileRecord]) -> None:
        """Remove the chunks and records of the files that are gone (under the lease)."""
        collection = sink.collection
        gone = await asyncio.to_thread(lambda: [s for s in records if not Path(s).exists()])
        if gone:
            await self.store.bump_version(collection)
        for source in gone:
            await sink.verify_lease()
            removed = await self.store.delete_stale_chunks(collection, records[source].doc_id, None)
            await self.store.delete_file_record(collection, source)
            sink.report.chunks_removed += removed
            sink.emit("pruned", path=source, count=removed)


def require_loaded(report: LoadReport) -> None:
    """Raise when a load produced nothing at all (the CLI then exits non-zero)."""
    if report.files_loaded == 0 and report.files_unchanged == 0:
        raise DeepSearcherError(
            f"nothing could be loaded: {report.files_failed} file(s) failed, none found otherwise",
            "see the reasons above; fix the files or the include/exclude globs",
        )
