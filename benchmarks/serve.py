"""How the HTTP server holds up under concurrent chat clients.

    .venv/bin/python benchmarks/serve.py [--clients 1,8,32] [--questions-per-client 3]
        [--latency 0.2] [--files 50] [--max-concurrent-searches 4] [--burst 32] [--eval-dir DIR]

Starts the scripted LLM server (tests/llm_server.py) with a fixed latency per call, loads a
small HotpotQA collection (gold documents of the questions asked, topped up from the corpus)
into a fresh Milvus Lite file, serves it with uvicorn on 127.0.0.1, and runs N concurrent
streaming chat clients (the official openai client at its defaults: 2 retries, which honour
Retry-After), each asking a few questions in turn. 429s the client saw are counted from the
server's replies; a question the client gave up on counts as an error.

Burst check: ``--burst`` chats sent at once (one question each). Each question's service time
is first measured alone in waves of ``max_concurrent_searches`` (all slots busy, no queue);
an ideal first-come-first-served queue over that many slots with those service times gives
the reference latencies. The burst's p95 should stay within 1.3x the ideal p95.

Latency runs from a question's first attempt to its last streamed chunk; time to first token
(TTFT) to its first answer delta. The scripted LLM answers instantly after its fixed latency,
so the figures show the server's own overhead, concurrency bound and LLM-call fan-out, not a
real model's speed. Clients and server share one process (and the GIL); two CPU cores.
Prints a markdown table and writes it to benchmarks/out/serve.md.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.llm_server (scripted LLM) and the package from a checkout
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import openai  # noqa: E402
import uvicorn  # noqa: E402

from deepsearcher.config import ServerSettings, Settings, load_settings  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402
from deepsearcher.server import create_app  # noqa: E402
from tests.llm_server import ScriptedLLMServer  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
EVAL_DIR = Path(__file__).resolve().parents[2] / "shared" / "eval"
COLLECTION = "hotpot"


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    refused: int = 0  # 429s the server sent (the client retried them)
    errors: int = 0  # questions the client gave up on
    error_kinds: dict[str, int] = field(default_factory=dict)

    def fail(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


def _questions(eval_dir: Path) -> list[dict[str, Any]]:
    path = eval_dir / "hotpotqa100" / "questions.jsonl"
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def _corpus_files(eval_dir: Path, questions: list[dict[str, Any]], count: int) -> list[Path]:
    """Gold documents of the questions first, so searches find their evidence; then the rest."""
    corpus = eval_dir / "hotpotqa100" / "corpus"
    by_id = {p.stem: p for p in sorted(corpus.iterdir()) if p.is_file()}
    chosen: dict[str, Path] = {}
    for q in questions:
        for doc_id in q.get("gold_doc_ids", []):
            if doc_id in by_id and len(chosen) < count:
                chosen[doc_id] = by_id[doc_id]
    for doc_id, path in by_id.items():
        if len(chosen) >= count:
            break
        chosen.setdefault(doc_id, path)
    return list(chosen.values())


def _settings(args: argparse.Namespace, llm_url: str, db: Path) -> Settings:
    return load_settings(
        overrides={
            "vector_store": {"uri": str(db), "collection": COLLECTION},
            "llm": {"base_url": llm_url, "max_concurrency": args.llm_concurrency},
            "query": {"rerank": args.rerank, "max_iter": args.max_iter},
            "server": {"max_concurrent_searches": args.max_concurrent_searches},
        },
        environ={},
    )


@contextmanager
def _serving(app: Any) -> Iterator[str]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


async def _ask(client: openai.AsyncOpenAI, question: str, stats: Stats) -> float | None:
    """Latency of one streamed chat from its first attempt, or None if the client gave up."""
    t0 = time.perf_counter()
    first: float | None = None
    try:
        stream = await client.chat.completions.create(
            model="deepsearcher", messages=[{"role": "user", "content": question}], stream=True
        )
        async for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter()
    except openai.APIError as exc:
        stats.fail(type(exc).__name__)
        return None
    end = time.perf_counter()
    stats.latencies.append(end - t0)
    if first is not None:
        stats.ttft.append(first - t0)
    return end - t0


def _counting_client(base_url: str, stats: Stats) -> openai.AsyncOpenAI:
    """The official client at its defaults; an httpx hook counts the 429s it retries."""
    import httpx

    async def on_response(response: httpx.Response) -> None:
        if response.status_code == 429:
            stats.refused += 1

    http = httpx.AsyncClient(event_hooks={"response": [on_response]}, timeout=600)
    return openai.AsyncOpenAI(base_url=base_url, api_key="bench", http_client=http)


async def _run_clients(
    base_url: str, n: int, questions: list[str], per_client: int
) -> tuple[Stats, float]:
    stats = Stats()

    async def client_loop(i: int) -> None:
        client = _counting_client(base_url, stats)
        try:
            for j in range(per_client):
                await _ask(client, questions[(i * per_client + j) % len(questions)], stats)
        finally:
            await client.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(client_loop(i) for i in range(n)))
    return stats, time.perf_counter() - t0


async def _at_once(base_url: str, questions: list[str]) -> tuple[Stats, list[float | None]]:
    stats = Stats()
    clients = [_counting_client(base_url, stats) for _ in questions]
    try:
        latencies = await asyncio.gather(
            *(_ask(c, q, stats) for c, q in zip(clients, questions, strict=True))
        )
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    return stats, list(latencies)


def ideal_fcfs(service: list[float], slots: int) -> list[float]:
    """Latencies of requests that all arrive at 0 and are served first come first served by
    ``slots`` servers with these service times: no queue overhead, no idle slot."""
    free = [0.0] * slots
    done = []
    for s in service:
        start = heapq.heappop(free)
        heapq.heappush(free, start + s)
        done.append(start + s)
    return done


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--questions-per-client", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2, help="scripted LLM seconds per call")
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument(
        "--max-concurrent-searches", type=int, default=ServerSettings().max_concurrent_searches
    )
    parser.add_argument("--burst", type=int, default=32, help="chats sent at once (0: skip)")
    parser.add_argument("--llm-concurrency", type=int, default=16)
    parser.add_argument("--rerank", default="llm-batch")
    parser.add_argument("--max-iter", type=int, default=2)
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    OUT.mkdir(parents=True, exist_ok=True)
    clients = [int(c) for c in args.clients.split(",")]

    questions = _questions(args.eval_dir)
    # A fresh database per run: the figures never depend on what an earlier run left behind.
    with (
        tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp,
        ScriptedLLMServer(latency=args.latency) as llm,
    ):
        settings = _settings(args, llm.base_url, Path(tmp) / "serve.db")
        with DeepSearcher(settings) as searcher:
            t0 = time.perf_counter()
            report = searcher.load(_corpus_files(args.eval_dir, questions, args.files), COLLECTION)
            print(
                f"loaded {report.files_loaded} new / {report.files_unchanged} unchanged files "
                f"({report.chunks_total} chunks) in {time.perf_counter() - t0:.1f}s",
                file=sys.stderr,
            )
            app = create_app(searcher, settings, upload_dir=Path(tmp) / "uploads")
            rows = []
            with _serving(app) as base_url:
                texts = [q["question"] for q in questions]
                # Not measured: the first question warms the server's embedder and HTTP clients.
                asyncio.run(_run_clients(base_url, 1, texts[-1:], 1))
                for n in clients:
                    llm.reset()
                    stats, wall = asyncio.run(
                        _run_clients(base_url, n, texts, args.questions_per_client)
                    )
                    calls = len(llm.requests)
                    done = len(stats.latencies)
                    rows.append(
                        f"| {n} | {done + stats.errors} | {done / wall:.2f} | {_pct(stats.latencies, 50):.2f} "
                        f"| {_pct(stats.latencies, 95):.2f} | {_pct(stats.ttft, 50):.2f} | {stats.refused} "
                        f"| {stats.errors} | {calls / max(done, 1):.1f} | {llm.max_in_flight} |"
                    )
                    if stats.error_kinds:
                        print(f"N={n} errors: {stats.error_kinds}", file=sys.stderr)
                    print(rows[-1], file=sys.stderr)
                burst = _burst(base_url, texts, args) if args.burst else []

    settings_line = (
        f"Settings: scripted LLM {args.latency * 1000:.0f} ms/call, {args.files} HotpotQA files, "
        f"agent deep, rerank {args.rerank}, max_iter {args.max_iter}, "
        f"server.max_concurrent_searches {args.max_concurrent_searches}, "
        f"llm.max_concurrency {args.llm_concurrency}, {args.questions_per_client} questions per "
        "client, streaming, official openai client at its defaults (2 retries)."
    )
    table = "\n".join(
        [
            settings_line,
            "",
            "| clients | questions | questions/s | p50 latency s | p95 latency s | TTFT p50 s "
            "| 429s (retried) | other errors | LLM calls/question | LLM calls in flight (max) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            *burst,
        ]
    )
    print(table)
    (OUT / "serve.md").write_text(table + "\n", encoding="utf-8")


def _burst(base_url: str, texts: list[str], args: argparse.Namespace) -> list[str]:
    """Send ``--burst`` chats at once; compare p95 with an ideal FCFS queue over the slots."""
    slots = args.max_concurrent_searches
    questions = [texts[i % len(texts)] for i in range(args.burst)]
    service: list[float] = []
    for i in range(0, len(questions), slots):  # all slots busy, nobody waiting
        wave_stats, wave = asyncio.run(_at_once(base_url, questions[i : i + slots]))
        if wave_stats.errors:
            raise RuntimeError(f"service-time wave failed: {wave_stats.error_kinds}")
        service.extend(x for x in wave if x is not None)
    stats, _ = asyncio.run(_at_once(base_url, questions))
    ideal = ideal_fcfs(service, slots)
    p95, ideal_p95 = _pct(stats.latencies, 95), _pct(ideal, 95)
    ratio = p95 / ideal_p95
    verdict = "within" if ratio <= 1.3 and not stats.errors else "NOT within"
    lines = [
        "",
        f"Burst: {args.burst} chats at once, {slots} search slots: "
        f"{len(stats.latencies)}/{args.burst} succeeded, {stats.refused} 429s, "
        f"{stats.errors} errors {stats.error_kinds or ''}".rstrip(),
        f"p50 {_pct(stats.latencies, 50):.2f} s, p95 {p95:.2f} s; ideal FCFS queue over the "
        f"measured service times (mean {statistics.mean(service):.2f} s): p50 "
        f"{_pct(ideal, 50):.2f} s, p95 {ideal_p95:.2f} s; ratio {ratio:.2f} ({verdict} 1.3x)",
    ]
    print("\n".join(lines), file=sys.stderr)
    return lines


if __name__ == "__main__":
    main()
