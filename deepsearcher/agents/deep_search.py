"""The DeepSearch loop.

decompose -> (search all pending queries in parallel -> judge every new chunk concurrently ->
reflect for gap queries) x max_iter -> cited answer. Each step degrades visibly when the LLM
misbehaves: a failed decomposition searches the question itself, an unusable verdict drops the
chunk and counts it, a failed reflection ends the loop, and a spent budget answers with what
was found, marked as cut short.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from deepsearcher.agents import prompts
from deepsearcher.agents.base import (
    Retriever,
    RunContext,
    escape_document,
    messages_for,
    new_answer,
    passage_label,
    write_answer,
)
from deepsearcher.agents.parsing import parse_str_list, parse_yes_no, parse_yes_no_list
from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.types import (
    DoneEvent,
    Event,
    Hit,
    ReflectionEvent,
    SearchEvent,
    SubQueriesEvent,
    VerdictEvent,
)

if TYPE_CHECKING:
    from deepsearcher.searcher import DeepSearcher

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


class DeepSearchAgent:
    """Iterative decompose / search / judge / reflect loop with a cited answer."""

    name = "deep"

    def __init__(self, searcher: DeepSearcher) -> None:
        self.searcher = searcher
        self.settings = searcher.settings
        self.retriever = Retriever(searcher)

    async def run(
        self,
        question: str,
        *,
        collections: Sequence[str] | None = None,
        max_iter: int | None = None,
        top_k: int | None = None,
        rerank: str | None = None,
        web: bool | None = None,
        timeout_s: float | None = None,
    ) -> AsyncIterator[Event]:
        q = self.settings.query
        max_iter = max_iter or q.max_iter
        top_k = top_k or q.top_k
        rerank = rerank or q.rerank
        llm = self.searcher.llm
        if llm is None:
            from deepsearcher.agents.naive_rag import retrieval_only

            async for event in retrieval_only(self.searcher, question, collections, top_k):
                yield event
            return

        ctx = RunContext.create(self.settings, llm, timeout_s)
        answer = new_answer(question, "deep")
        # Routing and decomposition do not depend on each other: run them side by side, so a
        # store with several collections does not add a round trip before the first search.
        decompose = asyncio.ensure_future(self._decompose(ctx, question))
        try:
            names, route_events = await self.retriever.resolve_collections(
                question, collections, ctx
            )
            subs, problem = await decompose
        finally:
            decompose.cancel()  # a no-op once done; stops it when routing raised
        for ev in route_events:
            yield ev
        web_tool = self._web_tool(web)

        # 1. Decompose (already asked above).
        seen_queries: set[str] = set()
        if problem:
            yield ctx.note(f"decomposition failed ({problem}); searching the question as asked")
        pending = _dedupe(subs or [question], seen_queries)[: q.max_sub_queries]
        all_queries: list[str] = []
        kept: list[Hit] = []
        retrieved: dict[str, Hit] = {}  # every chunk judged (or being judged), by id
        fused: dict[str, float] = {}  # chunk id -> reciprocal rank fusion over all queries
        iteration = 0

        while pending and iteration < max_iter:
            iteration += 1
            all_queries.extend(pending)
            yield SubQueriesEvent(queries=list(pending), iteration=iteration)

            # 2. Search every pending query at once (one embedding batch, collections in parallel).
            results = await self.retriever.search(pending, names, top_k)
            if web_tool is not None:
                web_results, web_events = await web_tool.search_many(pending, ctx)
                for ev in web_events:
                    yield ev
                results = [r + w for r, w in zip(results, web_results, strict=True)]
            fresh: list[Hit] = []
            for query, hits in zip(pending, results, strict=True):
                new: list[Hit] = []
                for rank, h in enumerate(hits, start=1):
                    fused[h.id] = fused.get(h.id, 0.0) + 1.0 / (_RRF_K + rank)
                    if h.id not in retrieved:
                        retrieved[h.id] = h
                        new.append(h)
                fresh.extend(new)
                answer.chunks_retrieved += len(hits)
                yield SearchEvent(query=query, hits=len(hits), new=len(new))

            # 3. Judge each new chunk (concurrently, bounded by llm.max_concurrency).
            async for ev in self._judge(ctx, question, all_queries, fresh, rerank, kept, answer):
                yield ev
            if ctx.cut_short:
                break

            # 4. Reflect: which evidence is still missing?
            if iteration >= max_iter or q.max_gap_queries == 0:
                break
            try:
                gaps = await ctx.ask(
                    messages_for(
                        prompts.REFLECT.format(
                            max_gaps=q.max_gap_queries,
                            question=question,
                            queries=all_queries,
                            documents=_kept_digest(kept),
                        )
                    ),
                    partial(parse_str_list, max_items=q.max_gap_queries),
                )
            except BudgetExceeded as exc:
                ctx.cut_short = exc.message
                yield ctx.note(f"search cut short: {exc.message}")
                break
            except LLMError as exc:
                yield ctx.note(f"reflection failed ({exc.message}); answering with what was found")
                break
            pending = _dedupe(gaps, seen_queries)[: q.max_gap_queries]
            yield ReflectionEvent(gap_queries=list(pending), iteration=iteration)

        # 5. Answer from the kept chunks only.
        answer.iterations = iteration
        answer.sub_queries = all_queries
        answer.chunks_kept = len(kept)
        passages = _answer_context(kept, fused, q.max_context_chunks)
        unjudged = sorted(retrieved.values(), key=lambda h: h.score, reverse=True)
        async for ev in write_answer(ctx, question, passages, answer, fallback=unjudged):
            yield ev
        answer.usage = ctx.usage
        answer.cut_short = ctx.cut_short
        answer.notes = ctx.notes
        answer.seconds = ctx.elapsed()
        yield DoneEvent(answer=answer)

    async def _decompose(self, ctx: RunContext, question: str) -> tuple[list[str], str | None]:
        q = self.settings.query
        try:
            subs = await ctx.ask(
                messages_for(
                    prompts.DECOMPOSE.format(max_queries=q.max_sub_queries, question=question)
                ),
                partial(parse_str_list, max_items=q.max_sub_queries),
            )
        except (LLMError, BudgetExceeded) as exc:
            return [], exc.message
        return subs, None

    def _web_tool(self, web: bool | None) -> Any:
        enabled = self.settings.web_search.enabled if web is None else web
        if not enabled:
            return None
        from deepsearcher.tools import WebSearchTool

        return WebSearchTool(self.searcher, self.settings.web_search)

    async def _judge(
        self,
        ctx: RunContext,
        question: str,
        queries: list[str],
        hits: list[Hit],
        rerank: str,
        kept: list[Hit],
        answer: Any,
    ) -> AsyncIterator[Event]:
        if not hits:
            return
        if rerank == "none":
            kept.extend(hits)
            for h in hits:
                yield VerdictEvent(chunk_id=h.id, source=h.source, kept=True)
            return
        if rerank == "llm-batch":
            size = self.settings.query.rerank_batch_size
            groups = [hits[i : i + size] for i in range(0, len(hits), size)]
            tasks = [
                asyncio.ensure_future(self._judge_batch(ctx, question, queries, g)) for g in groups
            ]
        else:
            tasks = [
                asyncio.ensure_future(self._judge_one(ctx, question, queries, h)) for h in hits
            ]
        failures: list[str] = []
        try:
            for next_done in asyncio.as_completed(tasks, timeout=max(ctx.remaining_s(), 0.001)):
                verdicts = await next_done
                for hit, verdict, problem in verdicts:
                    if verdict:
                        kept.append(hit)
                    else:
                        answer.chunks_dropped += 1
                    if problem:
                        failures.append(problem)
                    yield VerdictEvent(chunk_id=hit.id, source=hit.source, kept=bool(verdict))
        except (asyncio.TimeoutError, TimeoutError):
            ctx.cut_short = f"time budget of {self.settings.query.timeout_s:.0f}s reached"
            yield ctx.note(f"search cut short: {ctx.cut_short}")
        finally:
            for t in tasks:
                t.cancel()
        budget = [p for p in failures if p.startswith("budget:")]
        other = [p for p in failures if not p.startswith("budget:")]
        if budget:
            ctx.cut_short = ctx.cut_short or budget[0].removeprefix("budget: ")
            yield ctx.note(
                f"search cut short: {ctx.cut_short} ({len(budget)} chunk(s) left unjudged)"
            )
        if other:
            yield ctx.note(f"{len(other)} chunk(s) dropped: verdict failed ({other[0]})")

    async def _judge_one(
        self, ctx: RunContext, question: str, queries: list[str], hit: Hit
    ) -> list[tuple[Hit, bool | None, str | None]]:
        prompt = prompts.JUDGE.format(
            question=question,
            queries=queries,
            source=passage_label(hit),
            text=escape_document(hit.text),
        )
        try:
            return [(hit, await ctx.ask(messages_for(prompt), parse_yes_no), None)]
        except BudgetExceeded as exc:
            return [(hit, None, f"budget: {exc.message}")]
        except LLMError as exc:
            return [(hit, None, exc.message)]

    async def _judge_batch(
        self, ctx: RunContext, question: str, queries: list[str], hits: list[Hit]
    ) -> list[tuple[Hit, bool | None, str | None]]:
        docs = "\n\n".join(
            prompts.JUDGE_BATCH_ITEM.format(
                n=i, source=passage_label(h), text=escape_document(h.text)
            )
            for i, h in enumerate(hits, start=1)
        )
        prompt = prompts.JUDGE_BATCH.format(
            question=question, queries=queries, documents=docs, count=len(hits)
        )
        try:
            verdicts = await ctx.ask(
                messages_for(prompt), partial(parse_yes_no_list, count=len(hits))
            )
        except BudgetExceeded as exc:
            return [(h, None, f"budget: {exc.message}") for h in hits]
        except LLMError as exc:
            return [(h, None, exc.message) for h in hits]
        return [
            (h, v, None if v is not None else "no verdict for this passage")
            for h, v in zip(hits, verdicts, strict=True)
        ]


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
    return "\n\n".join(
        f'<document n="{i}" source="{passage_label(h)}">\n{escape_document(h.text[:chars])}\n</document>'
        for i, h in shown
    )
