"""Judging passages: one YES/NO verdict per passage (``llm``) or one call per batch
(``llm-batch``). A verdict that cannot be had is a ``Verdict`` without ``relevant`` and with the
reason, so the loop can count it and say why.

The verdict stays YES/NO; where the server returns log-probabilities, the decision is the
margin log P(YES) - log P(NO) against ``query.judge_threshold`` rather than the word alone: a
small model that says NO to a useful passage often still gives YES a fair share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from deepsearcher.agents import prompts
from deepsearcher.agents.base import render_document
from deepsearcher.agents.parsing import parse_yes_no, parse_yes_no_list
from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.llm import JsonSchema, TokenLogprob
from deepsearcher.prompting import ask, complete_parsed_full, escape_document, messages_for
from deepsearcher.run_context import RunContext
from deepsearcher.types import Hit

_YES_NO = {"type": "string", "enum": ["YES", "NO"]}
VERDICT_SCHEMA = JsonSchema(
    "verdict",
    {
        "type": "object",
        "properties": {"verdict": _YES_NO},
        "required": ["verdict"],
        "additionalProperties": False,
    },
)
VERDICTS_SCHEMA = JsonSchema(
    "verdicts",
    {
        "type": "object",
        "properties": {"verdicts": {"type": "array", "items": _YES_NO}},
        "required": ["verdicts"],
        "additionalProperties": False,
    },
)


@dataclass(frozen=True)
class Verdict:
    """Is ``hit`` relevant? ``relevant`` is None when no verdict could be had: then ``reason``
    says why, and ``out_of_budget`` tells a spent budget (the passage was never judged) from a
    failed or unusable reply. ``margin`` is log P(YES) - log P(NO) when the server gave it."""

    hit: Hit
    relevant: bool | None
    reason: str | None = None
    out_of_budget: bool = False
    margin: float | None = None

    @classmethod
    def failed(cls, hit: Hit, exc: LLMError | BudgetExceeded) -> Verdict:
        return cls(hit, None, exc.message, out_of_budget=isinstance(exc, BudgetExceeded))


async def judge_one(ctx: RunContext, question: str, query: str, hit: Hit) -> list[Verdict]:
    """One passage against the question and the sub-query that retrieved it."""
    prompt = prompts.JUDGE.format(
        question=escape_document(question),
        queries=escape_document(query),
        document=render_document(hit),
    )
    llm = ctx.llm
    assert llm is not None
    try:
        said, completion = await ctx.llm_call(
            lambda: complete_parsed_full(
                llm,
                messages_for(prompt),
                parse_yes_no,
                usage=ctx.usage,
                schema=VERDICT_SCHEMA,
                logprobs=True,
            )
        )
    except (BudgetExceeded, LLMError) as exc:
        return [Verdict.failed(hit, exc)]
    margin = yes_no_margin(completion.logprobs) if completion.logprobs else None
    relevant = said if margin is None else margin >= ctx.settings.query.judge_threshold
    return [Verdict(hit, relevant, margin=margin)]


async def judge_batch(
    ctx: RunContext, question: str, queries: Sequence[str], hits: Sequence[Hit]
) -> list[Verdict]:
    docs = "\n\n".join(render_document(h, i) for i, h in enumerate(hits, start=1))
    prompt = prompts.JUDGE_BATCH.format(
        question=escape_document(question),
        queries=escape_document(str(list(dict.fromkeys(queries)))),
        documents=docs,
        count=len(hits),
    )
    try:
        verdicts = await ask(
            ctx,
            messages_for(prompt),
            partial(parse_yes_no_list, count=len(hits)),
            schema=VERDICTS_SCHEMA,
        )
    except (BudgetExceeded, LLMError) as exc:
        return [Verdict.failed(h, exc) for h in hits]
    return [
        Verdict(h, v, None if v is not None else "no verdict for this passage")
        for h, v in zip(hits, verdicts, strict=True)
    ]


def _word(token: str) -> str:
    return token.strip().strip("\"'`.:{}").strip().lower()


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def yes_no_margin(tokens: Sequence[TokenLogprob]) -> float | None:
    """log P(YES) - log P(NO) at the first token of the reply that is a YES or a NO, summed
    over spellings ("YES", " yes", "Yes"). A side missing from the top alternatives is taken
    as likely as the least likely alternative shown (in truth it is at most that). None when
    no token is a verdict or the server sent no alternatives."""
    for tok in tokens:
        if _word(tok.token) not in ("yes", "no"):
            continue
        options = dict(tok.top)
        options.setdefault(tok.token, tok.logprob)
        if len(options) < 2:
            return None
        yes = [lp for t, lp in options.items() if _word(t) == "yes"]
        no = [lp for t, lp in options.items() if _word(t) == "no"]
        floor = min(options.values())
        return _logsumexp(yes or [floor]) - _logsumexp(no or [floor])
    return None
