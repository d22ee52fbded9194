"""Pieces shared by the agents: the per-question run context (usage and budget), retrieval
across collections, collection routing, and the cited answer step."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from deepsearcher.agents import prompts
from deepsearcher.agents.parsing import complete_parsed, parse_str_list
from deepsearcher.config import Settings
from deepsearcher.errors import BudgetExceeded, CollectionNotFoundError, LLMError
from deepsearcher.types import (
    Answer,
    AnswerDeltaEvent,
    Event,
    Hit,
    NoteEvent,
    Source,
    Usage,
)

if TYPE_CHECKING:
    from deepsearcher.llm import ChatModel, Message
    from deepsearcher.searcher import DeepSearcher

logger = logging.getLogger(__name__)
T = TypeVar("T")

_CITATION = re.compile(r"\[(\d{1,3})\]")
_EXCERPT_CHARS = 600


@dataclass
class RunContext:
    """Usage and budget of one question. Every LLM call of the run goes through it."""

    settings: Settings
    llm: ChatModel | None
    max_llm_calls: int
    max_tokens: int
    deadline: float
    usage: Usage = field(default_factory=Usage)
    cut_short: str | None = None
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    in_flight: int = 0  # calls started but not yet counted in usage (concurrent verdicts)

    @classmethod
    def create(
        cls, settings: Settings, llm: ChatModel | None, timeout_s: float | None = None
    ) -> RunContext:
        q = settings.query
        return cls(
            settings=settings,
            llm=llm,
            max_llm_calls=q.max_llm_calls,
            max_tokens=q.max_tokens,
            deadline=time.monotonic() + (timeout_s or q.timeout_s),
        )

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def check_budget(self, reserve_calls: int = 1) -> None:
        """Raise BudgetExceeded when a search-phase call would eat the answer's reserve."""
        if self.usage.llm_calls + self.in_flight + reserve_calls >= self.max_llm_calls:
            raise BudgetExceeded(f"LLM call budget of {self.max_llm_calls} reached")
        if self.usage.total_tokens >= self.max_tokens:
            raise BudgetExceeded(f"token budget of {self.max_tokens} reached")
        if self.remaining_s() <= 0:
            raise BudgetExceeded(f"time budget of {self.settings.query.timeout_s:.0f}s reached")

    def note(self, message: str) -> NoteEvent:
        self.notes.append(message)
        logger.info("%s", message)
        return NoteEvent(message=message)

    async def ask(
        self, messages: list[Message], parse: Callable[[str], T], *, budgeted: bool = True
    ) -> T:
        """One parsed LLM call (retried once on unusable output)."""
        assert self.llm is not None
        if budgeted:
            self.check_budget()
        self.in_flight += 1
        try:
            return await complete_parsed(self.llm, messages, parse, usage=self.usage)
        finally:
            self.in_flight -= 1

    def elapsed(self) -> float:
        return time.perf_counter() - self.started


def messages_for(prompt: str) -> list[Message]:
    return [{"role": "system", "content": prompts.SYSTEM}, {"role": "user", "content": prompt}]


def escape_document(text: str) -> str:
    # A passage cannot close its own <document> tag and smuggle text out of the data block.
    return text.replace("</document", "</ document").replace("<document", "< document")


class Retriever:
    """Embeds queries in one batch and searches every collection in parallel."""

    def __init__(self, searcher: DeepSearcher) -> None:
        self.searcher = searcher
        self.settings = searcher.settings

    async def available_collections(self) -> list[Any]:
        store = await asyncio.to_thread(lambda: self.searcher.store)
        return await asyncio.to_thread(store.list_collections)

    async def resolve_collections(
        self, question: str, requested: Sequence[str] | None, ctx: RunContext
    ) -> tuple[list[str], list[Event]]:
        infos = await self.available_collections()
        names = [i.name for i in infos]
        events: list[Event] = []
        if requested:
            missing = [n for n in requested if n not in names]
            if missing:
                raise CollectionNotFoundError(
                    f"collection '{missing[0]}' does not exist",
                    "list them with `deepsearcher collections`, or load documents first",
                )
            return list(requested), events
        if not infos:
            raise CollectionNotFoundError(
                "the store has no collections yet", "load documents first: deepsearcher load PATH"
            )
        described = [i for i in infos if i.meta and i.meta.description]
        if len(infos) == 1 or len(described) < 2 or ctx.llm is None:
            return names, events
        # One routing call per question (not per sub-query): cheap, and stable across the loop.
        listing = "\n".join(
            f"- {i.name}: {(i.meta.description if i.meta else '') or '(no description)'}"
            for i in infos
        )
        try:
            picked = await ctx.ask(
                messages_for(prompts.ROUTE.format(collections=listing, question=question)),
                parse_str_list,
            )
        except (LLMError, BudgetExceeded) as exc:
            events.append(ctx.note(f"collection routing failed ({exc.message}); searching all"))
            return names, events
        chosen = [n for n in picked if n in names]
        if not chosen:
            events.append(ctx.note("collection routing picked none; searching all"))
            return names, events
        events.append(ctx.note(f"searching collections: {', '.join(chosen)}"))
        return chosen, events

    async def search(
        self, queries: Sequence[str], collections: Sequence[str], top_k: int
    ) -> list[list[Hit]]:
        """Top hits per query, merged across collections by score."""
        if not queries:
            return []
        embedder = await asyncio.to_thread(lambda: self.searcher.embedder)
        vectors = await asyncio.to_thread(embedder.embed, list(queries))
        store = self.searcher.store
        hybrid = self.settings.vector_store.hybrid
        per_collection = await asyncio.gather(
            *(
                asyncio.to_thread(
                    store.search, name, vectors, top_k, texts=list(queries), hybrid=hybrid
                )
                for name in collections
            )
        )
        merged: list[list[Hit]] = []
        for qi in range(len(queries)):
            hits = [h for result in per_collection for h in result[qi]]
            hits.sort(key=lambda h: h.score, reverse=True)
            merged.append(hits[:top_k] if len(collections) > 1 else hits)
        return merged


def hit_to_source(n: int, hit: Hit) -> Source:
    return Source(
        n=n,
        source=hit.source,
        page=hit.page,
        start=hit.start,
        end=hit.end,
        text=hit.text,
        collection=hit.collection,
        kind=hit.kind,
        title=hit.title,
        page_end=hit.page_end,
        record_id=hit.record_id,
    )


def _passages(hits: Sequence[Hit]) -> str:
    return "\n\n".join(
        prompts.ANSWER_PASSAGE.format(n=i, source=passage_label(h), text=escape_document(h.text))
        for i, h in enumerate(hits, start=1)
    )


def passage_label(hit: Hit) -> str:
    """A passage's source in prompts: file and page range, or ``(web) URL``."""
    return f"(web) {hit.label}" if hit.kind == "web" else hit.label


def cited_sources(answer_text: str, passages: Sequence[Hit]) -> tuple[str, list[Source], int]:
    """Sources the answer cites (all passages if it cites none). Citations pointing at no
    passage are removed from the text and counted, so every [n] left has a source."""
    cited: list[int] = []
    invalid = 0

    def keep(m: re.Match[str]) -> str:
        nonlocal invalid
        n = int(m.group(1))
        if 1 <= n <= len(passages):
            if n not in cited:
                cited.append(n)
            return m.group(0)
        invalid += 1
        return ""

    text = _CITATION.sub(keep, answer_text)
    numbers = sorted(cited) or list(range(1, len(passages) + 1))
    return text, [hit_to_source(n, passages[n - 1]) for n in numbers], invalid


async def write_answer(
    ctx: RunContext,
    question: str,
    passages: Sequence[Hit],
    answer: Answer,
    fallback: Sequence[Hit] = (),
) -> AsyncIterator[Event]:
    """Stream the cited answer; fill ``answer.answer`` and ``answer.sources``.

    If the LLM fails here, the answer lists the evidence instead: the kept passages, or when
    none were kept (verdicts failed too) the best ``fallback`` hits, unjudged."""
    assert ctx.llm is not None
    cut = prompts.CUT_SHORT_NOTE.format(reason=ctx.cut_short) if ctx.cut_short else ""
    prompt = prompts.ANSWER.format(
        question=question,
        documents=_passages(passages) if passages else "(no passages were found)",
        cut_short=cut,
    )
    parts: list[str] = []
    try:
        async for piece in ctx.llm.stream(
            messages_for(prompt), max_tokens=ctx.settings.llm.max_tokens
        ):
            if piece.text:
                parts.append(piece.text)
                yield AnswerDeltaEvent(text=piece.text)
            if piece.usage is not None:
                ctx.usage.add(piece.usage)
    except LLMError as exc:
        # Visible degradation: say the LLM failed and hand over the evidence found so far.
        yield ctx.note(f"answer step failed: {exc.message}")
        evidence = list(passages) or list(fallback)[:5]
        answer.answer = fallback_answer(
            evidence, reason=f"the LLM failed while answering ({exc.message})"
        )
        answer.sources = [hit_to_source(i, h) for i, h in enumerate(evidence, start=1)]
        return
    from deepsearcher.agents.parsing import clean_output

    text, sources, invalid = cited_sources(clean_output("".join(parts)), passages)
    if invalid:
        yield ctx.note(f"removed {invalid} citation(s) that pointed at no passage")
    answer.answer = text.strip()
    answer.sources = sources if passages else []


def fallback_answer(passages: Sequence[Hit], *, reason: str) -> str:
    if not passages:
        return f"No answer: {reason}, and no passages were found."
    lines = [f"No generated answer: {reason}. The most relevant passages:"]
    for i, h in enumerate(passages[:5], start=1):
        excerpt = " ".join(h.text.split())[:200]
        lines.append(f"[{i}] {excerpt}")
    return "\n".join(lines)


def excerpt(text: str, limit: int = _EXCERPT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def new_answer(question: str, mode: str) -> Answer:
    return Answer(question=question, answer="", mode=mode)  # type: ignore[arg-type]
