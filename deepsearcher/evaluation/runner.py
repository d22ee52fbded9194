"""The eval run: load the corpus (incrementally), run every question through the agents (or
through dense and hybrid search alone), and score each one against its gold documents and
answers. Printing and file output live in ``deepsearcher.cli.eval`` and ``report``."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepsearcher.errors import ConfigError, DeepSearcherError
from deepsearcher.evaluation.metrics import (
    GoldMatcher,
    all_hops_at_k,
    chunk_all_hops_at_k,
    chunk_recall_at_k,
    distinct_documents,
    exact_match,
    recall_at_k,
    says_not_stated,
    summarize,
    token_f1,
)
from deepsearcher.evaluation.questions import EvalQuestion, load_questions, unmatched_gold
from deepsearcher.options import QueryOptions
from deepsearcher.searcher import DeepSearcher, require_loaded
from deepsearcher.types import Answer, LoadReport, ProgressCallback, Usage

logger = logging.getLogger(__name__)

AGENT_CHOICES = ("deep", "naive")
# Retrieval-only search fetches this many chunks per wanted document: a long document yields
# several chunks per query, and doc_recall@k is over the top k *distinct* documents.
FETCH_CHUNKS_PER_DOC = 3
_RANKED_KEPT = 20  # distinct documents stored per row, for inspection
_HISTORY_NOTE = (
    "follow-up questions (with history) were rewritten into a standalone question by one LLM "
    "call (prompts.REWRITE) for the agents; retrieval-only prepends the previous user turns"
)


@dataclass
class EvalOptions:
    questions: Path
    corpus: Path
    collection: str | None = None
    agents: list[str] = field(default_factory=lambda: list(AGENT_CHOICES))
    ks: list[int] = field(default_factory=lambda: [2, 5, 10])
    limit: int | None = None
    max_iters: list[int] = field(default_factory=list)  # empty: query.max_iter from settings
    retrieval_only: bool = False
    concurrency: int = 4


@dataclass
class EvalResult:
    mode: str  # "agents" or "retrieval"
    rows: list[dict[str, Any]]
    summary: dict[str, dict[str, Any]]
    labels: list[str]
    ks: list[int]
    max_iters: list[int]
    collection: str
    load: LoadReport | None
    notes: list[str]
    seconds: float


# Called after each question with its row and the number of rows the run will produce.
ResultCallback = Callable[[dict[str, Any], int], None]


def default_collection(corpus: Path) -> str:
    """``eval_<dataset>``: the corpus folder's name, or its parent's when it is ``corpus/``."""
    path = corpus.resolve()
    name = path.parent.name if path.name == "corpus" and path.parent.name else path.name
    return "eval_" + (re.sub(r"[^A-Za-z0-9_]", "_", name) or "corpus")


def run_labels(
    agents: Sequence[str], max_iters: Sequence[int]
) -> list[tuple[str, str, int | None]]:
    """(label, agent, max_iter) per run; deep gets one run per max_iter, naive one in all."""
    runs: list[tuple[str, str, int | None]] = []
    for agent in agents:
        if agent == "deep" and len(max_iters) > 1:
            runs += [(f"deep[max_iter={n}]", agent, n) for n in max_iters]
        else:
            runs.append((agent, agent, max_iters[0] if max_iters and agent == "deep" else None))
    return runs


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def check_options(opts: EvalOptions) -> list[EvalQuestion]:
    """Fail before the (slow) corpus load on a bad option; return the questions."""
    bad = [a for a in opts.agents if a not in AGENT_CHOICES]
    if bad:
        raise ConfigError(f"unknown agent '{bad[0]}'", "use deep, naive or both")
    if not opts.corpus.is_dir():
        raise ConfigError(f"corpus folder not found: {opts.corpus}", "pass --corpus DIR")
    return load_questions(opts.questions, opts.limit)


async def load_corpus(
    ds: DeepSearcher, opts: EvalOptions, on_progress: ProgressCallback | None = None
) -> tuple[str, LoadReport]:
    """Load ``opts.corpus`` into the eval collection, incrementally (unchanged files are only
    hashed) and pruning files that left the corpus, so the collection is never stale."""
    check_options(opts)
    collection = opts.collection or default_collection(opts.corpus)
    report = await ds.aload([opts.corpus], collection, prune=True, on_progress=on_progress)
    require_loaded(report)
    return collection, report


async def run_eval(
    ds: DeepSearcher,
    opts: EvalOptions,
    *,
    loaded: tuple[str, LoadReport] | None = None,
    on_result: ResultCallback | None = None,
) -> EvalResult:
    """Evaluate every question; loads the corpus first unless ``loaded`` says it is done."""
    t0 = time.perf_counter()
    questions = check_options(opts)
    collection, report = loaded or await load_corpus(ds, opts)
    notes: list[str] = []
    if report.files_failed:
        notes.append(
            f"{report.files_failed} corpus file(s) failed to load; their questions lose recall"
        )
    root = opts.corpus.resolve()
    records = await ds.astore.file_records(collection)
    missing = unmatched_gold(questions, records, root)
    if missing:
        notes.append(
            f"{len(missing)} gold document id(s) match no loaded file (e.g. '{missing[0]}'): "
            "wrong --corpus, or files that failed to load; their recall counts as missed"
        )
    ks = sorted(set(opts.ks))
    retrieval = opts.retrieval_only or ds.llm is None
    if retrieval and not opts.retrieval_only:
        notes.append("no LLM configured: ran retrieval-only (dense vs hybrid)")
    if retrieval:
        rows, labels = await _run_retrieval(ds, questions, collection, root, ks, on_result)
        max_iters: list[int] = []
    else:
        max_iters = opts.max_iters or [ds.settings.query.max_iter]
        runs = run_labels(opts.agents, max_iters)
        labels = [label for label, _, _ in runs]
        sem = asyncio.Semaphore(max(1, opts.concurrency))
        total = len(runs) * len(questions)
        done = (lambda row: on_result(row, total)) if on_result else None
        tasks = [
            _run_agent(ds, q, label, agent, mi, collection, root, ks, sem, done)
            for label, agent, mi in runs
            for q in questions
        ]
        rows = list(await asyncio.gather(*tasks))
        if any(q.history for q in questions):
            notes.append(_HISTORY_NOTE)
    summary = {label: summarize([r for r in rows if r["label"] == label], ks) for label in labels}
    return EvalResult(
        mode="retrieval" if retrieval else "agents",
        rows=rows,
        summary=summary,
        labels=labels,
        ks=ks,
        max_iters=max_iters,
        collection=collection,
        load=report,
        notes=notes,
        seconds=time.perf_counter() - t0,
    )


def _score_ranking(
    row: dict[str, Any], chunk_docs: list[str], ranked: list[str], gold: list[str], ks: list[int]
) -> None:
    """Chunk-level figures from ``chunk_docs`` (a document key per chunk, in rank order) and
    document-level ones from ``ranked`` (distinct documents, in rank order)."""
    row["ranked_docs"] = ranked[:_RANKED_KEPT]
    for k in ks:
        row[f"chunk_recall@{k}"] = chunk_recall_at_k(chunk_docs, gold, k)
        row[f"doc_recall@{k}"] = recall_at_k(ranked, gold, k)
        row[f"chunk_all_hops@{k}"] = chunk_all_hops_at_k(chunk_docs, gold, k)
        row[f"doc_all_hops@{k}"] = all_hops_at_k(ranked, gold, k)


def _base_row(q: EvalQuestion, label: str, matcher: GoldMatcher) -> dict[str, Any]:
    return {
        "id": q.id,
        "label": label,
        "type": q.type,
        "question": q.question,
        "gold": matcher.gold,
    }


async def _run_retrieval(
    ds: DeepSearcher,
    questions: list[EvalQuestion],
    collection: str,
    root: Path,
    ks: list[int],
    on_result: ResultCallback | None,
) -> tuple[list[dict[str, Any]], list[str]]:
    texts = [q.retrieval_text() for q in questions]
    embedder = await asyncio.to_thread(lambda: ds.embedder)
    vectors = await asyncio.to_thread(embedder.embed_query, texts)
    fetch = max(ks) * FETCH_CHUNKS_PER_DOC
    rows: list[dict[str, Any]] = []
    labels = ["dense", "hybrid"]
    for label in labels:
        for i, q in enumerate(questions):
            matcher = GoldMatcher(q.gold, root)
            t0 = time.perf_counter()
            hits = await ds.astore.search(
                collection,
                vectors[i : i + 1],
                fetch,
                texts=[texts[i]],
                hybrid=label == "hybrid",
            )
            row = _base_row(q, label, matcher)
            row["query"] = texts[i]
            row["seconds"] = time.perf_counter() - t0
            ranked = distinct_documents((h.source for h in hits[0]), matcher)
            # Chunk level asks for exactly max(ks) chunks, as `query --top-k` does: hybrid
            # fusion ranks over a candidate window of max(hybrid_candidates, top_k), so the
            # first k of the larger fetch above are not what a search for k returns when the
            # fetch exceeds the window. Smaller ks are prefixes of this search while they
            # stay within the window.
            chunk_hits = await ds.astore.search(
                collection,
                vectors[i : i + 1],
                max(ks),
                texts=[texts[i]],
                hybrid=label == "hybrid",
            )
            chunk_docs = [matcher.key(h.source) for h in chunk_hits[0] if h.source]
            _score_ranking(row, chunk_docs, ranked, matcher.gold, ks)
            rows.append(row)
            if on_result:
                on_result(row, len(questions) * len(labels))
    return rows, labels


async def _run_agent(
    ds: DeepSearcher,
    q: EvalQuestion,
    label: str,
    agent: str,
    max_iter: int | None,
    collection: str,
    root: Path,
    ks: list[int],
    sem: asyncio.Semaphore,
    on_result: Callable[[dict[str, Any]], None] | None,
) -> dict[str, Any]:
    matcher = GoldMatcher(q.gold, root)
    row = _base_row(q, label, matcher)
    row.update(agent=agent, max_iter=max_iter)
    async with sem:
        t0 = time.perf_counter()
        extra = Usage()
        sources: list[str] = []
        kept: list[str] = []
        try:
            query = await _standalone_question(ds, q, extra) if q.history else q.question
            row["query"] = query
            answer, kept = await _ask(ds, query, agent, max_iter, collection)
            row["seconds"] = time.perf_counter() - t0
            if agent == "naive":
                # The naive agent's "kept chunks" are its top-k search hits; it does not emit
                # them, so search again: same query, same settings, same (deterministic) hits.
                found = await ds.asearch(query, collections=[collection])
                kept = [h.source for h in found.hits]
            sources = [s.source for s in answer.sources if s.kind == "doc"] + kept
            usage = answer.usage
            usage.add(extra)
            row.update(
                answer=answer.answer,
                llm_calls=usage.llm_calls,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                iterations=answer.iterations,
                cut_short=answer.cut_short,
                notes=answer.notes,
            )
            row["em"] = exact_match(answer.answer, q.answers)
            row["f1"] = token_f1(answer.answer, q.answers)
            if q.unanswerable:
                row["not_stated"] = float(says_not_stated(answer.answer))
        except DeepSearcherError as exc:
            # One failed question is a visible row (and counted), not the end of the run.
            logger.warning("question %s (%s) failed: %s", q.id, label, exc.message)
            row.update(error=exc.message, answer="", em=0.0 if q.answers else None)
            row["f1"] = row["em"]
            row["seconds"] = time.perf_counter() - t0
    # Chunk level: the chunks the agent kept, in order (naive: its top_k hits). Document level
    # also counts the documents its answer cited.
    chunk_docs = [matcher.key(s) for s in kept if s]
    _score_ranking(row, chunk_docs, distinct_documents(sources, matcher), matcher.gold, ks)
    if on_result:
        on_result(row)
    return row


async def _ask(
    ds: DeepSearcher, question: str, agent: str, max_iter: int | None, collection: str
) -> tuple[Answer, list[str]]:
    """Run one agent; return its Answer and the sources of the chunks it kept, in order."""
    answer: Answer | None = None
    kept: list[str] = []
    options = QueryOptions(agent=agent, collections=[collection], max_iter=max_iter)
    # An evaluation measures the search: never an answer cached by an earlier run.
    async for event in ds.astream(question, options, use_cache=False):
        if event.type == "verdict" and event.kept:
            kept.append(event.source)
        elif event.type == "done":
            answer = event.answer
    assert answer is not None, "agent ended without a done event"
    return answer, kept


async def _standalone_question(ds: DeepSearcher, q: EvalQuestion, usage: Usage) -> str:
    """Rewrite a follow-up into a standalone question with one LLM call (counted in usage)."""
    assert ds.llm is not None, "agents run only with an LLM; retrieval-only runs skip this"
    question, note = await ds.arewrite_followup(q.question, [("user", t) for t in q.history], usage)
    if note:
        logger.warning("question %s: %s", q.id, note)
    return question
