"""The answer step shared by every agent: stream the cited answer over the passages, repair a
citation that stands where its fact belongs, attribute the sentences the model left uncited,
and say what the answer stands on (``evidence``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence, Set
from dataclasses import dataclass

from deepsearcher.agents import prompts
from deepsearcher.agents.attribution import Attributor, SentenceSupport, with_citations
from deepsearcher.agents.base import hit_to_source, render_document
from deepsearcher.agents.citations import cited_sources, tidy
from deepsearcher.agents.hops import Fact
from deepsearcher.agents.parsing import ReasoningFilter
from deepsearcher.agents.repair import repair
from deepsearcher.aio import TaskPump
from deepsearcher.errors import LLMError
from deepsearcher.llm import LLMUnreachableError, Message, StreamPiece
from deepsearcher.prompting import clean_output, escape_document, messages_for
from deepsearcher.run_context import RunContext
from deepsearcher.types import EVIDENCE_NOTE, Answer, AnswerDeltaEvent, Event, Hit

_CITATION = re.compile(r"\[(\d{1,3})\]")
STREAM_REPLACED = "the streamed answer broke off; it was written again in full"


def passages_block(hits: Sequence[Hit]) -> str:
    """The numbered ``<document>`` blocks every prompt over these passages starts with."""
    if not hits:
        return "(no passages were found)"
    return "\n\n".join(render_document(h, i) for i, h in enumerate(hits, start=1))


def _facts_text(facts: Sequence[Fact], passages: Sequence[Hit]) -> str:
    lines = []
    for f in facts:
        n = next((i for i, h in enumerate(passages, start=1) if h.id == f.hit.id), None)
        cite = f" [{n}]" if n else ""
        lines.append(f"- {escape_document(f.query)} {escape_document(f.answer)}{cite}")
    return prompts.FACTS.format(facts="\n".join(lines)) if lines else ""


async def write_answer(
    ctx: RunContext,
    question: str,
    passages: Sequence[Hit],
    answer: Answer,
    fallback: Sequence[Hit] = (),
    verified: Set[str] = frozenset(),
    *,
    facts: Sequence[Fact] = (),
    required: Sequence[Fact] = (),
    attributor: Attributor | None = None,
) -> AsyncIterator[Event]:
    """Stream the cited answer; fill ``answer.answer``, ``sources`` (the passages it cites,
    written or attributed), ``retrieved`` (those it does not), ``unsupported_citations``,
    ``unsupported_sentences``, ``first_token_s`` and ``evidence``.

    ``verified`` holds the ids of the passages the relevance judge kept; ``facts`` the
    lookups' answers the answer is written from, ``required`` those it must state. The stream gets the time left in the run;
    reasoning blocks are dropped from the deltas. If the LLM fails here, the answer lists the
    evidence instead: the passages, or when there are none (verdicts failed too) the best
    ``fallback`` hits, unjudged. Out of time, a partial answer is kept, marked cut short."""
    reply = _Reply(question, required)
    async for ev in _stream_answer(
        ctx, question, passages, answer, fallback, verified, facts, reply
    ):
        yield ev
    if reply.messages is not None:
        for ev in await _finish(ctx, reply, passages, answer, verified, facts, attributor):
            yield ev
    for ev in _settle_evidence(ctx, answer, passages):
        yield ev


@dataclass
class _Reply:
    question: str
    required: Sequence[Fact] = ()  # what the answer must state (a chain's last findings)
    text: str = ""
    messages: list[Message] | None = None  # set when a reply was written (to repair it)


async def _stream_answer(
    ctx: RunContext,
    question: str,
    passages: Sequence[Hit],
    answer: Answer,
    fallback: Sequence[Hit],
    verified: Set[str],
    facts: Sequence[Fact],
    reply: _Reply,
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
    prompt = prompts.over_documents(
        passages_block(passages),
        prompts.ANSWER.format(
            question=escape_document(question),
            facts=_facts_text(facts, passages),
            cut_short=cut,
        ),
    )
    messages = messages_for(prompt)
    parts: list[str] = []
    visible = ReasoningFilter()
    stream: TaskPump[StreamPiece] = TaskPump(
        ctx.llm.stream(messages, max_tokens=ctx.settings.llm.max_tokens)
    )
    try:
        while (piece := await stream.next(ctx.remaining_s())) is not None:
            if piece.replace:
                # The stream broke off and the reply came again whole, without streaming: the
                # field tells front ends the text so far is replaced by the final answer.
                answer.stream_replaced = True
                yield ctx.note(STREAM_REPLACED)
                parts = [piece.text]
                continue
            if piece.text:
                parts.append(piece.text)
                if shown := visible.feed(piece.text):
                    if answer.first_token_s is None:
                        answer.first_token_s = ctx.elapsed()
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
    reply.text = "".join(parts)
    reply.messages = messages


async def _finish(
    ctx: RunContext,
    reply: _Reply,
    passages: Sequence[Hit],
    answer: Answer,
    verified: Set[str],
    facts: Sequence[Fact],
    attributor: Attributor | None,
) -> list[Event]:
    """The finished reply as the answer: citations that point at no passage removed, a
    citation standing for its fact repaired, uncited sentences attributed, sources listed."""
    events: list[Event] = []
    text, written, invalid = cited_sources(tidy(clean_output(reply.text)), passages)
    if invalid:
        events.append(ctx.note(f"removed {invalid} citation(s) that pointed at no passage"))
    text = await repair(ctx, reply, text, passages, facts, answer, events)
    text, written, _ = cited_sources(text, passages)
    supports: list[SentenceSupport] = []
    if attributor is not None and passages and text:
        supports = await attributor.support(
            text, [h.text for h in passages], question=reply.question
        )
        text = with_citations(text, supports)
    answer.answer = text.strip()
    _fill_sources(answer, passages, verified, written, supports)
    events.extend(_evidence_notes(ctx, answer, passages, written, supports, text))
    return events


def _fill_sources(
    answer: Answer,
    passages: Sequence[Hit],
    verified: Set[str],
    written: Sequence[int],
    supports: Sequence[SentenceSupport],
) -> None:
    _, cited, _ = cited_sources(answer.answer, passages)
    by_model = set(written)
    answer.sources = []
    for n in cited:
        c = hit_to_source(n, passages[n - 1], passages[n - 1].id in verified)
        c.attributed = n not in by_model
        answer.sources.append(c)
    answer.retrieved = [
        hit_to_source(n, h, h.id in verified)
        for n, h in enumerate(passages, start=1)
        if n not in cited
    ]
    answer.unsupported_citations = [
        answer.answer[s.start : s.end] for s in supports if s.written and not s.supported
    ]
    answer.unsupported_sentences = [
        answer.answer[s.start : s.end] for s in supports if not s.written and not s.supported
    ]


def _evidence_notes(
    ctx: RunContext,
    answer: Answer,
    passages: Sequence[Hit],
    written: Sequence[int],
    supports: Sequence[SentenceSupport],
    text: str,
) -> list[Event]:
    events: list[Event] = []
    attributed = [s for s in supports if s.attributed]
    if attributed:
        how = "cited none of" if not written else "left sentences uncited among"
        events.append(
            ctx.note(
                f"{EVIDENCE_NOTE}the model {how} the {len(passages)} passage(s) it was given; "
                f"{len(attributed)} sentence(s) were attributed to the passages that hold them "
                "(marked attributed in the sources)"
            )
        )
    elif passages and not answer.sources and answer.answer and not supports:
        events.append(
            ctx.note(
                f"{EVIDENCE_NOTE}the answer cites none of the {len(passages)} passage(s) it "
                "was given; they are listed as retrieved, not as sources"
            )
        )
    if answer.unsupported_citations:
        weak = answer.unsupported_citations
        events.append(
            ctx.note(
                f"{EVIDENCE_NOTE}{len(weak)} cited sentence(s) not found in the passage they "
                "cite: " + "; ".join(f'"{_short(w)}"' for w in weak[:3])
            )
        )
    if answer.unsupported_sentences:
        loose = answer.unsupported_sentences
        events.append(
            ctx.note(
                f"{EVIDENCE_NOTE}{len(loose)} sentence(s) no passage holds: "
                + "; ".join(f'"{_short(w)}"' for w in loose[:3])
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
    if any(s.attributed for s in answer.sources):
        answer.evidence = "attributed"
    elif all(s.verified for s in answer.sources):
        answer.evidence = "verified"
    else:
        answer.evidence = "unverified"
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
