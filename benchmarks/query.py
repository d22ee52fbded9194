"""Deep-search latency and LLM cost per question (issue #3).

    .venv/bin/python benchmarks/query.py [--latency 0.2] [--limit 20] [--max-iter 3]
        [--reflect default,follow] [--eval-dir DIR] [--db benchmarks/out/query.db]

The LLM is the scripted OpenAI-compatible server (tests/llm_server.py) answering every call
after a fixed latency, so wall time is the loop's own structure: how many LLM calls it makes
and how many of them overlap. The HotpotQA corpus (994 passages) is loaded once into a Milvus
Lite file under benchmarks/out (incremental: a second run only hashes the files); the first
``--limit`` questions of hotpotqa100/questions.jsonl are asked one after another (never two
questions at once, so overlap comes from inside the loop), after one unmeasured warm-up
question per configuration. Configurations, all at the same ``--max-iter``:

- ``llm`` rerank, ``llm.max_concurrency 16``: the design, one verdict call per chunk, in parallel;
- ``llm`` rerank, ``llm.max_concurrency 1``: the same calls one after another;
- ``llm-batch`` rerank (``query.rerank_batch_size`` 8 chunks per call), concurrency 16.

Reflection modes (``--reflect``): ``default`` is the scripted server's own reply to the reflect
step, an empty list, so the loop stops after its first iteration whatever ``--max-iter`` is;
``follow`` scripts reflection to propose up to ``query.max_gap_queries`` names found in the kept
passages (capitalised phrases not yet searched, as a bridge-following model would), so later
iterations run too. The scripted judge says YES whenever a passage shares a content word with
the question or queries, so kept-chunk counts are only indicative; tokens are the scripted
server's count (whitespace-separated words of prompt and reply). Prints a markdown table and
writes it to benchmarks/out/query.md (+ .json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    EVAL_DIR,
    OUT,
    machine,
    markdown_table,
    percentile,
    prepare_imports,
    verdict,
)

prepare_imports()

from deepsearcher.config import Settings, load_settings  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402
from tests.llm_server import ScriptedLLMServer, task_of  # noqa: E402

COLLECTION = "hotpot"
TARGET_RATIO = 0.2
# (label, query.rerank, llm.max_concurrency)
CONFIGS: list[tuple[str, str, int]] = [
    ("deep, concurrent verdicts", "llm", 16),
    ("deep, sequential verdicts", "llm", 1),
    ("deep, batched verdicts", "llm-batch", 16),
]
# Two or more capitalised words: a person, place or work a passage mentions.
_NAME_RE = re.compile(r"\b[A-Z][\w'-]+(?:[ \t]+[A-Z][\w'-]+)+")


@dataclass
class Run:
    reflect: str
    config: str
    rerank: str
    concurrency: int
    seconds: float
    llm_calls: int
    server_calls: int
    tokens: int
    iterations: int
    retrieved: int
    kept: int
    max_in_flight: int
    cut_short: str | None


def follow_reply(req: dict[str, Any]) -> str:
    """Scripted reflection: names in the kept passages that no query has searched yet."""
    text = "\n".join(str(m.get("content", "")) for m in req.get("messages", []))
    limit = re.search(r"at most (\d+) new", text)
    max_gaps = int(limit.group(1)) if limit else 3
    asked = " ".join(
        m.group(1).lower()
        for label in ("Question", "Queries so far")
        if (m := re.search(rf"^{label}:(.*)$", text, re.MULTILINE))
    )
    gaps: list[str] = []
    for body in re.findall(r"<document[^>]*>\n?(.*?)</document>", text, re.DOTALL):
        for name in _NAME_RE.findall(body):
            name = " ".join(name.split())
            if name.lower() not in asked and name not in gaps:
                gaps.append(name)
                break  # one per passage: spread the gaps over the evidence
        if len(gaps) >= max_gaps:
            break
    return json.dumps(gaps)


def _questions(eval_dir: Path, limit: int) -> list[str]:
    path = eval_dir / "hotpotqa100" / "questions.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [r["question"] for r in rows][: limit + 1]  # the extra one warms up


def _settings(args: argparse.Namespace, llm_url: str, rerank: str, conc: int) -> Settings:
    return load_settings(
        overrides={
            "vector_store": {"uri": str(args.db), "collection": COLLECTION},
            "llm": {"base_url": llm_url, "max_concurrency": conc, "model": "scripted"},
            "query": {"rerank": rerank, "max_iter": args.max_iter},
        },
        environ={},
    )


async def _ask(
    searcher: DeepSearcher, llm: ScriptedLLMServer, question: str, reflect: str, max_iter: int
) -> tuple[Any, float, int, int]:
    llm.reset()  # also clears rules: the reflect rule is added back per question
    if reflect == "follow":
        llm.add_rule(lambda r: task_of(r) == "reflect", follow_reply)
    t0 = time.perf_counter()
    answer = await searcher.aquery(question, max_iter=max_iter)
    return answer, time.perf_counter() - t0, len(llm.requests), llm.max_in_flight


async def _bench(args: argparse.Namespace) -> tuple[list[Run], dict[str, Any]]:
    questions = _questions(args.eval_dir, args.limit)
    warmup, measured = questions[-1], questions[:-1]
    runs: list[Run] = []
    with ScriptedLLMServer(latency=args.latency) as llm:
        base = DeepSearcher(_settings(args, llm.base_url, "llm", 16))
        t0 = time.perf_counter()
        report = await base.aload(args.eval_dir / "hotpotqa100" / "corpus", COLLECTION)
        load = {
            "seconds": time.perf_counter() - t0,
            "new": report.files_loaded,
            "unchanged": report.files_unchanged,
            "chunks": report.chunks_total,
        }
        print(
            f"corpus: {load['new']} new / {load['unchanged']} unchanged files, "
            f"{load['chunks']} chunks, {load['seconds']:.1f}s",
            file=sys.stderr,
        )
        for reflect in args.reflect:
            for label, rerank, conc in CONFIGS:
                searcher = DeepSearcher(
                    _settings(args, llm.base_url, rerank, conc),
                    embedder=base.embedder,
                    store=base.store,
                )
                await _ask(searcher, llm, warmup, reflect, args.max_iter)
                for question in measured:
                    answer, seconds, server_calls, in_flight = await _ask(
                        searcher, llm, question, reflect, args.max_iter
                    )
                    runs.append(
                        Run(
                            reflect,
                            label,
                            rerank,
                            conc,
                            seconds,
                            answer.usage.llm_calls,
                            server_calls,
                            answer.usage.total_tokens,
                            answer.iterations,
                            answer.chunks_retrieved,
                            answer.chunks_kept,
                            in_flight,
                            answer.cut_short,
                        )
                    )
                mine = [r for r in runs if r.reflect == reflect and r.config == label]
                print(
                    f"{reflect} / {label}: mean {statistics.mean(r.seconds for r in mine):.2f}s",
                    file=sys.stderr,
                    flush=True,
                )
        base.close()
    return runs, load


def render(runs: list[Run], load: dict[str, Any], args: argparse.Namespace) -> str:
    rows = []
    ratios = []
    for reflect in args.reflect:
        means: dict[str, float] = {}
        for label, rerank, conc in CONFIGS:
            rs = [r for r in runs if r.reflect == reflect and r.config == label]
            secs = [r.seconds for r in rs]
            means[label] = statistics.mean(secs)
            cut = sum(1 for r in rs if r.cut_short)
            rows.append(
                [
                    reflect,
                    label,
                    rerank,
                    conc,
                    len(rs),
                    f"{means[label]:.2f}",
                    f"{percentile(secs, 50):.2f}",
                    f"{percentile(secs, 95):.2f}",
                    f"{statistics.mean(r.llm_calls for r in rs):.1f}",
                    f"{statistics.mean(r.tokens for r in rs):,.0f}",
                    f"{statistics.mean(r.iterations for r in rs):.1f}",
                    f"{statistics.mean(r.retrieved for r in rs):.1f}",
                    f"{statistics.mean(r.kept for r in rs):.1f}",
                    max(r.max_in_flight for r in rs),
                    cut,
                ]
            )
        conc_s, seq_s = means[CONFIGS[0][0]], means[CONFIGS[1][0]]
        batch_s = means[CONFIGS[2][0]]
        ratios.append(
            f"- reflect `{reflect}`: concurrent ÷ sequential wall time = {conc_s:.2f} / "
            f"{seq_s:.2f} = **{conc_s / seq_s:.3f}** (target ≤ {TARGET_RATIO}: "
            f"{verdict(conc_s / seq_s <= TARGET_RATIO)}); batched ÷ sequential = "
            f"{batch_s / seq_s:.3f}"
        )
    table = markdown_table(
        [
            "reflect",
            "configuration",
            "rerank",
            "llm.max_concurrency",
            "questions",
            "mean s",
            "p50 s",
            "p95 s",
            "LLM calls (mean)",
            "tokens (mean)",
            "iterations (mean)",
            "chunks retrieved (mean)",
            "chunks kept (mean)",
            "max calls in flight",
            "cut short",
        ],
        rows,
        "lllrrrrrrrrrrrr",
    )
    head = (
        f"Machine: {machine()}. Scripted LLM {args.latency * 1000:.0f} ms per call; "
        f"{load['chunks']} HotpotQA chunks in Milvus Lite; {args.limit} questions asked one "
        f"after another per configuration; query.max_iter {args.max_iter}, other query "
        "settings default (max_sub_queries 4, top_k 5, max_gap_queries 3, rerank_batch_size 8, "
        "max_llm_calls 60)."
    )
    return "\n".join([head, "", table, "", *ratios])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency", type=float, default=0.2, help="scripted LLM seconds per call")
    parser.add_argument("--limit", type=int, default=20, help="questions per configuration")
    parser.add_argument("--max-iter", type=int, default=3)
    parser.add_argument(
        "--reflect", default="default,follow", help="reflection modes: default, follow"
    )
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    parser.add_argument("--db", type=Path, default=OUT / "query.db")
    args = parser.parse_args()
    args.reflect = [m.strip() for m in args.reflect.split(",") if m.strip()]
    if bad := [m for m in args.reflect if m not in ("default", "follow")]:
        parser.error(f"unknown reflect mode {', '.join(bad)}")
    logging.basicConfig(level=logging.WARNING)
    OUT.mkdir(parents=True, exist_ok=True)

    runs, load = asyncio.run(_bench(args))
    text = render(runs, load, args)
    print(text)
    (OUT / "query.md").write_text(text + "\n", encoding="utf-8")
    (OUT / "query.json").write_text(
        json.dumps({"load": load, "runs": [asdict(r) for r in runs]}, indent=2), encoding="utf-8"
    )


if __name__ == "__main__":
    main()
