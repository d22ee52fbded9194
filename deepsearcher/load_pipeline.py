"""``LocalPipeline``: a load's overlapping stages in this process, parse -> embed -> write.

Files are parsed in worker threads while the previous batch is being embedded and the one
before that stored, so on a small machine the encoder (the slowest stage) stays busy instead of
waiting for parsing or Milvus. Every outcome goes to the load's ``LoadSink``, as from the Ray
pipeline (``ingest_ray``): failed files, parsed and embedded counts, batches to store.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from deepsearcher.chunking import Chunker, chunk_file
from deepsearcher.config import Settings
from deepsearcher.embedding import Embedder
from deepsearcher.errors import LoaderError
from deepsearcher.load_sink import FileJob, LoadSink
from deepsearcher.types import Chunk

# Chunks per encode call: large enough to keep the encoder efficient, small enough that
# inserts and progress keep flowing.
_EMBED_BATCH = 256
_MAX_BUFFERED = 4 * _EMBED_BATCH


class LocalPipeline:
    """One load's stages and the state they share."""

    def __init__(
        self,
        settings: Settings,
        jobs: list[FileJob],
        embedder: Embedder,
        sink: LoadSink,
        collection_ready: asyncio.Future[None],
    ) -> None:
        self.loading = settings.loading
        self.jobs = jobs
        self.embedder = embedder
        self.sink = sink
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

    async def run(self) -> None:
        self.sink.expect(self.jobs)
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

    async def parse_one(self, job: FileJob) -> None:
        async with self.parse_sem:
            try:
                chunks = await asyncio.to_thread(
                    chunk_file, job.path, self.loading, self.chunker, job.content_hash
                )
            except LoaderError as exc:
                self.sink.fail(job.source, exc.message)
                return
        self.sink.parsed(job.source, len(chunks))
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
            self.sink.emit("embedded", count=len(batch))
            await self.insert_q.put((batch, vectors))
        await self.insert_q.put(None)

    # -- write ----------------------------------------------------------------------------------

    async def write(self) -> None:
        """Store embedded batches; the sink finishes the files whose last chunk is in."""
        await self.collection_ready
        while (item := await self.insert_q.get()) is not None:
            await self.sink.store_batch(*item)
