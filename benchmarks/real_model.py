"""Deep search vs naive RAG with a real model behind any OpenAI-compatible endpoint.

    .venv/bin/python benchmarks/real_model.py --base-url http://127.0.0.1:PORT/v1 --model local
        [--modes deep,naive] [--subset both|single|two-hop] [--all | --limit N]
        [--sets data,mixed,hotpot,musique] [--max-iter 3] [--db benchmarks/out/real_model.db]
        [--json-out FILE] [--eval-dir DIR]
    .venv/bin/python benchmarks/real_model.py --scripted      # cost figures, no model needed
    .venv/bin/python benchmarks/real_model.py --tables FILE   # the tables of a saved run

The API key is read from the environment variable ``--api-key-env`` names (default
OPENAI_API_KEY); a local server needs none. Each question is asked once per mode with the answer
cache off, one question at a time. Before each run a one-line request replaces what the
server has cached of the previous prompt: llama.cpp, vLLM and Ollama reuse the evaluated
prefix of the last request, and deep and naive read the same passages, so the second of them
would otherwise start warm. Modes: ``deep`` (the default loop: the verdicts come with each
lookup's call), ``deep-batch`` (one verdict call per round), ``deep-each`` (one verdict call per
passage), ``deep-norerank`` (no verdicts), ``naive`` (one retrieval, one answer).

Questions (``real_model_sets.py``): the default subset holds 8 single-hop and 14 two-hop
(bridge) questions from the sample data, the mixed-format folder, HotpotQA and MuSiQue; each
set is loaded into its own collection of one Milvus Lite file (incremental: a rerun only
hashes the files).

Scoring, without an LLM judge (per run, then per mode and subset):

- correct: every part of the gold answer appears in the answer (lower case, no punctuation,
  thousands separators and number words turned into digits; any listed variant counts);
- cited: the answer carries at least one ``[n]``, written by the model or attributed;
  attributed: citations the model did not write (``sources[].attributed``);
- citations hold terms: cited sentences whose cited passages hold a third of the sentence's
  key terms (the rule research's quality check uses; a field name such as
  ``account_manager`` holds its words), over all cited sentences;
- attributed hit gold: attributed citations whose passage is a gold passage, over attributed
  citations of questions whose gold passage the answer was given; "for a gold fact": the
  same, counting only citations of sentences that state a gold answer or evidence string;
- unsupported: sentences no passage holds (``unsupported_sentences``);
- fact as citation: answers with a sentence whose fact is a citation marker ("is [3].");
- hops: the lookup chain (``answer.hops``), per question in the JSON;
- LLM calls (median), tokens, wall seconds, time to the first answer token.

Prints markdown tables ready for benchmarks/README.md (summary, deep/naive ratios, per
question) and with ``--json-out`` writes every run (answer JSON included) to a file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EVAL_DIR, OUT, machine, markdown_table, prepare_imports

prepare_imports()

import real_model_sets as qsets  # noqa: E402
from real_model_sets import Question  # noqa: E402

from deepsearcher.config import load_settings  # noqa: E402
from deepsearcher.options import QueryOptions  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402
from deepsearcher.types import Answer  # noqa: E402

logger = logging.getLogger("real_model")

MODES = {  # mode -> (agent, rerank)
    "deep": ("deep", None),
    "deep-batch": ("deep", "llm-batch"),
    "deep-each": ("deep", "llm"),
    "deep-norerank": ("deep", "none"),
    "naive": ("naive", None),
}


@dataclass
class Run:
    set: str
    id: str
    mode: str
    two_hop: bool
    correct: bool
    parts_found: int
    parts: int
    cited: bool  # at least one [n] in the answer
    cited_sentences: int
    supported_sentences: int
    citations: int
    attributed: int
    attributed_gold: int  # attributed citations on a gold passage
    attributed_gold_known: int  # attributed citations of runs given a gold passage
    # The same, counting only citations of sentences that state a gold fact (an answer or an
    # evidence string): a sentence about something else has no known gold passage.
    fact_attributed_gold: int
    fact_attributed_known: int
    unsupported_sentences: int
    fact_as_marker: bool
    llm_calls: int
    tokens: int
    tokens_estimated: bool
    seconds: float
    first_token_s: float | None
    evidence: str | None
    notes: int
    hops: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    answer: dict[str, Any] = field(default_factory=dict)


def fact_attribution(q: Question, text: str, attributed: list[Any]) -> tuple[int, int]:
    """Of the ``attributed`` citations (each with n, source, text) whose sentence states a
    gold fact: how many are on a gold passage, and how many there are."""
    of_facts = [
        s for s in attributed
        if any(qsets.states_gold(q, t) for t in qsets.sentences_citing(text, s.n))
    ]  # fmt: skip
    return sum(1 for s in of_facts if qsets.is_gold(q, s.source, s.text)), len(of_facts)


def rescored(saved: dict[str, Any], by_id: dict[tuple[str, str], Question]) -> Run:
    """A saved run, with the fact attribution figures computed when it predates them."""
    if "fact_attributed_gold" not in saved:
        q = by_id[(saved["set"], saved["id"])]
        answer = saved["answer"] or {}
        given = [*answer.get("sources", []), *answer.get("retrieved", [])]
        cited = [SimpleNamespace(**c) for c in answer.get("sources", []) if c.get("attributed")]
        gold_given = any(qsets.is_gold(q, c["source"], c["text"]) for c in given)
        gold, known = fact_attribution(q, answer.get("answer", ""), cited) if gold_given else (0, 0)
        saved = {**saved, "fact_attributed_gold": gold, "fact_attributed_known": known}
    return Run(**saved)


def score(q: Question, mode: str, answer: Answer, seconds: float, error: str | None) -> Run:
    found = sum(
        1 for variants in q.parts if any(qsets.contains(answer.answer, v) for v in variants)
    )
    cited = qsets.cited_sentences(answer)
    given = [*answer.sources, *getattr(answer, "retrieved", [])]
    gold_given = any(qsets.is_gold(q, s.source, s.text) for s in given)
    attributed = [s for s in answer.sources if getattr(s, "attributed", False)]
    fact_gold, fact_known = fact_attribution(q, answer.answer, attributed) if gold_given else (0, 0)
    return Run(
        q.set, q.id, mode, qsets.is_two_hop(q),
        correct=found == len(q.parts), parts_found=found, parts=len(q.parts),
        cited=bool(qsets.CITATION.search(answer.answer)),
        cited_sentences=len(cited),
        supported_sentences=sum(1 for s, p in cited if qsets.supported(s, p)),
        citations=len(answer.sources), attributed=len(attributed),
        attributed_gold=sum(1 for s in attributed if gold_given and qsets.is_gold(q, s.source, s.text)),
        attributed_gold_known=len(attributed) if gold_given else 0,
        fact_attributed_gold=fact_gold, fact_attributed_known=fact_known,
        unsupported_sentences=len(getattr(answer, "unsupported_sentences", [])),
        fact_as_marker=qsets.fact_as_marker(answer.answer),
        llm_calls=answer.usage.llm_calls, tokens=answer.usage.total_tokens,
        tokens_estimated=bool(answer.usage.estimated), seconds=seconds,
        first_token_s=getattr(answer, "first_token_s", None),
        evidence=str(answer.evidence), notes=len(answer.notes),
        hops=[h.to_dict() for h in getattr(answer, "hops", [])],
        error=error, answer=answer.to_dict(),
    )  # fmt: skip


async def flush_prefix_cache(ds: DeepSearcher) -> None:
    """One short request, so the next run starts without the last run's prompt cached."""
    llm = ds.llm
    if llm is None:
        return
    try:
        await llm.complete([{"role": "user", "content": "Reply OK."}], max_tokens=1)
    except Exception as exc:  # a benchmark goes on; the run itself will show the failure
        logger.warning("cache flush failed: %s", exc)


async def ask(ds: DeepSearcher, q: Question, mode: str, args: argparse.Namespace) -> Run:
    agent, rerank = MODES[mode]
    opts = QueryOptions(agent=agent, rerank=rerank, max_iter=args.max_iter, collections=[q.set])
    await flush_prefix_cache(ds)
    t0 = time.perf_counter()
    answer: Answer | None = None
    error = None
    try:
        answer = await ds.aquery(q.question, opts, use_cache=False)
    except Exception as exc:  # a benchmark records a failed run and goes on to the next
        error = f"{type(exc).__name__}: {exc}"
        logger.warning("%s %s failed: %s", q.id, mode, error)
    seconds = time.perf_counter() - t0
    if answer is None:
        answer = Answer(question=q.question, answer="", mode="deep" if agent == "deep" else "naive")
    return score(q, mode, answer, seconds, error)


def settings_for(args: argparse.Namespace, base_url: str, model: str) -> Any:
    llm: dict[str, Any] = {"base_url": base_url, "model": model, "api_key_env": args.api_key_env}
    if args.max_concurrency:
        llm["max_concurrency"] = args.max_concurrency
    if args.timeout_s:
        llm["timeout_s"] = args.timeout_s
    query: dict[str, Any] = {"max_iter": args.max_iter}
    if args.query_timeout_s:
        query["timeout_s"] = args.query_timeout_s
    if args.top_k:
        query["top_k"] = args.top_k
    return load_settings(
        overrides={
            "vector_store": {"uri": str(args.db)},
            "llm": llm,
            "cache": {"enabled": False},
            "query": query,
        },
        environ={},
    )


async def bench(args: argparse.Namespace, base_url: str, model: str) -> list[Run]:
    sets = qsets.load_sets(args)
    runs: list[Run] = []
    with DeepSearcher(settings_for(args, base_url, model)) as ds:
        for name, qs in sets.items():
            t0 = time.perf_counter()
            report = await ds.aload(qs[0].root, name)
            print(f"{name}: {report.files_loaded} new / {report.files_unchanged} unchanged "
                  f"files, {report.chunks_total} chunks, {time.perf_counter() - t0:.0f}s",
                  file=sys.stderr, flush=True)  # fmt: skip
        for qs in sets.values():
            for q in qs:
                for mode in args.modes:
                    run = await ask(ds, q, mode, args)
                    runs.append(run)
                    print(f"{q.set}/{q.id} {mode}: {'correct' if run.correct else 'wrong'} "
                          f"({run.parts_found}/{run.parts}), {run.llm_calls} calls, "
                          f"{run.seconds:.0f}s{' ERROR ' + run.error if run.error else ''}",
                          file=sys.stderr, flush=True)  # fmt: skip
                    if args.json_out:  # written as it goes: a long run killed keeps its runs
                        write_json(args, runs, base_url, model)
    return runs


def _ratio(a: int, b: int) -> str:
    return f"{a}/{b}" if b else "–"


def _mean(values: list[float]) -> str:
    return f"{statistics.mean(values):.0f}" if values else "–"


def summary(runs: list[Run], modes: list[str]) -> str:
    rows = []
    for mode in modes:
        for subset, pick in (("single", False), ("two-hop", True), ("all", None)):
            rs = [r for r in runs if r.mode == mode and (pick is None or r.two_hop == pick)]
            if not rs:
                continue
            ttft = [r.first_token_s for r in rs if r.first_token_s is not None]
            rows.append([
                mode, subset, len(rs), sum(r.correct for r in rs),
                f"{statistics.median(r.llm_calls for r in rs):.0f}",
                f"{statistics.mean(r.tokens for r in rs):,.0f}{' est.' if any(r.tokens_estimated for r in rs) else ''}",
                _mean([r.seconds for r in rs]), _mean(ttft),
                _ratio(sum(r.cited for r in rs), len(rs)),
                _ratio(sum(r.supported_sentences for r in rs), sum(r.cited_sentences for r in rs)),
                _ratio(sum(r.attributed for r in rs), sum(r.citations for r in rs)),
                _ratio(sum(r.attributed_gold for r in rs), sum(r.attributed_gold_known for r in rs)),
                _ratio(sum(r.fact_attributed_gold for r in rs), sum(r.fact_attributed_known for r in rs)),
                sum(r.unsupported_sentences for r in rs),
                sum(r.fact_as_marker for r in rs),
                sum(1 for r in rs if r.error),
            ])  # fmt: skip
    header = ["mode", "questions", "runs", "correct", "LLM calls (median)", "tokens (mean)",
              "wall s (mean)", "first token s (mean)", "answers cited", "cited sentences hold terms",
              "attributed / citations", "attributed hit gold",
              "attributed for a gold fact hit gold", "unsupported sentences",
              "fact as citation", "errors"]  # fmt: skip
    return markdown_table(header, rows, "llrrrrrrrrrrrrrr")


def ratios(runs: list[Run], deep: str = "deep", base: str = "naive") -> str:
    """Deep against naive on the same questions, per subset: wall, calls, correct."""
    rows = []
    for subset, pick in (("single", False), ("two-hop", True), ("all", None)):
        d = [r for r in runs if r.mode == deep and (pick is None or r.two_hop == pick)]
        n = [r for r in runs if r.mode == base and (pick is None or r.two_hop == pick)]
        if not d or not n:
            continue
        rows.append([
            subset, len(d),
            f"{statistics.mean(r.seconds for r in d) / statistics.mean(r.seconds for r in n):.2f}×",
            f"{sum(r.correct for r in d)} vs {sum(r.correct for r in n)}",
            f"{sum(r.correct for r in d) - sum(r.correct for r in n):+d}",
        ])  # fmt: skip
    header = ["questions", "n", f"{deep} wall / {base} wall", "correct", "difference"]
    return markdown_table(header, rows, "lrrrr")


def per_question(runs: list[Run]) -> str:
    rows = []
    for r in runs:
        chain = " → ".join(f"{h.get('answer') or '∅'}" for h in r.hops) if r.hops else ""
        rows.append([
            f"{r.set}/{r.id}", "2" if r.two_hop else "1", r.mode,
            "yes" if r.correct else f"{r.parts_found}/{r.parts}", r.evidence or "–",
            _ratio(r.attributed, r.citations), r.unsupported_sentences, r.llm_calls,
            f"{r.seconds:.0f}", f"{r.first_token_s:.0f}" if r.first_token_s is not None else "–",
            chain[:60],
        ])  # fmt: skip
    header = ["question", "hops", "mode", "correct", "evidence", "attributed", "unsupported",
              "calls", "s", "first token s", "hop answers"]  # fmt: skip
    return markdown_table(header, rows, "lrllllrrrrl")


def write_json(args: argparse.Namespace, runs: list[Run], base_url: str, model: str) -> None:
    payload = {"model": model, "base_url": base_url, "machine": machine(),
               "date": datetime.now(UTC).isoformat(timespec="seconds"),
               "modes": args.modes, "max_iter": args.max_iter,
               "runs": [asdict(r) for r in runs]}  # fmt: skip
    Path(args.json_out).write_text(json.dumps(payload, indent=1, ensure_ascii=False), "utf-8")


def tables(runs: list[Run], modes: list[str]) -> str:
    out = [summary(runs, modes)]
    if "deep" in modes and "naive" in modes:
        out.append(ratios(runs))
    out.append(per_question(runs))
    return "\n\n".join(out)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://host:8000/v1")
    parser.add_argument("--model", default="local", help="model name the endpoint serves")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var of the API key")
    parser.add_argument("--scripted", action="store_true",
                        help="use tests/llm_server.py's scripted server (cost figures only)")  # fmt: skip
    parser.add_argument("--modes", default="deep,naive", help=", ".join(MODES))
    parser.add_argument("--sets", default=",".join(qsets.SETS), help=", ".join(qsets.SETS))
    parser.add_argument("--subset", default="both", choices=["both", "single", "two-hop"])
    parser.add_argument("--all", action="store_true", help="every question of the sets")
    parser.add_argument("--limit", type=int, help="the first N questions of each set")
    parser.add_argument("--max-iter", type=int, default=3)
    parser.add_argument("--top-k", type=int, help="query.top_k (default: the setting)")
    parser.add_argument("--max-concurrency", type=int,
                        default=int(os.environ.get("DEEPSEARCHER_LLM__MAX_CONCURRENCY", 0)) or None,
                        help="llm.max_concurrency")  # fmt: skip
    parser.add_argument("--timeout-s", type=float,
                        default=float(os.environ.get("DEEPSEARCHER_LLM__TIMEOUT_S", 0)) or None,
                        help="llm.timeout_s (a CPU model needs minutes)")  # fmt: skip
    parser.add_argument("--query-timeout-s", type=float,
                        help="query.timeout_s, one question's time budget (default: the "
                        "setting; a busy CPU may need more)")  # fmt: skip
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    parser.add_argument("--db", type=Path, default=OUT / "real_model.db")
    parser.add_argument("--json-out", help="write every run (with its answer) to this file")
    parser.add_argument("--tables", metavar="JSON", help="print the tables of a --json-out file")
    args = parser.parse_args()
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    args.sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    if bad := [m for m in args.modes if m not in MODES]:
        parser.error(f"unknown mode {', '.join(bad)}; choose from {', '.join(MODES)}")
    if bad := [s for s in args.sets if s not in qsets.SETS]:
        parser.error(f"unknown set {', '.join(bad)}; choose from {', '.join(qsets.SETS)}")
    if not args.tables and not args.scripted and not args.base_url:
        parser.error("--base-url is required (or --scripted)")
    return args


def main() -> None:
    args = parse_args()
    if args.tables:  # the tables of a saved (possibly unfinished) run, nothing asked
        saved = json.loads(Path(args.tables).read_text(encoding="utf-8"))
        by_id = {(q.set, q.id): q for qs in qsets.load_sets(args).values() for q in qs}
        runs = [rescored(r, by_id) for r in saved["runs"]]
        modes = [m for m in saved["modes"] if any(r.mode == m for r in runs)]
        print(f"Model: {saved['model']}; {saved['machine']}; {saved['date']}; "
              f"max_iter {saved['max_iter']}; {len(runs)} runs\n")  # fmt: skip
        print(tables(runs, modes))
        return
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args.db.parent.mkdir(parents=True, exist_ok=True)
    if args.scripted:
        from tests.llm_server import ScriptedLLMServer

        with ScriptedLLMServer(latency=0.05) as llm:
            runs = asyncio.run(bench(args, llm.base_url, "scripted"))
        model = "scripted server (tests/llm_server.py, 0.05 s per call)"
    else:
        model = args.model
        runs = asyncio.run(bench(args, args.base_url, model))
    print(f"\nModel: {model}; {machine()}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
          f"max_iter {args.max_iter}\n")  # fmt: skip
    print(tables(runs, args.modes))
    if args.json_out:
        write_json(args, runs, args.base_url or "scripted", model)


if __name__ == "__main__":
    main()
