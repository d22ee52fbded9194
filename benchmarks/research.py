"""Research reports: cost, concurrency and what a reader can check (issues #14, #32).

    # the scripted server (tests/llm_server.py), 4 sections over data/
    .venv/bin/python benchmarks/research.py [--latency 0.2] [--repeat 1]
    # a real model at any OpenAI-compatible endpoint: a three-section brief on data/ and one
    # on benchmarks/mixed/corpus (each its own collection)
    .venv/bin/python benchmarks/research.py --base-url http://127.0.0.1:PORT/v1 --model local \\
        [--max-concurrency 2] [--timeout-s 300] [--corpus data,mixed] [--json-out FILE]
    # the figures of a saved `deepsearcher research --json` report
    .venv/bin/python benchmarks/research.py --from-json report.json

Scripted: the server answers every call after ``--latency`` seconds; the brief's must-answer
questions are the request's parts split on " and " (a 4-section plan), each researcher is the
deep-search loop of ``query`` whose answer step cites the passage sentence sharing most words
with the question (``grounded_answer``). ``concurrent`` runs three researchers at once
(``research.max_concurrency 3``; the default, 1, suits a server that runs one request at a
time), ``sequential`` with ``research.max_concurrency 1`` and ``llm.max_concurrency 1`` (its wall time
is what the same calls cost one after another). Targets: concurrent <= 0.35 x sequential; a
report <= 8 x one default ``query``'s calls.

Every mode reports what a reader can check, from the report alone (``report_figures``): the
sentences of the sections that state something (two key terms or more, not "the documents do
not state"), the share of them that cite a source, the most passages one sentence cites, the
share of cited sentences whose passages hold the sentence's numbers and key terms (the
attribution's guard, ``agents.attribution.holds_claim``), and the conflicts flagged. Targets
(#32): >= 90 % of sentences cited, <= 3 passages per citation, >= 90 % of them holding the
sentence; with the local model <= 40 LLM calls and <= 300 s for a three-section brief.
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

from deepsearcher.agents.attribution import holds_claim  # noqa: E402
from deepsearcher.agents.citations import NOT_STATED, claim_of, key_terms, sentences  # noqa: E402
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
# Three-section briefs for a real model: the request on data/, one on the mixed folder.
BRIEFS = {
    "data": (
        ROOT / "data",
        "demo",
        "Brief a new operations manager on the NR-7 robot: where it is assembled, its battery "
        "supplier and the supply risk",
    ),
    "mixed": (
        ROOT / "benchmarks/mixed/corpus",
        "mixed",
        "Brief the new quality manager on the Aurora IP-3 battery latch notice: which units "
        "are affected, what service does about it, and the field complaint rate in Q2 2025",
    ),
}
TARGET_RATIO = 0.35
TARGET_QUERY_MULTIPLE = 8
_CITE = re.compile(r"\[(\d{1,3})\]")
_WORDS = re.compile(r"[a-z0-9]{3,}")


def report_figures(report: dict[str, Any]) -> dict[str, Any]:
    """What a reader can check in a report (its JSON form): see the module docstring."""
    passages = {s["n"]: s["evidence_id"] for s in report["sources"]}
    texts = {e["id"]: e["text"] for e in report["evidence"]}
    stating = cited = holding = 0
    per_sentence: list[int] = []
    for section in report["sections"]:
        for sentence in sentences(section["text"]):
            claim = claim_of(sentence, _CITE).replace("[not in sources]", "").strip()
            if len(key_terms(claim)) < 2 or NOT_STATED.search(claim):
                continue
            stating += 1
            numbers = [int(n) for n in _CITE.findall(sentence) if int(n) in passages]
            if not numbers:
                continue
            cited += 1
            per_sentence.append(len(numbers))
            joined = " ".join(texts.get(passages[n], "") for n in numbers)
            holding += holds_claim(claim, joined)
    usage = report["usage"]
    return {
        "llm_calls": usage["llm_calls"],
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "seconds": report["seconds"],
        "sections": len(report["sections"]),
        "sentences": stating,
        "cited_share": cited / stating if stating else float("nan"),
        "max_citations": max(per_sentence, default=0),
        "mean_citations": statistics.mean(per_sentence) if per_sentence else 0.0,
        "holding_share": holding / cited if cited else float("nan"),
        "conflicts": len((report.get("quality") or {}).get("contradictions") or []),
        "revisions": report.get("revisions", 0),
        "cut_short": report.get("cut_short"),
        "missing": len(report.get("missing") or []),
        "degraded": len(report.get("degraded") or []),
    }


def figures_table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    return markdown_table(
        [
            "report",
            "LLM calls",
            "prompt tok",
            "wall s",
            "sections",
            "sentences",
            "cited",
            "max cites",
            "holding",
            "conflicts",
            "revisions",
        ],
        [
            [
                name,
                f["llm_calls"],
                f"{f['prompt_tokens']:,}",
                f"{f['seconds']:.0f}",
                f["sections"],
                f["sentences"],
                f"{f['cited_share']:.0%}",
                f["max_citations"],
                f"{f['holding_share']:.0%}",
                f["conflicts"],
                f["revisions"],
            ]
            for name, f in rows
        ],
        "lrrrrrrrrrr",
    )


# -- the scripted server -----------------------------------------------------------------------


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


async def _bench(args: argparse.Namespace) -> tuple[list[Run], list[int], Report]:
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
            # Three researchers at once: the scripted server answers requests in parallel
            # (research.max_concurrency defaults to 1 for servers that run one at a time).
            "concurrent": {"max_concurrency": 3},
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
        questions = [s.question for s in (report.plan.sections if report.plan else [])]
        query_calls = []
        llm.add_rule(lambda r: task_of(r) == "answer", grounded_answer)
        for question in questions:
            answer = await searchers["concurrent"].aquery(
                question, QueryOptions(collections=[COLLECTION]), use_cache=False
            )
            query_calls.append(answer.usage.llm_calls)
        base.close()
    return runs, query_calls, report


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


def scripted(args: argparse.Namespace) -> None:
    runs, query_calls, report = asyncio.run(_bench(args))
    text, figures = _table(runs, query_calls, args.latency)
    checked = figures_table([("concurrent", report_figures(report.to_dict()))])
    header = (
        f"Research report, 4 sections, scripted LLM at {args.latency}s per call, "
        f"{args.repeat} report(s) per run; {machine()}\nrequest: {REQUEST!r}"
    )
    out = f"{header}\n\n{text}\n\nWhat a reader can check:\n\n{checked}"
    print(out)
    (OUT / f"{args.out_name}.md").write_text(out + "\n", encoding="utf-8")
    (OUT / f"{args.out_name}.json").write_text(
        json.dumps({"runs": [asdict(r) for r in runs], **figures}, indent=2), encoding="utf-8"
    )
    (OUT / f"{args.out_name}_report.md").write_text(report.to_markdown(), encoding="utf-8")


# -- a real model --------------------------------------------------------------------------------


def _real_settings(args: argparse.Namespace) -> Settings:
    return load_settings(
        overrides={
            "vector_store": {"uri": str(args.db), "collection": "demo"},
            "llm": {
                "base_url": args.base_url,
                "model": args.model,
                "max_concurrency": args.max_concurrency,
                "timeout_s": args.timeout_s,
            },
            "cache": {"enabled": False},
            "research": {"clarify": False},
        },
    )


async def _real(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    rows: list[tuple[str, dict[str, Any]]] = []
    with DeepSearcher(_real_settings(args)) as ds:
        for name in args.corpus.split(","):
            folder, collection, request = BRIEFS[name]
            await ds.aload(folder, collection)
            t0 = time.perf_counter()
            report = await ds.aresearch(ResearchRequest(request, collections=[collection]))
            wall = time.perf_counter() - t0
            figures = report_figures(report.to_dict()) | {"wall_s": wall}
            rows.append((name, figures))
            print(f"{name}: {json.dumps(figures)}", file=sys.stderr)
            (OUT / f"research_real_{name}.md").write_text(report.to_markdown(), encoding="utf-8")
            (OUT / f"research_real_{name}.json").write_text(
                json.dumps(report.to_dict(), ensure_ascii=False, indent=2), encoding="utf-8"
            )
    return rows


def real(args: argparse.Namespace) -> None:
    rows = asyncio.run(_real(args))
    table = figures_table(rows)
    header = f"Research reports, {args.model} at {args.base_url}; {machine()}"
    print(f"{header}\n\n{table}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(dict(rows), indent=2), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="Scripted: seconds per call.")
    parser.add_argument("--repeat", type=int, default=1, help="Scripted: reports per run.")
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--out-name", default="research")
    parser.add_argument("--base-url", help="A real model: an OpenAI-compatible endpoint.")
    parser.add_argument("--model", default="local")
    parser.add_argument("--max-concurrency", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument("--corpus", default="data,mixed", help="Real model: data, mixed or both.")
    parser.add_argument("--json-out", help="Real model: the figures as JSON.")
    parser.add_argument("--from-json", type=Path, help="The figures of a saved --json report.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        report = json.loads(args.from_json.read_text(encoding="utf-8"))
        print(figures_table([(args.from_json.name, report_figures(report))]))
    elif args.base_url:
        args.db = args.db or OUT / "research_real.db"
        real(args)
    else:
        args.db = args.db or OUT / "research.db"
        scripted(args)


if __name__ == "__main__":
    main()
