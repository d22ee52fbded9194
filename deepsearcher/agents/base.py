"""Pieces shared by the agents: LLM calls within the run's budget, collection routing, the
``<document>`` rendering of passages, and the cited answer step."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Sequence, Set

from deepsearcher.agents import prompts
from deepsearcher.agents.citations import canonical_citations, unsupported_citations
from deepsearcher.agents.parsing import ReasoningFilter, parse_str_list
from deepsearcher.aio import TaskPump
from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.llm import LLMUnreachableError, StreamPiece
from deepsearcher.prompting import ask as ask
from deepsearcher.prompting import clean_output, document_block
from deepsearcher.prompting import escape_attribute as escape_attribute
from deepsearcher.prompting import escape_document as escape_document
from deepsearcher.prompting import messages_for as messages_for
from deepsearcher.retrieval import Retriever
from deepsearcher.run_context import RunContext
from deepsearcher.store import CollectionInfo
from deepsearcher.types import (
    EVIDENCE_NOTE,
    Answer,
    AnswerDeltaEvent,
    Citation,
    Event,
    Hit,
    Mode,
)

logger = logging.getLogger(__name__)

_CITATION = re.compile(r"\[(\d{1,3})\]")
STREAM_REPLACED = "the streamed answer broke off; it was written again in full"


def render_document(hit: Hit, n: int | None = None, *, text: str | None = None) -> str:
    """One passage as a ``<document>`` block; every field that comes from a file or a web
    result (path, heading, title, URL, text) is escaped."""
    attributes = [f'n="{n}"'] if n is not None else []
    attributes.append(f'source="{escape_attribute(passage_label(hit))}"')
    if hit.heading:
        attributes.append(f'heading="{escape_attribute(hit.heading)}"')
    if hit.kind == "web" and hit.title and hit.title != hit.source:
        attributes.append(f'title="{escape_attribute(hit.title)}"')
    return document_block(" ".join(attributes), hit.text if text is None else text)


def passage_label(hit: Hit) -> str:
    """A passage's source in prompts: file and page range, or ``(web) URL``."""
    return f"(web) {hit.label}" if hit.kind == "web" else hit.label


async def resolve_collections(
    retriever: Retriever, question: str, requested: Sequence[str] | None, ctx: RunContext
) -> tuple[list[str], list[Event]]:
    """The collections to search: those requested, else those the LLM routes the question to
    (when several are described), else all; only those embedded like the retriever's."""
    infos = await retriever.available_collections()
    retriever.check_requested(requested, infos)  # before routing spends an LLM call
    events: list[Event] = []
    chosen = None
    if not requested:
        chosen, events = await _route(question, infos, ctx)
    usable, notes = await retriever.searchable(requested, infos, chosen)
    events.extend(ctx.note(n) for n in notes)
    return usable, events


async def _route(
    question: str, infos: Sequence[CollectionInfo], ctx: RunContext
) -> tuple[list[str], list[Event]]:
    names = [i.name for i in infos]
    events: list[Event] = []
    described = [i for i in infos if i.meta and i.meta.description]
    if len(infos) == 1 or len(described) < 2 or ctx.llm is None or ctx.unreachable:
        return names, events
    # One routing call per question (not per sub-query): cheap, and stable across the loop.
    listing = "\n".join(
        f"- {i.name}: {(i.meta.description if i.meta else '') or '(no description)'}" for i in infos
    )
    try:
        picked = await ask(
            ctx,
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


def hit_to_source(n: int, hit: Hit, verified: bool = False) -> Citation:
    return Citation(
        n=n,
        source=hit.source,
        text=hit.text,
        collection=hit.collection,
        verified=verified,
        **hit.location(),
    )


def _passages(hits: Sequence[Hit]) -> str:
    return "\n\n".join(render_document(h, i) for i, h in enumerate(hits, start=1))


def cited_sources(answer_text: str, passages: Sequence[Hit]) -> tuple[str, list[int], int]:
    """The passage numbers the answer cites, in order. Citations pointing at no passage are
    removed from the text and counted, so every [n] left has a source."""
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

    text = _CITATION.sub(keep, canonical_citations(answer_text))
    return text, sorted(cited), invalid


async def write_answer(
    ctx: RunContext,
    question: str,
    passages: Sequence[Hit],
    answer: Answer,
    fallback: Sequence[Hit] = (),
    verified: Set[str] = frozenset(),
) -> AsyncIterator[Event]:
    """Stream the cited answer; fill ``answer.answer``, ``sources`` (the passages it cites),
    ``retrieved`` (those it does not), ``unsupported_citations`` and ``evidence``.

    ``verified`` holds the ids of the passages the relevance judge kept. The stream gets the
    time left in the run; reasoning blocks are dropped from the deltas. If the LLM fails here,
    the answer lists the evidence instead: the passages, or when there are none (verdicts
    failed too) the best ``fallback`` hits, unjudged. Out of time, a partial answer is kept,
    marked cut short."""
    async for ev in _write_answer(ctx, question, passages, answer, fallback, verified):
        yield ev
    for ev in _settle_evidence(ctx, answer, passages):
        yield ev


async def _write_answer(
    ctx: RunContext,
    question: str,
    passages: Sequence[Hit],
    answer: Answer,
    fallback: Sequence[Hit],
    verified: Set[str],
) -> AsyncIterator[Event]:
    assert ctx.llm is not None
    evidence = list(passages) or list(fallback)[:5]
    if ctx.unreachable is not None:
        yield ctx.unreachable_note()
        _answer_from_evidence(
            answer, evidence, "the LLM could not be reached", verified, retrieval=True
        )
        return
    if ctx.remaining_s() <= 0:
        ctx.cut_short = ctx.cut_short or ctx.time_reason()
        yield ctx.no_answer_note(f"no time left to write the answer: {ctx.time_reason()}")
        _answer_from_evidence(answer, evidence, ctx.time_reason(), verified)
        return
    cut = prompts.CUT_SHORT_NOTE.format(reason=ctx.cut_short) if ctx.cut_short else ""
    prompt = prompts.ANSWER.format(
        question=escape_document(question),
        documents=_passages(passages) if passages else "(no passages were found)",
        cut_short=cut,
    )
    parts: list[str] = []
    visible = ReasoningFilter()
    stream: TaskPump[StreamPiece] = TaskPump(
        ctx.llm.stream(messages_for(prompt), max_tokens=ctx.settings.llm.max_tokens)
    )
    try:
        while (piece := await stream.next(ctx.remaining_s())) is not None:
            if piece.replace:
                # The stream broke off and the reply came again whole, without streaming: the
                # note tells the reader the text so far is replaced by the final answer.
                yield ctx.note(STREAM_REPLACED)
                parts = [piece.text]
                continue
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
            _answer_from_evidence(answer, evidence, ctx.time_reason(), verified)
            return
    except LLMError as exc:
        if isinstance(exc, LLMUnreachableError):
            ctx.unreachable = exc
            yield ctx.unreachable_note()
            _answer_from_evidence(
                answer, evidence, "the LLM could not be reached", verified, retrieval=True
            )
            return
        # Visible degradation: say the LLM failed and hand over the evidence found so far.
        yield ctx.no_answer_note(f"answer step failed: {exc.message}")
        _answer_from_evidence(
            answer, evidence, f"the LLM failed while answering ({exc.message})", verified
        )
        return
    finally:
        stream.close()

    for ev in _cite(ctx, "".join(parts), passages, answer, verified):
        yield ev


def _cite(
    ctx: RunContext, reply: str, passages: Sequence[Hit], answer: Answer, verified: Set[str]
) -> list[Event]:
    """Fill the answer from the finished reply: its text with only the citations that point
    at a passage, the passages it cites as sources and the others as retrieved; notes for
    what a reader should know about its evidence."""
    events: list[Event] = []
    text, cited, invalid = cited_sources(clean_output(reply), passages)
    if invalid:
        events.append(ctx.note(f"removed {invalid} citation(s) that pointed at no passage"))
    answer.answer = text.strip()
    answer.sources = [
        hit_to_source(n, passages[n - 1], passages[n - 1].id in verified) for n in cited
    ]
    answer.retrieved = [
        hit_to_source(n, h, h.id in verified)
        for n, h in enumerate(passages, start=1)
        if n not in cited
    ]
    if passages and not cited and answer.answer:
        events.append(
            ctx.note(
                f"{EVIDENCE_NOTE}the answer cites none of the {len(passages)} passage(s) it "
                "was given; they are listed as retrieved, not as sources"
            )
        )
    weak = unsupported_citations(answer.answer, [h.text for h in passages])
    if weak:
        answer.unsupported_citations = weak
        events.append(
            ctx.note(
                f"{EVIDENCE_NOTE}{len(weak)} cited sentence(s) not found in the passage they "
                "cite: " + "; ".join(f'"{_short(w)}"' for w in weak[:3])
            )
        )
    return events


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _settle_evidence(ctx: RunContext, answer: Answer, passages: Sequence[Hit]) -> list[Event]:
    """Set ``answer.evidence`` from its sources; an answer that stands on nothing says so."""
    if not answer.sources:
        answer.evidence = "none"
        if not passages and answer.mode != "retrieval-only" and not answer.retrieved:
            return [ctx.note(f"{EVIDENCE_NOTE}no passage was found; the answer rests on none")]
        return []
    answer.evidence = "verified" if all(s.verified for s in answer.sources) else "unverified"
    return []


def _answer_from_evidence(
    answer: Answer,
    evidence: Sequence[Hit],
    reason: str,
    verified: Set[str],
    *,
    retrieval: bool = False,
) -> None:
    answer.answer = fallback_answer(evidence, reason=reason)
    answer.sources = [
        hit_to_source(i, h, h.id in verified) for i, h in enumerate(evidence, start=1)
    ]
    if retrieval:  # no LLM took part in this answer: say so in the mode, not only in a note
        answer.mode = "retrieval-only"


def fallback_answer(passages: Sequence[Hit], *, reason: str) -> str:
    if not passages:
        return f"No answer: {reason}, and no passages were found."
    lines = [f"No generated answer: {reason}. The most relevant passages:"]
    for i, h in enumerate(passages[:5], start=1):
        excerpt = " ".join(h.text.split())[:200]
        lines.append(f"[{i}] {excerpt}")
    return "\n".join(lines)


def new_answer(question: str, mode: Mode) -> Answer:
    return Answer(question=question, answer="", mode=mode)
