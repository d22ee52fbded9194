"""Deep-search latency and LLM cost per question (issue #3).

    .venv/bin/python benchmarks/query.py [--latency 0.2] [--limit 20] [--max-iter 3]
        [--script default,follow,fanout] [--concurrency N] [--top-k K] [--max-llm-calls N]
        [--eval-dir DIR] [--db benchmarks/out/query.db] [--out-name query]

The LLM is the scripted OpenAI-compatible server (tests/llm_server.py) answering every call
after a fixed latency, so wall time is the loop's own structure: how many LLM calls it makes
and how many of them overlap. The HotpotQA corpus (994 passages) is loaded once into a Milvus
Lite file under benchmarks/out (incremental: a second run only hashes the files); the first
``--limit`` questions of hotpotqa100/questions.jsonl are asked one after another (never two
questions at once, so overlap comes from inside the loop), after one unmeasured warm-up
question per configuration. Configurations, all at the same ``--max-iter`` and ``--top-k``:

- ``llm`` rerank at ``llm.max_concurrency`` = ``--concurrency`` (default: the setting's
  default): the design, one verdict call per chunk, in parallel;
- ``llm`` rerank, ``llm.max_concurrency 1``: the same calls one after another;
- ``llm-batch`` rerank (``query.rerank_batch_size`` chunks per call), same concurrency;
- ``llm`` rerank at max_sub_queries x top_k, so one iteration's verdicts fit in one round,
  when that differs from ``--concurrency``;
- ``lookup`` rerank (the default): each lookup's extraction call also names the useful
  passages, so a round's verdicts cost no call of their own.

LLM scripts (``--script``): ``default`` is the scripted server as it is: its decomposition
splits the question on " and " only (1-3 queries) and its reflection is an empty list, so the
loop stops after its first iteration whatever ``--max-iter`` is. ``follow`` scripts reflection
to propose up to ``query.max_gap_queries`` names found in the kept passages (capitalised
phrases not yet searched, as a bridge-following model would), so later iterations run too.
``fanout`` also scripts decomposition into ``query.max_sub_queries`` queries (the question,
then the names and content words in it), the fan-out a real model gives a two-hop question.
The scripted judge says YES whenever a passage shares a content word with the question or
queries, so kept-chunk counts are only indicative; tokens are the scripted server's count
(whitespace-separated words of prompt and reply).

"Critical-path calls" counts the calls that must follow one another whatever the concurrency:
every call that is not a verdict, plus one verdict round per iteration. Their share of the
sequential run's calls is the best ratio any concurrency can reach (the "floor" printed with
each ratio). Prints a markdown table and writes it to benchmarks/out/<out-name>.md (+ .json).
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
from deepsearcher.options import QueryOptions  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402
from tests.llm_server import ScriptedLLMServer, task_of  # noqa: E402

COLLECTION = "hotpot"
TARGET_RATIO = 0.2


def one_round(top_k: int) -> int:
    """The concurrency at which a first iteration's verdicts all run at once."""
    return Settings().query.max_sub_queries * top_k


def configs(concurrency: int, top_k: int) -> list[tuple[str, str, int]]:
    """(label, query.rerank, llm.max_concurrency); the first two give the target ratio."""
    rows = [
        ("deep, concurrent verdicts", "llm", concurrency),
        ("deep, sequential verdicts", "llm", 1),
        ("deep, batched verdicts", "llm-batch", concurrency),
    ]
    if concurrency != one_round(top_k):
        rows.append((ONE_ROUND, "llm", one_round(top_k)))
    # The default: the lookup's own call names the useful passages (no verdict calls).
    rows.append((LOOKUP, "lookup", concurrency))
    return rows


ONE_ROUND = "deep, concurrent verdicts, one round"
LOOKUP = "deep, verdicts in the lookup's call (default)"


_COMMON = frozenset(
    ["which", "where", "there", "their", "about", "other", "after", "before", "would", "could"]
)
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
    judged: int
    kept: int
    spine: int  # LLM calls that must follow one another, even with unbounded concurrency
    max_in_flight: int
    cut_short: str | None


def follow_reply(req: dict[str, Any]) -> str:
    """Scripted reflection: names in the kept passages that no query has searched yet."""
    text = "\n".join(str(m.get("content", "")) for m in req.get("messages", []))
    limit = re.search(r"at most (\d+) (?:new|other)", text)
    max_gaps = int(limit.group(1)) if limit else 3
    # The lookup, the question and the queries so far: the instructions after the passages.
    asked = re.sub(r"<document[^>]*>.*?</document>", "", text, flags=re.DOTALL).lower()
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


def fanout_decompose_reply(req: dict[str, Any]) -> str:
    """Scripted decomposition: the question, then its names, then its content words (as a
    plan's lookups: ``{"steps": [...]}``)."""
    text = "\n".join(str(m.get("content", "")) for m in req.get("messages", []))
    limit = re.search(r"at most (\d+)", text)
    max_queries = int(limit.group(1)) if limit else 4
    found = re.findall(r"^Question:(.*)$", text, re.MULTILINE)  # the prompt's examples first
    question = found[-1].strip() if found else ""
    words = question.rstrip("?.!").split()
    names = re.findall(r"[A-Z][\w'-]+(?:[ \t]+[A-Z][\w'-]+)*", " ".join(words[1:]))
    content = [w.strip(",;:'\"") for w in words if len(w) >= 5 and w.lower() not in _COMMON]
    queries = [question]
    for q in [*names, *content]:
        # A word already inside a chosen name ("Nolan" in "Christopher Nolan") adds nothing.
        if q and not any(q.lower() in x.lower() for x in queries[1:]):
            queries.append(q)
    return json.dumps({"steps": queries[:max_queries]})


def _questions(eval_dir: Path, limit: int) -> list[str]:
    path = eval_dir / "hotpotqa100" / "questions.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [r["question"] for r in rows][: limit + 1]  # the extra one warms up


def _settings(args: argparse.Namespace, llm_url: str, rerank: str, conc: int) -> Settings:
    return load_settings(
        overrides={
            "vector_store": {"uri": str(args.db), "collection": COLLECTION},
            "llm": {"base_url": llm_url, "max_concurrency": conc, "model": "scripted"},
            "cache": {"enabled": False},  # every run measures a real search
            "query": {
                "rerank": rerank,
                "max_iter": args.max_iter,
                "top_k": args.top_k,
                "max_llm_calls": args.max_llm_calls,
            },
        },
        environ={},
    )


async def _ask(
    searcher: DeepSearcher, llm: ScriptedLLMServer, question: str, reflect: str, max_iter: int
) -> tuple[Any, float, int, int]:
    llm.reset()  # also clears rules: the scripted rules are added back per question
    if reflect in ("follow", "fanout"):
        llm.add_rule(lambda r: task_of(r) == "reflect", follow_reply)
    if reflect == "fanout":
        llm.add_rule(lambda r: task_of(r) == "plan", fanout_decompose_reply)
    t0 = time.perf_counter()
    answer = await searcher.aquery(question, QueryOptions(max_iter=max_iter))
    return answer, time.perf_counter() - t0, len(llm.requests), llm.max_in_flight


def spine_calls(llm: ScriptedLLMServer, iterations: int) -> int:
    """Round trips on the critical path: every call that is not a verdict (plan, lookups,
    reflect, answer, format retries) plus one verdict round per iteration."""
    judges = sum(1 for r in llm.requests if task_of(r) in ("judge", "judge-batch"))
    return len(llm.requests) - judges + (iterations if judges else 0)


async def _bench(args: argparse.Namespace) -> tuple[list[Run], dict[str, Any]]:
    questions = _questions(args.eval_dir, args.limit)
    warmup, measured = questions[-1], questions[:-1]
    runs: list[Run] = []
    with ScriptedLLMServer(latency=args.latency) as llm:
        base = DeepSearcher(_settings(args, llm.base_url, "llm", args.concurrency))
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
            for label, rerank, conc in configs(args.concurrency, args.top_k):
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
                            answer.chunks_kept + answer.chunks_dropped,
                            answer.chunks_kept,
                            spine_calls(llm, answer.iterations),
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
        for label, rerank, conc in configs(args.concurrency, args.top_k):
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
                    f"{statistics.mean(r.judged for r in rs):.1f}",
                    f"{statistics.mean(r.kept for r in rs):.1f}",
                    f"{statistics.mean(r.spine for r in rs):.1f}",
                    max(r.max_in_flight for r in rs),
                    cut,
                ]
            )
        labels = [c[0] for c in configs(args.concurrency, args.top_k)]
        conc_s, seq_s, batch_s = (means[label] for label in labels[:3])
        seq_runs = [r for r in runs if r.reflect == reflect and r.config == labels[1]]
        # With every verdict round taking one call's time, the best any concurrency can do.
        floor = sum(r.spine for r in seq_runs) / sum(r.server_calls for r in seq_runs)
        line = (
            f"- script `{reflect}`: concurrent ÷ sequential wall time = {conc_s:.2f} / "
            f"{seq_s:.2f} = **{conc_s / seq_s:.3f}** (target ≤ {TARGET_RATIO}: "
            f"{verdict(conc_s / seq_s <= TARGET_RATIO)}); critical-path floor "
            f"{floor:.3f}; batched ÷ sequential = {batch_s / seq_s:.3f}"
        )
        if ONE_ROUND in labels:
            line += (
                f"; with one round of verdicts in flight ({one_round(args.top_k)}) "
                f"{means[ONE_ROUND] / seq_s:.3f}"
            )
        line += f"; verdicts in the lookup's call (the default) ÷ sequential = {means[LOOKUP] / seq_s:.3f}"
        ratios.append(line)
    table = markdown_table(
        [
            "LLM script",
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
            "chunks judged (mean)",
            "chunks kept (mean)",
            "critical-path calls (mean)",
            "max calls in flight",
            "cut short",
        ],
        rows,
        "lllrrrrrrrrrrrrrr",
    )
    q = Settings().query
    head = (
        f"Machine: {machine()}. Scripted LLM {args.latency * 1000:.0f} ms per call; "
        f"{load['chunks']} HotpotQA chunks in Milvus Lite; {args.limit} questions asked one "
        f"after another per configuration; query.max_iter {args.max_iter}, query.top_k "
        f"{args.top_k}, query.max_llm_calls {args.max_llm_calls}, other query settings default "
        f"(max_sub_queries {q.max_sub_queries}, max_gap_queries {q.max_gap_queries}, rerank_batch_size {q.rerank_batch_size})."
    )
    return "\n".join([head, "", table, "", *ratios])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency", type=float, default=0.2, help="scripted LLM seconds per call")
    parser.add_argument("--limit", type=int, default=20, help="questions per configuration")
    parser.add_argument("--max-iter", type=int, default=3)
    parser.add_argument("--top-k", type=int, default=Settings().query.top_k, help="query.top_k")
    parser.add_argument(
        "--max-llm-calls",
        type=int,
        default=Settings().query.max_llm_calls,
        help="query.max_llm_calls (raise it with --top-k, or runs are cut short)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="llm.max_concurrency of the concurrent runs (default: the setting's default)",
    )
    parser.add_argument(
        "--script",
        "--reflect",
        dest="reflect",
        default="default,follow,fanout",
        help="LLM scripts: default, follow, fanout",
    )
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    parser.add_argument("--db", type=Path, default=OUT / "query.db")
    parser.add_argument("--out-name", default="query", help="benchmarks/out/<name>.md/.json")
    args = parser.parse_args()
    if args.concurrency is None:
        args.concurrency = Settings().llm.max_concurrency
    args.reflect = [m.strip() for m in args.reflect.split(",") if m.strip()]
    if bad := [m for m in args.reflect if m not in ("default", "follow", "fanout")]:
        parser.error(f"unknown LLM script {', '.join(bad)}")
    logging.basicConfig(level=logging.WARNING)
    OUT.mkdir(parents=True, exist_ok=True)

    runs, load = asyncio.run(_bench(args))
    text = render(runs, load, args)
    print(text)
    (OUT / f"{args.out_name}.md").write_text(text + "\n", encoding="utf-8")
    (OUT / f"{args.out_name}.json").write_text(
        json.dumps({"load": load, "runs": [asdict(r) for r in runs]}, indent=2), encoding="utf-8"
    )


if __name__ == "__main__":
    main()
