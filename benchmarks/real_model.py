"""Deep search vs naive RAG with a real model behind any OpenAI-compatible endpoint.

    .venv/bin/python benchmarks/real_model.py --base-url http://127.0.0.1:PORT/v1 --model local
        [--modes deep,naive] [--all | --sets data,mixed,hotpot --limit N] [--max-iter 3]
        [--db benchmarks/out/real_model.db] [--json-out FILE] [--eval-dir DIR]
    .venv/bin/python benchmarks/real_model.py --scripted      # cost figures, no model needed
    .venv/bin/python benchmarks/real_model.py --tables FILE   # the tables of a saved run

The API key is read from the environment variable ``--api-key-env`` names (default
OPENAI_API_KEY); a local server needs none. Each question is asked once per mode with the answer
cache off, one question at a time. Modes: ``deep`` (the loop with one LLM verdict per passage),
``deep-batch`` (verdicts in batches), ``deep-norerank`` (no verdicts: every passage kept),
``naive`` (one retrieval, one answer).

Question sets with gold answers, each loaded into its own collection of one Milvus Lite file
(incremental: a rerun only hashes the files):

- ``data``: the sample questions of docs/sample-data.md over data/ (gold written out below);
- ``mixed``: benchmarks/mixed (tables, notes, e-mails, JSON, other languages, two hops);
- ``hotpot``: HotpotQA questions over its 994-passage corpus, from the shared evaluation data
  next to the checkout (``../shared/eval/hotpotqa100``; ``--eval-dir`` elsewhere). Skipped with
  a message when absent.

The default subset (4 + 2 + 1 questions, ``DEFAULT``) finishes in about 30 minutes with a 1.5B
model on 2 CPU cores; ``--all`` asks every question of the chosen sets.

Scoring, without an LLM judge:

- correct: every part of the gold answer appears in the answer (lower case, no punctuation,
  thousands separators and number words turned into digits; any listed variant of a part
  counts); partly: some parts do;
- citations: sentences with ``[n]`` whose cited passages hold at least a third of the
  sentence's key terms (the rule research's quality check uses), over all cited sentences;
  "uncited": answers with no ``[n]`` at all;
- evidence kept / retrieved: distinct passages the verdicts kept over those judged (naive:
  everything retrieved is kept);
- gold kept: gold passages (a gold document's chunk holding the question's evidence strings)
  kept, over gold passages retrieved, summed over runs. "Kept" is a YES verdict or the
  passage among the answer's sources (where unverified evidence the answer used ends up);
- "not stated": answers that say the documents do not state it while a gold passage was
  retrieved, and in brackets how many of them carry no note at all (a note about a budget
  counts as one: it does not say the evidence was thrown away);
- LLM calls, tokens (``est.`` when the client marks them estimated), wall seconds.

Prints a markdown table ready for benchmarks/README.md, a per-question table, and with
``--json-out`` writes every run (answer JSON included) to a file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import statistics
import sys
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EVAL_DIR, OUT, ROOT, machine, markdown_table, prepare_imports

prepare_imports()

from deepsearcher.config import load_settings  # noqa: E402
from deepsearcher.evaluation.metrics import GoldMatcher  # noqa: E402
from deepsearcher.options import QueryOptions  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402
from deepsearcher.types import Answer, Hit  # noqa: E402

logger = logging.getLogger("real_model")
# A git worktree sits one level deeper than the main checkout: its shared data is further up.
EVAL_FALLBACKS = [ROOT.parent.parent / "shared" / "eval"]

MODES = {  # mode -> (agent, rerank)
    "deep": ("deep", "llm"),
    "deep-batch": ("deep", "llm-batch"),
    "deep-norerank": ("deep", "none"),
    "naive": ("naive", None),
}
DEFAULT = {"data": ["d1", "d2", "d3", "d4"], "mixed": ["mx10", "mx48"], "hotpot": [2]}

# The sample questions of docs/sample-data.md. "parts": every part must appear (each a list of
# accepted variants); "evidence": (file, strings a chunk must hold to be a gold passage).
DATA_QUESTIONS: list[dict[str, Any]] = [
    {
        "id": "d1",
        "question": "How often must an administrator account's password be changed, "
        "and how soon must a lost laptop be reported?",
        "parts": [["90 days", "ninety days", "90-day"], ["4 hours", "four hours"]],
        "evidence": [["it_security_policy.html", ["90 days"]],
                     ["it_security_policy.html", ["4 hours"]]],
    },
    {
        "id": "d2",
        "question": "What is the NR-7's payload, and which firmware does it run?",
        "parts": [["12 kg", "150 kg"], ["NR-OS 4.2.1", "4.2.1"]],
        "evidence": [["nr7_product_spec.pdf", ["12 kg"]], ["nr7_product_spec.pdf", ["4.2.1"]]],
    },
    {
        "id": "d3",
        "question": "Who is the office manager at the site where the NR-7 is assembled?",
        "parts": [["Rafael Ortega"]],
        "evidence": [["office_locations.csv", ["Rafael Ortega"]],
                     ["nr7_product_spec.pdf", ["Austin"]]],
    },
    {
        "id": "d4",
        "question": "What international per diem applies to a trip in mid-October 2024, "
        "and who proposed it?",
        "parts": [["110"], ["CFO", "Priya Raman"]],
        "evidence": [["employee_handbook_travel_expense.md", ["110"]],
                     ["ops_meeting_notes_2024.txt", ["per-diem"]]],
    },
    {
        "id": "d5",
        "question": "Who supplies the NR-7 battery, and what supply risk does that create?",
        "parts": [["Kestrel"], ["only source", "single source", "sole source", "one supplier",
                                "single supplier", "sole supplier", "lead time", "16 weeks"]],
        "evidence": [["nr7_product_spec.pdf", ["Kestrel"]],
                     ["q3_2024_quarterly_report.docx", ["Kestrel", "lead time"]]],
    },
    {
        "id": "d6",
        "question": "Who must approve a business trip that costs USD 3,000?",
        "parts": [["CFO", "chief financial officer"]],
        "evidence": [["employee_handbook_travel_expense.md", ["3,000"]]],
    },
    {
        "id": "d7",
        "question": "What was EMEA revenue in Q3 2024?",
        "parts": [["3.1"]],
        "evidence": [["q3_2024_quarterly_report.docx", ["EMEA", "3.1"]]],
    },
    {
        "id": "d8",
        "question": "What is the total headcount of Northwind Robotics?",
        "parts": [["240"]],
        "evidence": [["q3_2024_quarterly_report.docx", ["240"]]],
    },
]  # fmt: skip

_NOT_STATED = re.compile(
    r"(do(?:es)? not (?:state|mention|contain|say|specify|provide|include)|no information"
    r"|not (?:stated|mentioned|specified|provided|found|available)|cannot (?:be )?(?:found|answer"
    r"|determin))",
    re.IGNORECASE,
)
_CITATION = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {
    w: str(10 * i)
    for i, w in enumerate(["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 3)
}
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "was",
        "were",
        "with",
        "that",
        "this",
        "from",
        "have",
        "has",
        "had",
        "not",
        "but",
        "its",
        "their",
        "they",
        "them",
        "what",
        "which",
        "when",
        "where",
        "who",
        "whom",
        "will",
        "would",
        "could",
        "should",
        "about",
        "into",
        "than",
        "then",
        "there",
        "these",
        "those",
        "been",
        "being",
        "also",
        "such",
        "each",
        "other",
        "more",
        "most",
        "some",
        "any",
        "all",
        "our",
        "your",
        "does",
        "did",
    ]
)


def normalize(text: str) -> str:
    """Lower case, no punctuation (a decimal point stays), digits for number words and no
    thousands separators, single spaces."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3}\b)", "", text)
    text = re.sub(r"(?<=\d)\.(?=\d)", "\0", text)  # keep 4.2.1 and 3.1 whole
    text = re.sub(r"[^\w\0]+", " ", text).replace("\0", ".")
    return " ".join(_NUMBER_WORDS.get(w, w) for w in text.split())


def contains(haystack: str, needle: str) -> bool:
    n = normalize(needle)
    return bool(n) and f" {n} " in f" {normalize(haystack)} "


def key_terms(text: str) -> list[str]:
    words = [w for w in normalize(text).split() if w not in _STOP]
    return list(dict.fromkeys(w for w in words if len(w) >= 4 or w[0].isdigit()))


def cited_sentences(answer: Answer) -> list[tuple[str, list[str]]]:
    """(sentence without citations, texts of the passages it cites) per cited sentence."""
    by_n = {s.n: s.text for s in answer.sources}
    out = []
    for sentence in _SENTENCE_END.split(answer.answer):
        ns = [int(n) for m in _CITATION.findall(sentence) for n in m.split(",")]
        if ns:
            out.append((_CITATION.sub(" ", sentence), [by_n[n] for n in ns if n in by_n]))
    return out


def supported(sentence: str, passages: list[str]) -> bool:
    terms = key_terms(sentence)
    if len(terms) < 3:
        return bool(passages)  # too short to check: a citation to a real passage counts
    text = f" {normalize(' '.join(passages))} "
    return sum(1 for t in terms if f" {t} " in text) / len(terms) >= 0.34


# -- question sets ------------------------------------------------------------------------


@dataclass
class Question:
    set: str
    id: str
    question: str
    parts: list[list[str]]
    gold_docs: list[str]
    evidence: list[tuple[str, list[str]]]  # (gold doc, strings a gold passage holds)
    root: Path


def data_questions() -> list[Question]:
    root = ROOT / "data"
    return [
        Question(
            "data", q["id"], q["question"], q["parts"],
            sorted({d for d, _ in q["evidence"]}), [(d, s) for d, s in q["evidence"]], root,
        )
        for q in DATA_QUESTIONS
    ]  # fmt: skip


def jsonl_questions(name: str, path: Path, root: Path) -> list[Question]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        answers = [a for a in q["answers"] if a]
        # HotpotQA gives no evidence strings: the gold passage holds the answer, unless the
        # answer is yes/no (a comparison: then any chunk of a gold document).
        strings = q.get("evidence") or [[]]
        if not q.get("evidence") and not {a.lower() for a in answers} & {"yes", "no"}:
            strings = [[a] for a in answers]
        evidence = [(d, s if isinstance(s, list) else [s]) for d in q["gold_doc_ids"]
                    for s in strings]  # fmt: skip
        out.append(Question(name, str(q["id"]), q["question"], [answers], q["gold_doc_ids"],
                            evidence, root))  # fmt: skip
    return out


def load_sets(args: argparse.Namespace) -> dict[str, list[Question]]:
    sets: dict[str, list[Question]] = {}
    for name in args.sets:
        if name == "data":
            qs = data_questions()
        elif name == "mixed":
            mixed = ROOT / "benchmarks" / "mixed"
            qs = jsonl_questions("mixed", mixed / "questions.jsonl", mixed / "corpus")
        else:
            hp = next(
                (d / "hotpotqa100" for d in (args.eval_dir, *EVAL_FALLBACKS) if d.is_dir()),
                args.eval_dir / "hotpotqa100",
            )
            if not (hp / "questions.jsonl").is_file():
                print(
                    f"hotpot skipped: {hp}/questions.jsonl not found (--eval-dir)", file=sys.stderr
                )
                continue
            qs = jsonl_questions("hotpot", hp / "questions.jsonl", hp / "corpus")
        if not args.all:
            wanted = DEFAULT[name] if args.limit is None else None
            if wanted is None:
                qs = qs[: args.limit]
            else:
                qs = [q for i, q in enumerate(qs) if q.id in wanted or i in wanted]
        sets[name] = qs
    return sets


# -- one run ------------------------------------------------------------------------------


@dataclass
class Run:
    set: str
    id: str
    mode: str
    correct: bool
    parts_found: int
    parts: int
    cited_sentences: int
    supported_sentences: int
    uncited: bool
    not_stated_silent: bool
    retrieved: int
    kept: int
    gold_retrieved: int
    gold_kept: int
    llm_calls: int
    tokens: int
    tokens_estimated: bool | None
    seconds: float
    evidence: str | None  # verified / unverified / none, where the agent reports it
    notes: int
    error: str | None = None
    answer: dict[str, Any] = field(default_factory=dict)


def gold_keys(q: Question, passages: dict[str, Hit]) -> set[str]:
    """Which retrieved passages (id -> hit) are gold passages."""
    return {
        cid
        for cid, hit in passages.items()
        for gold_doc, strings in q.evidence
        if GoldMatcher([gold_doc], q.root).key(hit.source) == gold_doc
        and all(contains(hit.text, s) for s in strings)
    }


def _estimated(answer: Answer) -> bool | None:
    usage = answer.usage.to_dict()
    if "estimated" in usage:
        return bool(usage["estimated"])
    value = getattr(answer.usage, "estimated", None)
    return None if value is None else bool(value)


async def ask(ds: DeepSearcher, q: Question, mode: str, args: argparse.Namespace) -> Run:
    agent, rerank = MODES[mode]
    opts = QueryOptions(agent=agent, rerank=rerank, max_iter=args.max_iter, collections=[q.set])
    verdicts: dict[str, bool] = {}
    t0 = time.perf_counter()
    answer: Answer | None = None
    error = None
    try:
        async for event in ds.astream(q.question, opts, use_cache=False):
            if event.type == "verdict":
                verdicts[event.chunk_id] = verdicts.get(event.chunk_id, False) or event.kept
            elif event.type == "done":
                answer = event.answer
    except Exception as exc:  # a benchmark records a failed run and goes on to the next
        error = f"{type(exc).__name__}: {exc}"
        logger.warning("%s %s failed: %s", q.id, mode, error)
    seconds = time.perf_counter() - t0
    if answer is None:
        answer = Answer(question=q.question, answer="", mode="deep" if agent == "deep" else "naive")
    passages: dict[str, Hit] = {}
    if agent == "naive":  # the same one retrieval the naive agent made (deterministic)
        hits = (
            await ds.retriever.search([q.question], [q.set], args.top_k or ds.settings.query.top_k)
        )[0]
        passages = {h.id: h for h in hits}
        verdicts = {h.id: True for h in hits}
    else:
        for cid in verdicts:
            if (hit := await asyncio.to_thread(ds.store.get_chunk, q.set, cid)) is not None:
                passages[cid] = hit
    gold = gold_keys(q, passages)
    source_texts = {normalize(s.text) for s in answer.sources}
    gold_kept = {c for c in gold if verdicts.get(c) or normalize(passages[c].text) in source_texts}
    found = sum(1 for variants in q.parts if any(contains(answer.answer, v) for v in variants))
    cited = cited_sentences(answer)
    # verified / unverified / none, where the agent reports it (an attribute or a JSON key).
    evidence = getattr(answer, "evidence", None) or answer.to_dict().get("evidence")
    return Run(
        q.set, q.id, mode,
        correct=found == len(q.parts), parts_found=found, parts=len(q.parts),
        cited_sentences=len(cited),
        supported_sentences=sum(1 for s, p in cited if supported(s, p)),
        uncited=not cited and bool(answer.answer),
        not_stated_silent=bool(_NOT_STATED.search(answer.answer)) and not answer.notes
        and bool(gold),
        retrieved=len(verdicts), kept=sum(verdicts.values()),
        gold_retrieved=len(gold), gold_kept=len(gold_kept),
        llm_calls=answer.usage.llm_calls, tokens=answer.usage.total_tokens,
        tokens_estimated=_estimated(answer), seconds=seconds,
        evidence=str(evidence) if evidence is not None else None,
        notes=len(answer.notes), error=error, answer=answer.to_dict(),
    )  # fmt: skip


# -- the benchmark ------------------------------------------------------------------------


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
    sets = load_sets(args)
    runs: list[Run] = []
    with DeepSearcher(settings_for(args, base_url, model)) as ds:
        for name, qs in sets.items():
            root = qs[0].root if qs else None
            if root is None:
                continue
            t0 = time.perf_counter()
            report = await ds.aload(root, name)
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


def not_stated(r: Run) -> bool:
    """The answer says the documents do not state it, while a gold passage was retrieved."""
    return bool(_NOT_STATED.search(str(r.answer.get("answer", "")))) and r.gold_retrieved > 0


def _ratio(a: int, b: int) -> str:
    return f"{a}/{b}" if b else "–"


def summary(runs: list[Run], modes: list[str]) -> str:
    rows = []
    for mode in modes:
        rs = [r for r in runs if r.mode == mode]
        if not rs:
            continue
        est = {r.tokens_estimated for r in rs}
        flag = " est." if True in est else ""
        secs = [r.seconds for r in rs]
        rows.append([
            mode, len(rs),
            sum(r.correct for r in rs),
            sum(1 for r in rs if not r.correct and r.parts_found),
            _ratio(sum(r.supported_sentences for r in rs), sum(r.cited_sentences for r in rs)),
            sum(r.uncited for r in rs),
            f"{sum(r.kept for r in rs)}/{sum(r.retrieved for r in rs)}",
            _ratio(sum(r.gold_kept for r in rs), sum(r.gold_retrieved for r in rs)),
            f"{sum(not_stated(r) for r in rs)} ({sum(r.not_stated_silent for r in rs)})",
            f"{statistics.mean(r.llm_calls for r in rs):.1f}",
            f"{statistics.mean(r.tokens for r in rs):,.0f}{flag}",
            sum(1 for r in rs if r.tokens == 0),
            f"{statistics.mean(secs):.0f}",
            f"{min(secs):.0f}–{max(secs):.0f}",
            sum(1 for r in rs if r.answer.get("cut_short")),
            sum(1 for r in rs if r.error),
        ])  # fmt: skip
    header = ["mode", "runs", "correct", "partly", "cited sentences supported", "uncited",
              "kept/retrieved", "gold kept/retrieved", "not stated (no note)", "LLM calls",
              "tokens", "0-token runs", "wall s (mean)", "wall s (range)", "cut short",
              "errors"]  # fmt: skip
    return markdown_table(header, rows, "lrrrrrrrrrrrrrrr")


def per_question(runs: list[Run]) -> str:
    rows = [[f"{r.set}/{r.id}", r.mode, "yes" if r.correct else f"{r.parts_found}/{r.parts}",
             _ratio(r.supported_sentences, r.cited_sentences), f"{r.kept}/{r.retrieved}",
             _ratio(r.gold_kept, r.gold_retrieved), r.evidence or "–", r.notes, r.llm_calls,
             r.tokens, f"{r.seconds:.0f}"] for r in runs]  # fmt: skip
    header = ["question", "mode", "correct", "cited ok", "kept/retr.", "gold kept/retr.",
              "evidence", "notes", "calls", "tokens", "s"]  # fmt: skip
    return markdown_table(header, rows, "llrrrrlrrrr")


def write_json(args: argparse.Namespace, runs: list[Run], base_url: str, model: str) -> None:
    payload = {"model": model, "base_url": base_url, "machine": machine(),
               "date": datetime.now(UTC).isoformat(timespec="seconds"),
               "modes": args.modes, "max_iter": args.max_iter,
               "runs": [asdict(r) for r in runs]}  # fmt: skip
    Path(args.json_out).write_text(json.dumps(payload, indent=1, ensure_ascii=False), "utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://host:8000/v1")
    parser.add_argument("--model", default="local", help="model name the endpoint serves")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var of the API key")
    parser.add_argument("--scripted", action="store_true",
                        help="use tests/llm_server.py's scripted server (cost figures only)")  # fmt: skip
    parser.add_argument("--modes", default="deep,naive", help=", ".join(MODES))
    parser.add_argument("--sets", default="data,mixed,hotpot", help="data, mixed, hotpot")
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
    if bad := [s for s in args.sets if s not in DEFAULT]:
        parser.error(f"unknown set {', '.join(bad)}; choose from {', '.join(DEFAULT)}")
    if args.tables:  # the tables of a saved (possibly unfinished) run, nothing asked
        saved = json.loads(Path(args.tables).read_text(encoding="utf-8"))
        runs = [Run(**r) for r in saved["runs"]]
        modes = [m for m in saved["modes"] if any(r.mode == m for r in runs)]
        print(f"Model: {saved['model']}; {saved['machine']}; {saved['date']}; "
              f"max_iter {saved['max_iter']}; {len(runs)} runs\n")  # fmt: skip
        print(summary(runs, modes) + "\n\n" + per_question(runs))
        return
    if not args.scripted and not args.base_url:
        parser.error("--base-url is required (or --scripted)")
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
    print(summary(runs, args.modes))
    print()
    print(per_question(runs))
    if args.json_out:
        write_json(args, runs, args.base_url or "scripted", model)


if __name__ == "__main__":
    main()
