"""Research report cost and concurrency (issue #14).

    .venv/bin/python benchmarks/research.py [--latency 0.2] [--repeat 1]
        [--db benchmarks/out/research.db] [--out-name research]

The LLM is the scripted OpenAI-compatible server (tests/llm_server.py) answering every call
after ``--latency`` seconds; its default replies cover every research stage: the brief's
must-answer questions are the request's parts split on " and " (so the request below gives a
4-section plan), each researcher is the deep-search loop of ``query`` (the scripted judge keeps a
passage sharing a content word with the question, reflection proposes nothing, so one iteration),
the answer step cites the passage sentence sharing most words with the question
(``grounded_answer``), the draft restates each finding with its evidence ids, the check finds every question covered
(no revision). The corpus is data/ (the sample documents), loaded once into a Milvus Lite file
under benchmarks/out. The answer cache is off.

Runs, at the settings' defaults otherwise:

- ``concurrent``: ``research.max_concurrency`` and ``llm.max_concurrency`` at their defaults;
- ``sequential``: the same report with ``research.max_concurrency 1`` and
  ``llm.max_concurrency 1``: every LLM call waits for the one before, so its wall time is
  what the same calls cost one after another (measured, not computed from a call count;
  ``calls x latency`` is printed next to it as a check).

Target: concurrent wall time <= 0.35 x sequential. Cost: LLM calls and tokens per report (the
scripted server's token count: whitespace-separated words), and the report's calls over one
default ``query``'s (the mean over the plan's four questions asked as queries; target <= 8).
Prints a markdown table and writes benchmarks/out/<out-name>.md (+ .json).
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
from _common import OUT, ROOT, machine, markdown_table, prepare_imports, verdict

prepare_imports()

from deepsearcher.config import Settings, load_settings  # noqa: E402
from deepsearcher.options import QueryOptions  # noqa: E402
from deepsearcher.research import Report, ResearchRequest  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402
from tests.llm_server import ScriptedLLMServer, task_of  # noqa: E402

COLLECTION = "demo"
REQUEST = (
    "the NR-7 battery supplier and the international per diem and the office managers "
    "and the Q3 2024 revenue"
)
TARGET_RATIO = 0.35
TARGET_QUERY_MULTIPLE = 8


_WORDS = re.compile(r"[a-z0-9]{3,}")


def grounded_answer(req: dict[str, Any]) -> str:
    """Scripted answer step: the passage sentence sharing most words with the question, cited
    with its passage number (the default reply takes passage 1's first sentence, which in
    data/ is often a heading or a table row). Same call count; only the prose differs."""
    text = "\n".join(str(m.get("content", "")) for m in req.get("messages", []))
    found = re.search(r"^Question:(.*)$", text, re.MULTILINE)
    asked = set(_WORDS.findall(found.group(1).lower())) if found else set()
    best: tuple[int, str, str] = (0, "", "")
    for attrs, body in re.findall(r"<document([^>]*)>\n?(.*?)</document>", text, re.DOTALL):
        n = re.search(r'n="(\d+)"', attrs)
        for sentence in re.split(r"(?<=[.!?])\s+|\n\s*\n|\n(?=[-*#|])", body):
            sentence = " ".join(sentence.split()).strip(" -*#|")
            if len(sentence.split()) < 6 or "|" in sentence:
                continue
            score = len(asked & set(_WORDS.findall(sentence.lower())))
            if score > best[0] and n:
                best = (score, sentence, n.group(1))
    if not best[1]:
        return "The documents do not state it."
    return f"{best[1].rstrip('.')} [{best[2]}]."


@dataclass
class Run:
    config: str
    seconds: float
    llm_calls: int
    server_calls: int
    tokens: int
    sections: int
    sources: int
    max_in_flight: int
    cut_short: str | None


def _settings(db: Path, llm_url: str, **research: Any) -> Settings:
    llm: dict[str, Any] = {"base_url": llm_url, "model": "scripted"}
    if "llm_concurrency" in research:
        llm["max_concurrency"] = research.pop("llm_concurrency")
    return load_settings(
        overrides={
            "vector_store": {"uri": str(db), "collection": COLLECTION},
            "llm": llm,
            "cache": {"enabled": False},
            "research": research,
        },
        environ={},
    )


async def _report(
    searcher: DeepSearcher, llm: ScriptedLLMServer, config: str
) -> tuple[Run, Report]:
    llm.reset()
    llm.add_rule(lambda r: task_of(r) == "answer", grounded_answer)
    t0 = time.perf_counter()
    report = await searcher.aresearch(ResearchRequest(REQUEST, collections=[COLLECTION]))
    seconds = time.perf_counter() - t0
    return Run(
        config,
        seconds,
        report.usage.llm_calls,
        len(llm.requests),
        report.usage.total_tokens,
        len(report.sections),
        len(report.sources),
        llm.max_in_flight,
        report.cut_short,
    ), report


async def _bench(args: argparse.Namespace) -> tuple[list[Run], list[int], str]:
    runs: list[Run] = []
    with ScriptedLLMServer(latency=args.latency) as llm:
        base = DeepSearcher(_settings(args.db, llm.base_url))
        loaded = await base.aload(ROOT / "data", COLLECTION)
        print(
            f"corpus: data/ ({loaded.files_loaded} new / {loaded.files_unchanged} unchanged "
            f"files, {loaded.chunks_total} chunks)",
            file=sys.stderr,
        )
        configs = {
            "concurrent": {},
            "sequential": {"max_concurrency": 1, "llm_concurrency": 1},
        }
        searchers = {
            name: DeepSearcher(
                _settings(args.db, llm.base_url, **dict(extra)),
                embedder=base.embedder,
                store=base.store,
            )
            for name, extra in configs.items()
        }
        await _report(searchers["concurrent"], llm, "warm-up")  # model and index warm
        reports: dict[str, Report] = {}
        for _ in range(args.repeat):
            for name, searcher in searchers.items():
                run, reports[name] = await _report(searcher, llm, name)
                runs.append(run)
                print(f"{name}: {run.seconds:.2f}s, {run.llm_calls} calls", file=sys.stderr)
        # One default query per plan question: what the report costs in "questions".
        report = reports["concurrent"]
        markdown = report.to_markdown()
        questions = [s.question for s in (report.plan.sections if report.plan else [])]
        query_calls = []
        llm.add_rule(lambda r: task_of(r) == "answer", grounded_answer)
        for question in questions:
            answer = await searchers["concurrent"].aquery(
                question, QueryOptions(collections=[COLLECTION]), use_cache=False
            )
            query_calls.append(answer.usage.llm_calls)
        base.close()
    return runs, query_calls, markdown


def _table(runs: list[Run], query_calls: list[int], latency: float) -> tuple[str, dict[str, Any]]:
    by = {name: [r for r in runs if r.config == name] for name in ("concurrent", "sequential")}
    conc = statistics.mean(r.seconds for r in by["concurrent"])
    seq = statistics.mean(r.seconds for r in by["sequential"])
    calls = statistics.mean(r.llm_calls for r in by["concurrent"])
    tokens = statistics.mean(r.tokens for r in by["concurrent"])
    query = statistics.mean(query_calls) if query_calls else float("nan")
    rows = []
    for name, mine in by.items():
        r0 = mine[0]
        rows.append(
            [
                name,
                f"{statistics.mean(r.seconds for r in mine):.2f}",
                f"{statistics.mean(r.llm_calls for r in mine):.0f}",
                f"{statistics.mean(r.llm_calls for r in mine) * latency:.1f}",
                f"{statistics.mean(r.tokens for r in mine):,.0f}",
                r0.sections,
                r0.sources,
                max(r.max_in_flight for r in mine),
                "yes" if any(r.cut_short for r in mine) else "no",
            ]
        )
    table = markdown_table(
        [
            "run",
            "wall s",
            "LLM calls",
            "calls x latency s",
            "tokens",
            "sections",
            "sources",
            "max in flight",
            "cut short",
        ],
        rows,
        "lrrrrrrrl",
    )
    ratio = conc / seq
    multiple = calls / query
    summary = (
        f"concurrent / sequential wall time: {ratio:.2f} (target <= {TARGET_RATIO}: "
        f"{verdict(ratio <= TARGET_RATIO)})\n"
        f"per report: {calls:.0f} LLM calls, {tokens:,.0f} tokens\n"
        f"one default query: {query:.1f} LLM calls (mean of {len(query_calls)} questions: "
        f"{', '.join(str(c) for c in query_calls)})\n"
        f"report / query calls: {multiple:.1f}x (target <= {TARGET_QUERY_MULTIPLE}: "
        f"{verdict(multiple <= TARGET_QUERY_MULTIPLE)})"
    )
    figures = {
        "ratio": ratio,
        "calls": calls,
        "tokens": tokens,
        "query_calls": query_calls,
        "multiple": multiple,
        "concurrent_s": conc,
        "sequential_s": seq,
    }
    return table + "\n\n" + summary, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="Seconds per LLM call.")
    parser.add_argument("--repeat", type=int, default=1, help="Reports per configuration.")
    parser.add_argument("--db", type=Path, default=OUT / "research.db")
    parser.add_argument("--out-name", default="research")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    OUT.mkdir(parents=True, exist_ok=True)
    runs, query_calls, markdown = asyncio.run(_bench(args))
    text, figures = _table(runs, query_calls, args.latency)
    header = (
        f"Research report, 4 sections, scripted LLM at {args.latency}s per call, "
        f"{args.repeat} report(s) per run; {machine()}\nrequest: {REQUEST!r}"
    )
    print(header + "\n\n" + text)
    (OUT / f"{args.out_name}.md").write_text(header + "\n\n" + text + "\n", encoding="utf-8")
    (OUT / f"{args.out_name}.json").write_text(
        json.dumps({"runs": [asdict(r) for r in runs], **figures}, indent=2), encoding="utf-8"
    )
    (OUT / f"{args.out_name}_report.md").write_text(markdown, encoding="utf-8")


if __name__ == "__main__":
    main()
