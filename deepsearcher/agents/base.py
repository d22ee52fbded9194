"""Pieces shared by the agents: the per-question run context (usage and budget), retrieval
across collections, collection routing, and the cited answer step."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from deepsearcher.agents import prompts
from deepsearcher.agents.parsing import complete_parsed, parse_str_list
from deepsearcher.config import Settings
from deepsearcher.errors import (
    BudgetExceeded,
    CollectionNotFoundError,
    IncompatibleCollectionError,
    LLMError,
)
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
    from deepsearcher.llm import ChatModel, Message, StreamPiece
    from deepsearcher.searcher import DeepSearcher

logger = logging.getLogger(__name__)
T = TypeVar("T")

_CITATION = re.compile(r"\[(\d{1,3})\]")
_EXCERPT_CHARS = 600


LLM_UNREACHABLE = "LLM unreachable"  # starts the note of a run that lost its LLM
ANSWER_RESERVE_SHARE = 0.25  # of the time budget, kept for the answer (at most llm.timeout_s)


@dataclass
class RunContext:
    """Usage and budget of one question. Every LLM call of the run goes through it.

    Time: ``deadline`` ends the whole run. No LLM call outlives it: each gets at most the time
    left (``llm.timeout_s`` still bounds each attempt inside the client). The search phase
    stops ``answer_reserve_s`` earlier, so the answer can still be written from what was found.
    """

    settings: Settings
    llm: ChatModel | None
    max_llm_calls: int
    max_tokens: int
    deadline: float
    budget_s: float = 0.0
    budget_name: str = "query.timeout_s"
    answer_reserve_s: float = 0.0
    usage: Usage = field(default_factory=Usage)
    cut_short: str | None = None
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    in_flight: int = 0  # calls started but not yet counted in usage (concurrent verdicts)
    unreachable: LLMError | None = None  # set on the first refused connection: no more calls

    @classmethod
    def create(
        cls,
        settings: Settings,
        llm: ChatModel | None,
        timeout_s: float | None = None,
        budget_name: str | None = None,
    ) -> RunContext:
        q = settings.query
        budget = timeout_s or q.timeout_s
        if budget_name is None:
            budget_name = "query.timeout_s" if timeout_s is None else "timeout_s option"
        return cls(
            settings=settings,
            llm=llm,
            max_llm_calls=q.max_llm_calls,
            max_tokens=q.max_tokens,
            deadline=time.monotonic() + budget,
            budget_s=budget,
            budget_name=budget_name,
            answer_reserve_s=min(settings.llm.timeout_s, budget * ANSWER_RESERVE_SHARE),
        )

    def remaining_s(self) -> float:
        """Seconds left for the whole run (the answer step gets all of it)."""
        return self.deadline - time.monotonic()

    def search_remaining_s(self) -> float:
        """Seconds left for the search phase, which leaves the answer its reserve."""
        return self.remaining_s() - self.answer_reserve_s

    def time_reason(self) -> str:
        return f"time budget of {self.budget_s:g}s reached ({self.budget_name})"

    def check_budget(self, reserve_calls: int = 1) -> None:
        """Raise BudgetExceeded when a search-phase call would eat the answer's reserve."""
        if self.usage.llm_calls + self.in_flight + reserve_calls >= self.max_llm_calls:
            raise BudgetExceeded(f"LLM call budget of {self.max_llm_calls} reached")
        if self.usage.total_tokens >= self.max_tokens:
            raise BudgetExceeded(f"token budget of {self.max_tokens} reached")
        if self.search_remaining_s() <= 0:
            raise BudgetExceeded(self.time_reason())

    def note(self, message: str) -> NoteEvent:
        self.notes.append(message)
        logger.info("%s", message)
        return NoteEvent(message=message)

    def unreachable_note(self) -> NoteEvent:
        assert self.unreachable is not None
        return self.note(
            f"{LLM_UNREACHABLE}: {self.unreachable.message}; showing the best passages only"
        )

    async def ask(
        self, messages: list[Message], parse: Callable[[str], T], *, budgeted: bool = True
    ) -> T:
        """One parsed LLM call (retried once on unusable output), within the time left."""
        from deepsearcher.llm import LLMUnreachableError

        assert self.llm is not None
        if self.unreachable is not None:
            raise self.unreachable
        if budgeted:
            self.check_budget()
        left = self.search_remaining_s() if budgeted else self.remaining_s()
        self.in_flight += 1
        try:
            return await asyncio.wait_for(
                complete_parsed(self.llm, messages, parse, usage=self.usage), max(left, 0.001)
            )
        except asyncio.TimeoutError:
            raise BudgetExceeded(self.time_reason()) from None
        except LLMUnreachableError as exc:
            self.unreachable = self.unreachable or exc
            raise
        finally:
            self.in_flight -= 1

    async def in_time(self, work: Awaitable[T]) -> T:
        """``work`` (a retrieval) within the run's time left, else BudgetExceeded. Work in a
        thread is abandoned, not stopped: the run returns, the thread finishes on its own."""
        try:
            return await asyncio.wait_for(work, max(self.remaining_s(), 0.001))
        except asyncio.TimeoutError:
            raise BudgetExceeded(self.time_reason()) from None

    def elapsed(self) -> float:
        return time.perf_counter() - self.started


def messages_for(prompt: str) -> list[Message]:
    return [{"role": "system", "content": prompts.SYSTEM}, {"role": "user", "content": prompt}]


# Any spelling a model might read as our tag: </DOCUMENT>, < /Document >, <document\t...
_DOCUMENT_TAG = re.compile(r"<(?=\s*/?\s*document)", re.IGNORECASE)


def escape_document(text: str) -> str:
    """Quoted text that cannot open or close a ``<document>`` tag, in any letter case."""
    return _DOCUMENT_TAG.sub("&lt;", text)


def escape_attribute(value: str) -> str:
    """A value that cannot leave its ``"..."`` attribute, its tag or its line. ``&`` is left
    alone: it cannot end anything, and URLs with query strings stay readable."""
    flat = " ".join(value.split())
    return flat.replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def render_document(hit: Hit, n: int | None = None, *, text: str | None = None) -> str:
    """One passage as a ``<document>`` block; every field that comes from a file or a web
    result (path, heading, title, URL, text) is escaped."""
    attributes = [f'n="{n}"'] if n is not None else []
    attributes.append(f'source="{escape_attribute(passage_label(hit))}"')
    if hit.heading:
        attributes.append(f'heading="{escape_attribute(hit.heading)}"')
    if hit.kind == "web" and hit.title and hit.title != hit.source:
        attributes.append(f'title="{escape_attribute(hit.title)}"')
    return prompts.DOCUMENT.format(
        attributes=" ".join(attributes), text=escape_document(hit.text if text is None else text)
    )


def passage_label(hit: Hit) -> str:
    """A passage's source in prompts: file and page range, or ``(web) URL``."""
    return f"(web) {hit.label}" if hit.kind == "web" else hit.label


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
        names, events = await self._pick_collections(question, requested, ctx, infos)
        return self._embedded_alike(names, infos, ctx, events, explicit=bool(requested))

    def _embedded_alike(
        self,
        names: list[str],
        infos: Sequence[Any],
        ctx: RunContext,
        events: list[Event],
        *,
        explicit: bool,
    ) -> tuple[list[str], list[Event]]:
        """Only collections embedded with this searcher's model: a query vector from another
        model lands in an unrelated space and returns confident nonsense, never an error."""
        model = self.settings.embedding.model
        by_name = {i.name: i for i in infos}
        foreign = {
            n: by_name[n].meta.embedding_model
            for n in names
            if n in by_name and by_name[n].meta and by_name[n].meta.embedding_model != model
        }
        if not foreign:
            return names, events
        usable = [n for n in names if n not in foreign]
        name, other = next(iter(foreign.items()))
        if explicit or not usable:
            raise IncompatibleCollectionError(
                f"collection '{name}' was embedded with {other}; this query embeds with {model}",
                f"query it with the embedder it was built with (embedding.provider/model), or "
                f"reload it with --rebuild to re-embed it with {model}",
            )
        skipped = ", ".join(f"{n} ({m})" for n, m in foreign.items())
        events.append(ctx.note(f"skipped collections embedded with another model: {skipped}"))
        return usable, events

    async def _pick_collections(
        self,
        question: str,
        requested: Sequence[str] | None,
        ctx: RunContext,
        infos: Sequence[Any],
    ) -> tuple[list[str], list[Event]]:
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
        if len(infos) == 1 or len(described) < 2 or ctx.llm is None or ctx.unreachable:
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
            if ctx.unreachable is None:  # an unreachable LLM gets one note, from the agent
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
        vectors = await asyncio.to_thread(embedder.embed_query, list(queries))
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
    return "\n\n".join(render_document(h, i) for i, h in enumerate(hits, start=1))


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

    The stream gets the time left in the run; reasoning blocks are dropped from the deltas. If
    the LLM fails here, the answer lists the evidence instead: the kept passages, or when none
    were kept (verdicts failed too) the best ``fallback`` hits, unjudged. Out of time, a
    partial answer is kept, marked cut short."""
    assert ctx.llm is not None
    evidence = list(passages) or list(fallback)[:5]
    if ctx.unreachable is not None:
        yield ctx.unreachable_note()
        _answer_from_evidence(answer, evidence, "the LLM could not be reached", retrieval=True)
        return
    if ctx.remaining_s() <= 0:
        ctx.cut_short = ctx.cut_short or ctx.time_reason()
        yield ctx.note(f"no time left to write the answer: {ctx.time_reason()}")
        _answer_from_evidence(answer, evidence, ctx.time_reason())
        return
    cut = prompts.CUT_SHORT_NOTE.format(reason=ctx.cut_short) if ctx.cut_short else ""
    prompt = prompts.ANSWER.format(
        question=escape_document(question),
        documents=_passages(passages) if passages else "(no passages were found)",
        cut_short=cut,
    )
    from deepsearcher.agents.parsing import ReasoningFilter, clean_output
    from deepsearcher.llm import LLMUnreachableError

    parts: list[str] = []
    visible = ReasoningFilter()
    stream = _StreamInTask(ctx.llm, messages_for(prompt), ctx.settings.llm.max_tokens)
    try:
        while (piece := await stream.next(ctx.remaining_s())) is not None:
            if piece.text:
                parts.append(piece.text)
                if shown := visible.feed(piece.text):
                    yield AnswerDeltaEvent(text=shown)
            if piece.usage is not None:
                ctx.usage.add(piece.usage)
        if tail := visible.flush():
            yield AnswerDeltaEvent(text=tail)
    except asyncio.TimeoutError:
        ctx.cut_short = ctx.cut_short or ctx.time_reason()
        yield ctx.note(f"answer cut short: {ctx.time_reason()}")
        if not clean_output("".join(parts)):
            _answer_from_evidence(answer, evidence, ctx.time_reason())
            return
    except LLMError as exc:
        if isinstance(exc, LLMUnreachableError):
            ctx.unreachable = exc
            yield ctx.unreachable_note()
            _answer_from_evidence(answer, evidence, "the LLM could not be reached", retrieval=True)
            return
        # Visible degradation: say the LLM failed and hand over the evidence found so far.
        yield ctx.note(f"answer step failed: {exc.message}")
        _answer_from_evidence(answer, evidence, f"the LLM failed while answering ({exc.message})")
        return
    finally:
        stream.close()

    text, sources, invalid = cited_sources(clean_output("".join(parts)), passages)
    if invalid:
        yield ctx.note(f"removed {invalid} citation(s) that pointed at no passage")
    answer.answer = text.strip()
    answer.sources = sources if passages else []


def _answer_from_evidence(
    answer: Answer, evidence: Sequence[Hit], reason: str, *, retrieval: bool = False
) -> None:
    answer.answer = fallback_answer(evidence, reason=reason)
    answer.sources = [hit_to_source(i, h) for i, h in enumerate(evidence, start=1)]
    if retrieval:  # no LLM took part in this answer: say so in the mode, not only in a note
        answer.mode = "retrieval-only"


class _StreamInTask:
    """An LLM stream consumed in a task of its own, so the reader can stop waiting at the
    deadline: cancelling a task is clean, cancelling across an async generator's yields is
    not (the cancellation would land in whatever the consumer awaits at that moment)."""

    _END = object()

    def __init__(self, llm: ChatModel, messages: list[Message], max_tokens: int) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task = asyncio.create_task(self._run(llm, messages, max_tokens))

    async def _run(self, llm: ChatModel, messages: list[Message], max_tokens: int) -> None:
        try:
            async for piece in llm.stream(messages, max_tokens=max_tokens):
                self._queue.put_nowait(piece)
        except Exception as exc:  # handed to the reader, which raises it
            self._queue.put_nowait(exc)
        else:
            self._queue.put_nowait(self._END)

    async def next(self, timeout_s: float) -> StreamPiece | None:
        """The next piece, None at the end; asyncio.TimeoutError when ``timeout_s`` passes."""
        item = await asyncio.wait_for(self._queue.get(), max(timeout_s, 0.001))
        if item is self._END:
            return None
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self._task.cancel()


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
