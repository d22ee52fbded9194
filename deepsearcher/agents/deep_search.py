"""The DeepSearch loop: hops, not paraphrases.

plan -> rounds of (search the round's lookups in parallel -> judge the round's passages ->
extract each lookup's short answer -> reflect on a lookup that found none) -> a cited answer
written from the lookups' answers and their passages.

The plan tells parallel parts ("X, and Y") from a chain ("the office of the person who
approved X"): a dependent lookup is searched once the lookup it depends on has an answer, with
that answer put in ("Who approved X?" -> "Johan Lindqvist" -> "In which office is Johan
Lindqvist based?"). The question itself is searched in the first round, so a question one
retrieval answers costs about what one-shot RAG costs: the plan, one verdict call, one
extraction and the answer, all but the plan over the same passages, which the server reads
once (every prompt over passages starts with them). Reflection runs only when a lookup found
nothing, and asks for that lookup, not for another wording of the question.

The judge's verdicts never leave the answer with less than retrieval found: below
``query.min_evidence`` kept passages the answer also gets the best-ranked rejected ones,
marked unverified; and when a round's verdicts tell nothing apart (all kept or all dropped)
later rounds rank by retrieval instead of paying for more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence

from deepsearcher.agents.answer import passages_block, write_answer
from deepsearcher.agents.attribution import Attributor
from deepsearcher.agents.base import (
    new_answer,
    resolve_collections,
)
from deepsearcher.agents.hops import Extracted, Fact, extract, reflect, resolve
from deepsearcher.agents.judge import (
    Verdict,
    informative,
    judge_batch,
    judge_one,
    verdict_notes,
)
from deepsearcher.agents.naive_rag import retrieval_only
from deepsearcher.agents.plan import Plan, plan_question
from deepsearcher.agents.records import Rekey, field_value, rekeyed
from deepsearcher.agents.rounds import SearchState, Work, next_round
from deepsearcher.config import Settings
from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.llm import ChatModel
from deepsearcher.options import QueryOptions, or_configured
from deepsearcher.retrieval import Retriever
from deepsearcher.run_context import RunContext
from deepsearcher.tools.web import WebSearchTool
from deepsearcher.types import (
    EVIDENCE_NOTE,
    Event,
    Hit,
    Hop,
    HopEvent,
    PlanEvent,
    ReflectionEvent,
    SearchEvent,
    SubQueriesEvent,
    VerdictEvent,
)

logger = logging.getLogger(__name__)

_RRF_K = 60  # the usual reciprocal-rank-fusion constant: damps the weight of the top ranks


class DeepSearchAgent:
    """Plans a question into lookups, searches and answers them in rounds, writes the cited
    answer. Without an LLM (``llm`` None) it shows the best passages; without ``web`` it
    searches the private collections only."""

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
        self.attributor = Attributor(retriever.embedder, settings.query.attribution_threshold)

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
        names, plan, events = await self._route_and_plan(ctx, question, options.collections)
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
        hops = [
            Hop(i, step.question, depends_on=list(step.depends_on))
            for i, step in enumerate(plan.steps, start=1)
        ]
        s = SearchState(question, new_answer(question, "deep"), names, top_k, rerank, hops)
        yield PlanEvent(
            steps=[h.question for h in hops],
            depends_on=[h.depends_on for h in hops],
            dropped=list(plan.dropped),
        )
        max_iter = or_configured(options.max_iter, q.max_iter)
        # A cut-short run still searches once (no LLM call): the answer gets the passages.
        while (
            not (s.stopped or ctx.unreachable)
            and (s.iteration == 0 or not ctx.cut_short)
            and (work := next_round(s, max_iter, self.settings.query.max_sub_queries)) is not None
        ):
            async for ev in self._round(ctx, s, work, max_iter):
                yield ev
        async for ev in self._answer(ctx, s):
            yield ev

    # -- 1. plan (side by side with collection routing) --------------------------------------

    async def _route_and_plan(
        self, ctx: RunContext, question: str, requested: Sequence[str] | None
    ) -> tuple[list[str], Plan, list[Event]]:
        """The collections to search, the plan, and the events to show. Routing and planning
        do not depend on each other: run side by side, a store with several collections adds
        no round trip before the first search."""
        planning = asyncio.ensure_future(
            plan_question(ctx, question, self.settings.query.max_sub_queries)
        )
        try:
            names, events = await resolve_collections(self.retriever, question, requested, ctx)
            plan, problem = await planning
        finally:
            planning.cancel()  # a no-op once done; stops it when routing raised
        if isinstance(problem, BudgetExceeded):
            ctx.cut_short = ctx.cut_short or problem.message
        if problem and ctx.unreachable is None:
            events.append(
                ctx.note(f"planning failed ({problem.message}); searching the question as asked")
            )
        return names, plan, events

    # -- 3. one round -------------------------------------------------------------------------

    async def _round(
        self, ctx: RunContext, s: SearchState, work: Work, max_iter: int
    ) -> AsyncIterator[Event]:
        if work.queries:
            async for ev in self._search(ctx, s, work.queries):
                yield ev
            if s.stopped:
                return
            async for ev in self._judge(ctx, s, work.queries):
                yield ev
        useful: list[frozenset[int]] = []  # the lookups' YES verdicts (query.rerank: lookup)
        for hop in work.hops:
            if s.stopped or ctx.cut_short or ctx.unreachable:
                hop.status = "skipped"
                continue
            async for ev in self._extract(ctx, s, hop, max_iter, useful):
                yield ev
        if useful:
            async for ev in self._lookup_verdicts(ctx, s, useful):
                yield ev

    async def _search(
        self, ctx: RunContext, s: SearchState, queries: list[str]
    ) -> AsyncIterator[Event]:
        """One embedding batch, the collections in parallel, the web alongside when on. Sets
        ``s.docs`` to the round's best passages, fused over its queries."""
        s.iteration += 1
        s.queries.extend(queries)
        yield SubQueriesEvent(queries=list(queries), iteration=s.iteration)
        try:
            results = await ctx.in_time(self.retriever.search(queries, s.collections, s.top_k))
        except BudgetExceeded as exc:
            ctx.cut_short = exc.message
            s.stopped = True
            yield ctx.note(f"search cut short: {exc.message}")
            return
        if self.web is not None:
            web_results, web_events = await self.web.search_many(queries, ctx)
            for ev in web_events:
                yield ev
            results = [r + w for r, w in zip(results, web_results, strict=True)]
        round_score: dict[str, float] = {}
        for query, hits in zip(queries, results, strict=True):
            new = 0
            for rank, h in enumerate(hits, start=1):
                s.fused[h.id] = s.fused.get(h.id, 0.0) + 1.0 / (_RRF_K + rank)
                round_score[h.id] = round_score.get(h.id, 0.0) + 1.0 / (_RRF_K + rank)
                if h.id not in s.retrieved:
                    s.retrieved[h.id] = h
                    new += 1
            s.answer.chunks_retrieved += len(hits)
            yield SearchEvent(query=query, hits=len(hits), new=new)
        ranked = sorted(round_score, key=lambda i: -round_score[i])
        s.docs = [s.retrieved[i] for i in ranked[: s.top_k]]

    # -- 4. judge the round's passages (one batched call, or one call each) -----------------

    async def _judge(
        self, ctx: RunContext, s: SearchState, queries: list[str]
    ) -> AsyncIterator[Event]:
        fresh = [(n, h) for n, h in enumerate(s.docs, start=1) if h.id not in s.verdicts]
        if not fresh or s.rerank in ("none", "lookup") or s.judge_off:
            return
        documents = passages_block(s.docs)
        if s.rerank == "llm-batch":
            size = self.settings.query.rerank_batch_size
            batches = [s.docs[i : i + size] for i in range(0, len(s.docs), size)]
            tasks = [
                asyncio.ensure_future(
                    judge_batch(ctx, documents, s.question, queries, b, first=1 + i * size)
                )
                for i, b in enumerate(batches)
                if any(h.id not in s.verdicts for h in b)
            ]
        else:
            tasks = [
                asyncio.ensure_future(judge_one(ctx, documents, s.question, queries[0], n, h))
                for n, h in fresh
            ]
        got: list[Verdict] = []
        try:
            timeout = max(ctx.search_remaining_s(), 0.001)
            for next_done in asyncio.as_completed(tasks, timeout=timeout):
                got += await next_done
        except (asyncio.TimeoutError, TimeoutError):
            ctx.cut_short = ctx.time_reason()
            yield ctx.note(f"search cut short: {ctx.cut_short}")
        finally:
            for t in tasks:
                t.cancel()
        async for ev in self._record(ctx, s, got):
            yield ev

    async def _record(
        self, ctx: RunContext, s: SearchState, got: list[Verdict]
    ) -> AsyncIterator[Event]:
        """The verdicts on passages not judged before: counted, shown, and checked for
        whether they tell anything apart."""
        new = [v for v in got if v.hit.id not in s.verdicts]
        for v in new:
            if v.relevant is None:
                continue
            s.verdicts[v.hit.id] = v.relevant
            s.answer.chunks_kept += int(v.relevant)
            s.answer.chunks_dropped += int(not v.relevant)
            yield VerdictEvent(
                chunk_id=v.hit.id, source=v.hit.source, kept=v.relevant, margin=v.margin
            )
        for ev in self._verdict_notes(ctx, s, new):
            yield ev

    async def _lookup_verdicts(
        self, ctx: RunContext, s: SearchState, useful: list[frozenset[int]]
    ) -> AsyncIterator[Event]:
        """The round's verdicts from its lookups' calls: a passage one of them named useful
        is YES, the others NO."""
        named = frozenset().union(*useful)
        got = [Verdict(h, n in named) for n, h in enumerate(s.docs, start=1)]
        async for ev in self._record(ctx, s, got):
            yield ev

    def _verdict_notes(self, ctx: RunContext, s: SearchState, new: list[Verdict]) -> list[Event]:
        events: list[Event] = list(verdict_notes(ctx, new))
        judged = [v for v in new if v.relevant is not None]
        if judged and not informative(judged):
            # Verdicts that tell nothing apart neither verify nor drop anything: the passages
            # count as unjudged, ranked by retrieval, and no more verdicts are paid for.
            s.judge_off = True
            for v in judged:
                s.verdicts.pop(v.hit.id, None)
            said = "kept" if judged[0].relevant else "dropped"
            events.append(
                ctx.note(
                    f"{EVIDENCE_NOTE}the relevance judge {said} all {len(judged)} passage(s): its "
                    "verdicts tell none apart, so passages are ranked by retrieval, unverified, "
                    "and no further verdicts are asked"
                )
            )
        return events

    # -- 5. a lookup's short answer, or reflection on what is missing -------------------------

    async def _extract(
        self, ctx: RunContext, s: SearchState, hop: Hop, max_iter: int, useful: list[frozenset[int]]
    ) -> AsyncIterator[Event]:
        hop.query = hop.query or resolve(hop.question, s.answers())
        # Passages judged away before this lookup is read do not stop it when its own call is
        # the judge (query.rerank "lookup": earlier verdicts came from another lookup's call),
        # nor when it is searched again with reflection's queries (written for it).
        fresh = s.rerank == "lookup" or hop.index in s.tried
        docs = s.docs if fresh else s.usable(s.docs)
        found = Extracted("", None)
        if docs:
            try:
                judging = s.rerank == "lookup" and not s.judge_off
                question = s.question if judging else None
                found = await extract(
                    ctx,
                    passages_block(s.docs),
                    s.docs,
                    hop.query,
                    question,
                    s.question,
                    attributor=self.attributor,
                )
                if judging and found.useful is not None:
                    # The passage the answer was found in is useful whether or not the model
                    # listed it (small models often list others, or none).
                    grounded = [n for n, h in enumerate(s.docs, 1) if h is found.hit]
                    useful.append(found.useful | frozenset(grounded))
            except BudgetExceeded as exc:
                ctx.cut_short = ctx.cut_short or exc.message
                yield ctx.note(f"search cut short: {exc.message}")
            except LLMError as exc:
                if ctx.unreachable is None:
                    yield ctx.note(f"lookup {hop.index} failed ({exc.message})")
        s.tried.add(hop.index)
        rekey = None if found.hit is None else rekeyed(hop.query, found.answer, found.hit, s.docs)
        if rekey is not None:
            found, events = await self._read_field(ctx, s, hop, rekey, found)
            for ev in events:
                yield ev
        if found.hit is not None:
            hop.answer, hop.status = found.answer, "answered"
            hop.source, hop.page = found.hit.source, found.hit.page
            s.hits_of[hop.index] = found.hit
        yield HopEvent(
            index=hop.index,
            question=hop.question,
            query=hop.query,
            answer=hop.answer,
            source=hop.source,
            page=hop.page,
            status=hop.status,
        )
        if found.hit is None and s.iteration < max_iter and not ctx.cut_short:
            async for ev in self._reflect(ctx, s, hop):
                yield ev

    async def _read_field(
        self, ctx: RunContext, s: SearchState, hop: Hop, rekey: Rekey, found: Extracted
    ) -> tuple[Extracted, list[Event]]:
        """The lookup's answer read under ``rekey.label`` (the key the lookup's record gives):
        from a passage at hand, else one search for the label (no LLM call). Without one, the
        answer read under the other key is not taken: it answers for another record."""
        label, events = rekey.label, list[Event]()
        got = field_value(label, list(s.retrieved.values()))
        if got is None:
            hits: list[Hit] = []
            try:
                (hits,) = await ctx.in_time(self.retriever.search([label], s.collections, s.top_k))
            except BudgetExceeded as exc:
                ctx.cut_short = ctx.cut_short or exc.message
                events.append(ctx.note(f"search cut short: {exc.message}"))
            new = [h for h in hits if h.id not in s.retrieved]
            s.retrieved.update((h.id, h) for h in new)
            s.answer.chunks_retrieved += len(hits)
            events.append(SearchEvent(query=label, hits=len(hits), new=len(new)))
            got = field_value(label, hits)
        if got is None:
            events.append(
                ctx.note(
                    f"lookup {hop.index}: {found.answer!r} was read under another key than the "
                    f"one its record gives, and no passage states {label}; the lookup stays open"
                )
            )
            return Extracted("", None, found.useful), events
        hit, value = got
        s.keyed[hop.index] = rekey
        events.append(
            ctx.note(f"lookup {hop.index}: read under the key its record gives: {label}: {value}")
        )
        return Extracted(value, hit, found.useful), events

    async def _reflect(self, ctx: RunContext, s: SearchState, hop: Hop) -> AsyncIterator[Event]:
        """Queries for the lookup that found nothing, from the passages at hand."""
        max_gaps = self.settings.query.max_gap_queries
        if max_gaps == 0 or ctx.unreachable is not None:
            return
        try:
            gaps = await reflect(
                ctx, passages_block(s.docs), hop.query, s.question, s.queries, max_gaps
            )
        except BudgetExceeded as exc:
            ctx.cut_short = ctx.cut_short or exc.message
            yield ctx.note(f"search cut short: {exc.message}")
            return
        except LLMError as exc:
            if ctx.unreachable is None:
                yield ctx.note(f"reflection failed ({exc.message}); lookup {hop.index} stays open")
            return
        if gaps:
            s.gaps[hop.index] = gaps
        yield ReflectionEvent(gap_queries=gaps, iteration=s.iteration)

    # -- 6. the answer, from the lookups' answers and their passages ------------------------

    async def _answer(self, ctx: RunContext, s: SearchState) -> AsyncIterator[Event]:
        answer = s.answer
        answer.iterations = s.iteration
        answer.sub_queries = s.queries
        for hop in s.hops:
            if hop.status != "answered" and hop.index not in s.searched:
                hop.status = "skipped"
        q = self.settings.query
        passages = s.context(q.max_context_chunks)
        kept = [h for h in passages if s.verdicts.get(h.id)]
        floor = min(q.min_evidence, q.max_context_chunks)
        if s.rerank != "none" and not s.judge_off and s.verdicts and len(kept) < floor:
            extra = s.rejected(passages)[: floor - len(passages)]
            if extra:
                passages = passages + extra
                yield ctx.note(
                    f"{EVIDENCE_NOTE}the relevance judge kept {len(kept)} of "
                    f"{len(s.verdicts)} judged passage(s), fewer than query.min_evidence "
                    f"({q.min_evidence}); the answer also uses the {len(extra)} best-ranked "
                    "one(s) it rejected, unverified"
                )
        answered = [h for h in s.hops if h.status == "answered" and h.index in s.hits_of]
        facts = {h.index: Fact(h.query, h.answer, s.hits_of[h.index]) for h in answered}
        # A value read under the key its record gives is stated as the two fields it rests on
        # ("SR-10431 priority: P2", "sla.priorities.P2.response_minutes: 120"), each as its
        # passage words it: the lookup's question would restate what was asked.
        bridges = {
            i: Fact(f"{k.ident} {k.field}", k.key, k.hit) for i, k in s.keyed.items() if i in facts
        }
        for i in bridges:
            facts[i] = Fact(s.keyed[i].label, facts[i].answer, facts[i].hit)
        # What the question asks of a chain: the answers of its last lookups; of a question
        # that is one lookup, that lookup's answer (the local model found "310" latches on
        # hand, then answered about the latches' revision). Parallel parts are not required:
        # a part's lookup may be answered from the wrong row, and the answer can say so.
        needed = {d for h in s.hops for d in h.depends_on}
        required = [facts[h.index] for h in answered if h.depends_on and h.index not in needed]
        if len(s.hops) == 1 and answered:
            required = [facts[answered[0].index]]
        # The key is part of the finding: "120" alone would not say whose priority it is.
        required = [b for i, b in bridges.items() if facts[i] in required] + required
        verified = {i for i, kept_ in s.verdicts.items() if kept_}
        unjudged = sorted(s.retrieved.values(), key=lambda h: -s.fused.get(h.id, 0.0))
        async for ev in write_answer(
            ctx,
            s.question,
            passages,
            answer,
            fallback=unjudged,
            verified=verified,
            facts=[*bridges.values(), *facts.values()],
            required=required,
            attributor=self.attributor,
        ):
            yield ev
        ids = [h.id for h in passages]
        for hop in s.hops:
            hit = s.hits_of.get(hop.index)
            if hit is not None and hit.id in ids and answer.mode == "deep":
                hop.n = ids.index(hit.id) + 1
        answer.hops = s.hops
        yield ctx.finish(answer)
