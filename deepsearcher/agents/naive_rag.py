"""Baselines: one search and one answer call (``NaiveRAGAgent``), and retrieval only when no
LLM is configured."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from deepsearcher.agents.base import (
    Retriever,
    RunContext,
    fallback_answer,
    hit_to_source,
    new_answer,
    write_answer,
)
from deepsearcher.errors import BudgetExceeded
from deepsearcher.types import DoneEvent, Event, SearchEvent, SubQueriesEvent

if TYPE_CHECKING:
    from deepsearcher.searcher import DeepSearcher

NO_LLM_NOTE = (
    "no LLM configured: showing the best passages only; set OPENAI_API_KEY (or llm.api_key_env) "
    "or llm.base_url for a local server to get answers"
)


async def retrieval_only(
    searcher: DeepSearcher,
    question: str,
    collections: Sequence[str] | None,
    top_k: int,
    *,
    ctx: RunContext | None = None,
) -> AsyncIterator[Event]:
    """The best passages without an LLM: none is configured, or (``ctx.unreachable``) the
    configured one refused the connection earlier in this run."""
    ctx = ctx or RunContext.create(searcher.settings, None)
    retriever = Retriever(searcher)
    names, _ = await retriever.resolve_collections(question, collections, ctx)
    if ctx.unreachable is not None:
        yield ctx.unreachable_note()
        reason = "the LLM could not be reached"
    else:
        yield ctx.note(NO_LLM_NOTE)
        reason = "no LLM is configured"
    hits = (await retriever.search([question], names, top_k))[0]
    yield SearchEvent(query=question, hits=len(hits), new=len(hits))
    answer = new_answer(question, "retrieval-only")
    answer.answer = fallback_answer(hits, reason=reason)
    answer.sources = [hit_to_source(i, h) for i, h in enumerate(hits, start=1)]
    answer.sub_queries = [question]
    answer.chunks_retrieved = len(hits)
    answer.usage = ctx.usage
    answer.notes = ctx.notes
    answer.seconds = ctx.elapsed()
    yield DoneEvent(answer=answer)


class NaiveRAGAgent:
    """Search the question once, answer from the top-k: what deep search is measured against."""

    name = "naive"

    def __init__(self, searcher: DeepSearcher) -> None:
        self.searcher = searcher
        self.retriever = Retriever(searcher)

    async def run(
        self,
        question: str,
        *,
        collections: Sequence[str] | None = None,
        top_k: int | None = None,
        timeout_s: float | None = None,
        budget_name: str | None = None,
        **_ignored: object,  # deep-only options (max_iter, rerank, web) do not apply here
    ) -> AsyncIterator[Event]:
        settings = self.searcher.settings
        top_k = top_k or settings.query.top_k
        llm = self.searcher.llm
        if llm is None:
            async for event in retrieval_only(self.searcher, question, collections, top_k):
                yield event
            return
        ctx = RunContext.create(settings, llm, timeout_s, budget_name)
        names, events = await self.retriever.resolve_collections(question, collections, ctx)
        for ev in events:
            yield ev
        yield SubQueriesEvent(queries=[question], iteration=1)
        try:
            hits = (await ctx.in_time(self.retriever.search([question], names, top_k)))[0]
        except BudgetExceeded as exc:
            ctx.cut_short = exc.message
            yield ctx.note(f"search cut short: {exc.message}")
            hits = []
        yield SearchEvent(query=question, hits=len(hits), new=len(hits))
        answer = new_answer(question, "naive")
        async for ev in write_answer(ctx, question, hits, answer):
            yield ev
        answer.sub_queries = [question]
        answer.iterations = 1
        answer.chunks_retrieved = answer.chunks_kept = len(hits)
        answer.usage = ctx.usage
        answer.cut_short = ctx.cut_short
        answer.notes = ctx.notes
        answer.seconds = ctx.elapsed()
        yield DoneEvent(answer=answer)
