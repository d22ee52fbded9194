"""The DeepSearch loop.

decompose -> (search all pending queries in parallel -> judge every new chunk concurrently ->
reflect for gap queries) x max_iter -> cited answer. Each step degrades visibly when the LLM
misbehaves: a failed decomposition searches the question itself, an unusable verdict drops the
chunk and counts it, a failed reflection ends the loop, and a spent budget answers with what
was found, marked as cut short.

The judge's verdicts never leave the answer with less than retrieval found: below
``query.min_evidence`` kept passages, the loop searches on with reformulated queries, and the
answer gets the best-ranked rejected passages too, marked unverified.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from deepsearcher.agents import prompts
from deepsearcher.agents.base import (
    ask,
    escape_document,
    messages_for,
    new_answer,
    render_document,
    resolve_collections,
    write_answer,
)
from deepsearcher.agents.judge import Verdict, judge_batch, judge_one
from deepsearcher.agents.naive_rag import retrieval_only
from deepsearcher.agents.parsing import parse_queries
from deepsearcher.agents.queries import QUERIES_SCHEMA, fallback_reformulations, standalone
from deepsearcher.config import Settings
from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.llm import ChatModel
from deepsearcher.options import QueryOptions, or_configured
from deepsearcher.retrieval import Retriever
from deepsearcher.run_context import RunContext
from deepsearcher.tools.web import WebSearchTool
from deepsearcher.types import (
    EVIDENCE_NOTE,
    Answer,
    Event,
    Hit,
    ReflectionEvent,
    SearchEvent,
    SubQueriesEvent,
    VerdictEvent,
)

logger = logging.getLogger(__name__)

_RRF_K = 60  # the usual reciprocal-rank-fusion constant: damps the weight of the top ranks


def _dedupe(queries: Sequence[str], seen: set[str]) -> list[str]:
    out = []
    for q in queries:
        key = " ".join(q.lower().split())
        if key and key not in seen:
            seen.add(key)
            out.append(q.strip())
    return out


@dataclass
class _Search:
    """One question's loop: what it searched, retrieved and kept so far."""

    question: str
    answer: Answer
    collections: list[str]
    top_k: int
    rerank: str
    pending: list[str] = field(default_factory=list)  # queries of the next round
    queries: list[str] = field(default_factory=list)  # every query searched, in order
    seen: set[str] = field(default_factory=set)  # normalised queries, to skip repeats
    fresh: list[Hit] = field(default_factory=list)  # chunks first retrieved this round
    kept: list[Hit] = field(default_factory=list)
    retrieved: dict[str, Hit] = field(default_factory=dict)  # every chunk judged, by id
    fused: dict[str, float] = field(default_factory=dict)  # chunk id -> RRF over all queries
    found_by: dict[str, str] = field(default_factory=dict)  # chunk id -> first query to find it
    iteration: int = 0
    stopped: bool = False  # a step ended the loop (budget, failed reflection)


class DeepSearchAgent:
    """Iterative decompose / search / judge / reflect loop with a cited answer.

    Without an LLM (``llm`` None) it shows the best passages; without ``web`` it searches the
    private collections only."""

    name = "deep"

    def __init__(
        self,
        settings: Settings,
        llm: ChatModel | None,
        retriever: Retriever,
        web: WebSearchTool | None = None,
    ) -> None:
        self.settings = settings
        self.llm = llm
        self.retriever = retriever
        self.web = web

    async def run(self, question: str, options: QueryOptions) -> AsyncIterator[Event]:
        q = self.settings.query
        top_k = or_configured(options.top_k, q.top_k)
        if self.llm is None:
            async for event in retrieval_only(
                self.settings, self.retriever, question, options.collections, top_k
            ):
                yield event
            return
        ctx = RunContext.create(self.settings, self.llm, options.timeout_s, options.budget_name)
        names, subs, events = await self._route_and_decompose(ctx, question, options.collections)
        for ev in events:
            yield ev
        if ctx.unreachable is not None:
            # A refused connection will be refused again: no step of the loop can work, so
            # show the passages now instead of failing each step in turn.
            async for ev in retrieval_only(
                self.settings, self.retriever, question, names, top_k, ctx=ctx
            ):
                yield ev
            return
        rerank = or_configured(options.rerank, q.rerank)
        s = _Search(question, new_answer(question, "deep"), names, top_k, rerank)
        subs = [standalone(sub, question) for sub in subs]
        s.pending = _dedupe(subs, s.seen)[: q.max_sub_queries]
        max_iter = or_configured(options.max_iter, q.max_iter)
        while s.pending and s.iteration < max_iter and not s.stopped:
            async for ev in self._search_round(ctx, s):
                yield ev
            if s.stopped:
                break
            async for ev in self._judge(ctx, s):
                yield ev
            if ctx.cut_short or ctx.unreachable or s.iteration >= max_iter:
                break
            async for ev in self._reflect(ctx, s):
                yield ev
        async for ev in self._answer(ctx, s):
            yield ev

    # -- 1. decompose (side by side with collection routing) ---------------------------------

    async def _route_and_decompose(
        self, ctx: RunContext, question: str, requested: Sequence[str] | None
    ) -> tuple[list[str], list[str], list[Event]]:
        """The collections to search, the first round's queries, and the events to show.
        Routing and decomposition do not depend on each other: run side by side, a store with
        several collections adds no round trip before the first search."""
        decompose = asyncio.ensure_future(self._decompose(ctx, question))
        try:
            names, events = await resolve_collections(self.retriever, question, requested, ctx)
            subs, problem = await decompose
        finally:
            decompose.cancel()  # a no-op once done; stops it when routing raised
        if problem and ctx.unreachable is None:
            events.append(
                ctx.note(f"decomposition failed ({problem}); searching the question as asked")
            )
        return names, subs or [question], events

    async def _decompose(self, ctx: RunContext, question: str) -> tuple[list[str], str | None]:
        q = self.settings.query
        try:
            subs = await ask(
                ctx,
                messages_for(
                    prompts.DECOMPOSE.format(
                        max_queries=q.max_sub_queries, question=escape_document(question)
                    )
                ),
                partial(parse_queries, max_items=q.max_sub_queries),
                schema=QUERIES_SCHEMA,
            )
        except (LLMError, BudgetExceeded) as exc:
            return [], exc.message
        return subs, None

    # -- 2. search every pending query at once ----------------------------------------------

    async def _search_round(self, ctx: RunContext, s: _Search) -> AsyncIterator[Event]:
        """One embedding batch, the collections in parallel, the web alongside when on. Sets
        ``s.fresh`` to the chunks no earlier query retrieved."""
        s.iteration += 1
        s.queries.extend(s.pending)
        yield SubQueriesEvent(queries=list(s.pending), iteration=s.iteration)
        try:
            results = await ctx.in_time(self.retriever.search(s.pending, s.collections, s.top_k))
        except BudgetExceeded as exc:
            ctx.cut_short = exc.message
            s.stopped = True
            yield ctx.note(f"search cut short: {exc.message}")
            return
        if self.web is not None:
            web_results, web_events = await self.web.search_many(s.pending, ctx)
            for ev in web_events:
                yield ev
            results = [r + w for r, w in zip(results, web_results, strict=True)]
        s.fresh = []
        for query, hits in zip(s.pending, results, strict=True):
            new: list[Hit] = []
            for rank, h in enumerate(hits, start=1):
                s.fused[h.id] = s.fused.get(h.id, 0.0) + 1.0 / (_RRF_K + rank)
                if h.id not in s.retrieved:
                    s.retrieved[h.id] = h
                    s.found_by[h.id] = query
                    new.append(h)
            s.fresh.extend(new)
            s.answer.chunks_retrieved += len(hits)
            yield SearchEvent(query=query, hits=len(hits), new=len(new))

    # -- 3. judge each new chunk (concurrently, bounded by llm.max_concurrency) --------------

    async def _judge(self, ctx: RunContext, s: _Search) -> AsyncIterator[Event]:
        hits = s.fresh
        if not hits:
            return
        if s.rerank == "none":
            s.kept.extend(hits)
            for h in hits:
                yield VerdictEvent(chunk_id=h.id, source=h.source, kept=True)
            return
        if s.rerank == "llm-batch":
            size = self.settings.query.rerank_batch_size
            groups = [hits[i : i + size] for i in range(0, len(hits), size)]
            tasks = [
                asyncio.ensure_future(
                    judge_batch(ctx, s.question, [s.found_by[h.id] for h in g], g)
                )
                for g in groups
            ]
        else:
            tasks = [
                asyncio.ensure_future(judge_one(ctx, s.question, s.found_by[h.id], h)) for h in hits
            ]
        failed: list[Verdict] = []
        try:
            timeout = max(ctx.search_remaining_s(), 0.001)
            for next_done in asyncio.as_completed(tasks, timeout=timeout):
                for verdict in await next_done:
                    if verdict.relevant:
                        s.kept.append(verdict.hit)
                    else:
                        s.answer.chunks_dropped += 1
                    if verdict.reason:
                        failed.append(verdict)
                    yield VerdictEvent(
                        chunk_id=verdict.hit.id,
                        source=verdict.hit.source,
                        kept=bool(verdict.relevant),
                        margin=verdict.margin,
                    )
        except (asyncio.TimeoutError, TimeoutError):
            ctx.cut_short = ctx.time_reason()
            yield ctx.note(f"search cut short: {ctx.cut_short}")
        finally:
            for t in tasks:
                t.cancel()
        unjudged = [v for v in failed if v.out_of_budget]
        unusable = [v for v in failed if not v.out_of_budget]
        if unjudged:
            ctx.cut_short = ctx.cut_short or unjudged[0].reason
            yield ctx.note(
                f"search cut short: {ctx.cut_short} ({len(unjudged)} chunk(s) left unjudged)"
            )
        if unusable and ctx.unreachable is None:
            yield ctx.note(
                f"{len(unusable)} chunk(s) dropped: verdict failed ({unusable[0].reason})"
            )

    # -- 4. reflect: which evidence is still missing? ----------------------------------------

    async def _reflect(self, ctx: RunContext, s: _Search) -> AsyncIterator[Event]:
        """Sets ``s.pending`` to the gap queries, or stops the loop. With fewer kept passages
        than the evidence floor, it asks for reformulations instead (and builds some itself
        when the model proposes none): the loop must not stop where more searching is
        needed."""
        max_gaps = self.settings.query.max_gap_queries
        if max_gaps == 0:
            s.stopped = True
            return
        too_little = s.rerank != "none" and len(s.kept) < self.settings.query.min_evidence
        if too_little:
            prompt = prompts.REFORMULATE.format(
                max_gaps=max_gaps,
                question=escape_document(s.question),
                queries=escape_document(str(s.queries)),
                documents=_kept_digest(self._ranked_unkept(s)[:5], budget=2500, max_chars=300),
            )
        else:
            prompt = prompts.REFLECT.format(
                max_gaps=max_gaps,
                question=escape_document(s.question),
                queries=escape_document(str(s.queries)),
                documents=_kept_digest(s.kept),
            )
        try:
            gaps = await ask(
                ctx,
                messages_for(prompt),
                partial(parse_queries, max_items=max_gaps),
                schema=QUERIES_SCHEMA,
            )
        except BudgetExceeded as exc:
            ctx.cut_short = exc.message
            s.stopped = True
            yield ctx.note(f"search cut short: {exc.message}")
            return
        except LLMError as exc:
            if not too_little or ctx.unreachable is not None:
                s.stopped = True
                if ctx.unreachable is None:  # else the answer step says it, once
                    yield ctx.note(
                        f"reflection failed ({exc.message}); answering with what was found"
                    )
                return
            gaps = []
        s.pending = _dedupe([standalone(g, s.question) for g in gaps], s.seen)[:max_gaps]
        if too_little and not s.pending:
            built = fallback_reformulations(s.question, self._ranked_unkept(s), max_gaps)
            s.pending = _dedupe(built, s.seen)[:max_gaps]
        yield ReflectionEvent(gap_queries=list(s.pending), iteration=s.iteration)

    def _ranked_unkept(self, s: _Search) -> list[Hit]:
        """Retrieved passages the judge did not keep, best fused rank first."""
        kept = {h.id for h in s.kept}
        unkept = [h for h in s.retrieved.values() if h.id not in kept]
        return sorted(unkept, key=lambda h: -s.fused.get(h.id, 0.0))

    # -- 5. answer from the kept chunks only -------------------------------------------------

    async def _answer(self, ctx: RunContext, s: _Search) -> AsyncIterator[Event]:
        answer = s.answer
        answer.iterations = s.iteration
        answer.sub_queries = s.queries
        answer.chunks_kept = len(s.kept)
        q = self.settings.query
        passages = _answer_context(s.kept, s.fused, q.max_context_chunks)
        verified = {h.id for h in passages} if s.rerank != "none" else set()
        floor = min(q.min_evidence, q.max_context_chunks)
        if s.rerank != "none" and len(passages) < floor:
            extra = self._ranked_unkept(s)[: floor - len(passages)]
            if extra:
                passages = passages + extra
                yield ctx.note(
                    f"{EVIDENCE_NOTE}the relevance judge kept {len(s.kept)} of "
                    f"{len(s.retrieved)} retrieved "
                    f"passage(s), fewer than query.min_evidence ({q.min_evidence}); the answer "
                    f"also uses the {len(extra)} best-ranked one(s) it rejected, unverified"
                )
        unjudged = sorted(s.retrieved.values(), key=lambda h: h.score, reverse=True)
        async for ev in write_answer(
            ctx, s.question, passages, answer, fallback=unjudged, verified=verified
        ):
            yield ev
        yield ctx.finish(answer)


def _answer_context(kept: Sequence[Hit], fused: Mapping[str, float], limit: int) -> list[Hit]:
    """The kept passages the answer is written from, best first, cut at ``limit``: ranked by
    reciprocal rank fusion over every query that retrieved them (as RAG-Fusion merges the lists
    of several generated queries), so a passage that several sub-queries found comes before
    one a single query ranked low. Ties keep the order the passages were kept in."""
    order = sorted(range(len(kept)), key=lambda i: (-fused.get(kept[i].id, 0.0), i))
    return [kept[i] for i in order[:limit]]


def _kept_digest(
    kept: Sequence[Hit], budget: int = 6000, max_chars: int = 400, min_chars: int = 150
) -> str:
    """The kept passages for reflection, shortened to fit ``budget`` characters. When even
    ``min_chars`` each do not fit, the newest passages win: reflection must see what the last
    round found, or it proposes the same gaps again."""
    if not kept:
        return "(none yet)"
    chars = max(min_chars, min(max_chars, budget // len(kept)))
    shown = list(enumerate(kept, start=1))[-max(1, budget // chars) :]
    return "\n\n".join(render_document(h, i, text=h.text[:chars]) for i, h in shown)
