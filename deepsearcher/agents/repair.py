"""Repairing a finished answer: a citation standing where its fact belongs ("The release that
fixed it is [3].") and an answer that does not state what its lookups found: for a chain, one
that stops at the first lookup ("The person who approved it is Johan Lindqvist." when the
question asks for his office); for a one-lookup question, one that says something else or
that the documents do not state it. Each fix is said in a note and marks the streamed text
as replaced."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from deepsearcher.agents import prompts
from deepsearcher.agents.citations import (
    NOT_STATED,
    cited_sources,
    fact_is_marker,
    sentence_spans,
    tidy,
)
from deepsearcher.agents.grounding import holds, numbers
from deepsearcher.agents.hops import Fact
from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.llm import Message
from deepsearcher.prompting import clean_output, escape_document
from deepsearcher.run_context import RunContext
from deepsearcher.types import Answer, Event, Hit

_CITATION = re.compile(r"\[(\d{1,3})\]")


class Written(Protocol):
    """The reply as written, the conversation that wrote it and what it must state."""

    text: str
    messages: list[Message] | None
    required: Sequence[Fact]


async def repair(
    ctx: RunContext,
    reply: Written,
    text: str,
    passages: Sequence[Hit],
    facts: Sequence[Fact],
    answer: Answer,
    events: list[Event],
) -> str:
    """``text`` with no citation standing where its fact belongs ("… is [3].") and stating
    what ``reply.required`` holds (a chain's last lookup, a one-lookup question's lookup).
    Fixed from the lookups' answers where they fit, else the answer is asked for once more,
    else the cited passage's words are quoted and the missing fact is added with its
    citation (in place of an answer that only says the documents do not state it). Each
    repair is said in a note."""
    bad = _marker_facts(text)
    if bad:
        fixed = _fill_from_facts(text, bad, passages, facts)
        if fixed is not None:
            text, bad = fixed, []
            events.append(
                _repaired(ctx, answer, "the fact was taken from the lookup that found it")
            )
    missing = [f for f in reply.required if not _states(text, f.answer)]
    if not bad and not missing:
        return text
    problems = [
        f'"{_short(text[a:b])}" puts a document number where its fact belongs' for a, b in bad
    ]
    problems += [
        f"it does not state what the question asks; the lookups found: {f.query} "
        f"{f.answer}" + (f" [{_number(f, passages)}]" if _number(f, passages) else "")
        for f in missing
    ]
    again = await _ask_again(ctx, reply, problems)
    if again is not None:
        again_text = cited_sources(tidy(clean_output(again)), passages)[0]
        if (
            again_text
            and not _marker_facts(again_text)
            and all(_states(again_text, f.answer) for f in reply.required)
        ):
            events.append(_repaired(ctx, answer, "the answer was written again"))
            return again_text
    if bad:
        text = _quote_passages(text, bad, passages)
        events.append(_repaired(ctx, answer, "the cited passage's words are quoted instead"))
    if missing:
        if all(NOT_STATED.search(text[a:b]) for a, b in sentence_spans(text)):
            text = ""  # "The documents do not state it." beside the finding would deny it
        for f in missing:
            n = _number(f, passages)
            finding = f"{f.query.rstrip(' ?？')}: {f.answer}" + (f" [{n}]" if n else "") + "."
            text = _put_finding(text, finding, f.answer, n)
        events.append(
            _repaired(
                ctx,
                answer,
                "the answer stopped short of what the last lookup found; "
                "that finding is added with its citation",
            )
        )
    return text


def _repaired(ctx: RunContext, answer: Answer, how: str) -> Event:
    answer.stream_replaced = True
    return ctx.note(f"answer repaired: {how}")


def _states(text: str, answer: str) -> bool:
    # Without its markers: "to 8 °C [2]" does not state "2–8 °C".
    return holds(_CITATION.sub(" ", text), answer)


def _put_finding(text: str, finding: str, found: str, n: int | None) -> str:
    """``text`` with ``finding`` in place of the sentence that states part of it (cites the
    same passage and gives some of its numbers, not all: "to 8 °C [2]" where the passage and
    the lookup say "2–8 °C"), which would contradict it beside it; else added at the end."""
    wanted = numbers(found)
    for a, b in sentence_spans(text) if n is not None and wanted else []:
        sentence = text[a:b]
        said = numbers(_CITATION.sub(" ", sentence))
        if n in _markers(sentence) and said & wanted and not _states(sentence, found):
            return text[:a] + finding + text[b:]
    return f"{text.rstrip()} {finding}".lstrip()


def _marker_facts(text: str) -> list[tuple[int, int]]:
    return [(a, b) for a, b in sentence_spans(text) if fact_is_marker(text[a:b])]


def _number(fact: Fact, passages: Sequence[Hit]) -> int | None:
    return next((i for i, h in enumerate(passages, start=1) if h.id == fact.hit.id), None)


def _markers(sentence: str) -> list[int]:
    return [int(n) for n in _CITATION.findall(sentence)]


def _fill_from_facts(
    text: str, bad: Sequence[tuple[int, int]], passages: Sequence[Hit], facts: Sequence[Fact]
) -> str | None:
    out, pos = [], 0
    for a, b in bad:
        cited = [passages[n - 1] for n in _markers(text[a:b]) if 1 <= n <= len(passages)]
        fact = next(
            (f for f in reversed(facts) for h in cited if holds(h.text, f.answer)),
            None,
        )
        if fact is None:
            return None
        sentence = text[a:b]
        first = _CITATION.search(sentence)
        assert first is not None
        out += [
            text[pos:a],
            sentence[: first.start()],
            f"{fact.answer} ",
            sentence[first.start() :],
        ]
        pos = b
    return "".join(out) + text[pos:]


async def _ask_again(ctx: RunContext, reply: Written, problems: Sequence[str]) -> str | None:
    """The answer written once more, told what was wrong with it (the conversation so far is
    the prefix the server has read: only the request is new)."""
    assert ctx.llm is not None and reply.messages is not None
    llm = ctx.llm
    said = "; ".join(escape_document(" ".join(p.split())) for p in problems[:3])
    convo = [
        *reply.messages,
        {"role": "assistant", "content": clean_output(reply.text)},
        {"role": "user", "content": prompts.REPAIR.format(problems=said)},
    ]
    try:
        completion = await ctx.llm_call(
            lambda: llm.complete(convo, max_tokens=ctx.settings.llm.max_tokens), budgeted=False
        )
    except (LLMError, BudgetExceeded):
        return None
    ctx.usage.add(completion.usage)
    return completion.text


def _quote_passages(text: str, bad: Sequence[tuple[int, int]], passages: Sequence[Hit]) -> str:
    out, pos = [], 0
    for a, b in bad:
        sentence = text[a:b]
        ns = [n for n in _markers(sentence) if 1 <= n <= len(passages)]
        excerpt = " ".join(passages[ns[0] - 1].text.split())[:200] if ns else ""
        first = _CITATION.search(sentence)
        assert first is not None
        end = sentence.rstrip()[-1] if sentence.rstrip()[-1:] in (".", "!", "?") else ""
        head = sentence[: first.start()].rstrip()
        marks = "".join(f"[{n}]" for n in ns)
        out += [text[pos:a], f'{head} {marks}: "{excerpt}"{end}']
        pos = b
    return "".join(out) + text[pos:]


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
