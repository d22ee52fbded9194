"""Baselines: one search and one answer call (``NaiveRAGAgent``), and retrieval only when no
LLM is configured."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from deepsearcher.agents.answer import fallback_answer, write_answer
from deepsearcher.agents.attribution import Attributor
from deepsearcher.agents.base import hit_to_source, new_answer, resolve_collections
from deepsearcher.config import Settings
from deepsearcher.errors import BudgetExceeded
from deepsearcher.llm import ChatModel
from deepsearcher.options import QueryOptions, or_configured
from deepsearcher.retrieval import Retriever
from deepsearcher.run_context import RunContext
from deepsearcher.types import Event, SearchEvent, SubQueriesEvent

NO_LLM_NOTE = (
    "no LLM configured: showing the best passages only; set OPENAI_API_KEY (or llm.api_key_env) "
    "or llm.base_url for a local server to get answers"
)


async def retrieval_only(
    settings: Settings,
    retriever: Retriever,
    question: str,
    collections: Sequence[str] | None,
    top_k: int,
    *,
    ctx: RunContext | None = None,
) -> AsyncIterator[Event]:
    """The best passages without an LLM: none is configured, or (``ctx.unreachable``) the
    configured one refused the connection earlier in this run."""
    ctx = ctx or RunContext.create(settings, None)
    names, _ = await resolve_collections(retriever, question, collections, ctx)
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
    answer.evidence = "unverified" if hits else "none"
    answer.sub_queries = [question]
    answer.chunks_retrieved = len(hits)
    # The run's usage, cut short, notes and reachability: one place (ctx.finish) fills them.
    yield ctx.finish(answer)


class NaiveRAGAgent:
    """Search the question once, answer from the top-k: what deep search is measured against.
    The deep loop's options (``max_iter``, ``rerank``, ``web``) have no effect here."""

    name = "naive"

    def __init__(self, settings: Settings, llm: ChatModel | None, retriever: Retriever) -> None:
        self.settings = settings
        self.llm = llm
        self.retriever = retriever
        self.attributor = Attributor(retriever.embedder, settings.query.attribution_threshold)

    async def run(self, question: str, options: QueryOptions) -> AsyncIterator[Event]:
        settings = self.settings
        top_k = or_configured(options.top_k, settings.query.top_k)
        collections = options.collections
        if self.llm is None:
            async for event in retrieval_only(
                settings, self.retriever, question, collections, top_k
            ):
                yield event
            return
        ctx = RunContext.create(settings, self.llm, options.timeout_s, options.budget_name)
        names, events = await resolve_collections(self.retriever, question, collections, ctx)
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
        async for ev in write_answer(ctx, question, hits, answer, attributor=self.attributor):
            yield ev
        answer.sub_queries = [question]
        answer.iterations = 1
        answer.chunks_retrieved = answer.chunks_kept = len(hits)
        yield ctx.finish(answer)
