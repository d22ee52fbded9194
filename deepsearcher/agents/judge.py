"""Judging a round's passages: one YES/NO verdict per passage (``llm``: one call each) or one
call for the round (``llm-batch``). Both prompts come after the round's documents, so their
calls share the prefix the server has already read. A verdict that cannot be had is a
``Verdict`` without ``relevant`` and with the reason, so the loop can count it and say why.

The verdict stays YES/NO; where the server returns log-probabilities, the decision is the
margin log P(YES) - log P(NO) against the threshold (``llm.judge_threshold``, calibrated per
model, else ``query.judge_threshold``) rather than the word alone: a small model that says NO
to a useful passage often still gives YES a fair share. In a batch each verdict word has its
own margin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from deepsearcher.agents import prompts
from deepsearcher.agents.parsing import parse_yes_no, parse_yes_no_list
from deepsearcher.config import Settings
from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.llm import JsonSchema, TokenLogprob
from deepsearcher.prompting import complete_parsed_full, escape_document, messages_for
from deepsearcher.run_context import RunContext
from deepsearcher.types import Hit, NoteEvent

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


def threshold(settings: Settings) -> float:
    """The margin a passage needs: the chat model's calibrated one, else the query default."""
    calibrated = settings.llm.judge_threshold
    return settings.query.judge_threshold if calibrated is None else calibrated


def _decide(ctx: RunContext, said: bool | None, margin: float | None) -> bool | None:
    if margin is None or said is None:
        return said
    return margin >= threshold(ctx.settings)


async def judge_one(
    ctx: RunContext, documents: str, question: str, query: str, n: int, hit: Hit
) -> list[Verdict]:
    """Passage ``n`` of the round's ``documents`` against the question and its lookup."""
    prompt = prompts.over_documents(
        documents,
        prompts.JUDGE.format(question=escape_document(question), query=escape_document(query), n=n),
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
    margins = yes_no_margins(completion.logprobs or [])
    margin = margins[0] if margins else None
    return [Verdict(hit, _decide(ctx, said, margin), margin=margin)]


async def judge_batch(
    ctx: RunContext,
    documents: str,
    question: str,
    queries: Sequence[str],
    hits: Sequence[Hit],
    first: int = 1,
) -> list[Verdict]:
    """Passages ``first`` .. ``first + len(hits) - 1`` of the round's ``documents`` in one
    call; each verdict word's own log-probabilities give its margin."""
    prompt = prompts.over_documents(
        documents,
        prompts.JUDGE_BATCH.format(
            question=escape_document(question),
            queries=escape_document(str(list(dict.fromkeys(queries)))),
            first=first,
            last=first + len(hits) - 1,
            count=len(hits),
        ),
    )
    llm = ctx.llm
    assert llm is not None
    try:
        said, completion = await ctx.llm_call(
            lambda: complete_parsed_full(
                llm,
                messages_for(prompt),
                partial(parse_yes_no_list, count=len(hits)),
                usage=ctx.usage,
                schema=VERDICTS_SCHEMA,
                logprobs=True,
            )
        )
    except (BudgetExceeded, LLMError) as exc:
        return [Verdict.failed(h, exc) for h in hits]
    margins = yes_no_margins(completion.logprobs or [])
    if len(margins) != len(hits):  # the words did not line up with the passages
        margins = []
    out = []
    for i, (h, v) in enumerate(zip(hits, said, strict=True)):
        margin = margins[i] if margins else None
        reason = None if v is not None else "no verdict for this passage"
        out.append(Verdict(h, _decide(ctx, v, margin), reason, margin=margin))
    return out


def verdict_notes(ctx: RunContext, verdicts: Sequence[Verdict]) -> list[NoteEvent]:
    """Notes for verdicts that could not be had: a spent budget (the passages were never
    judged: the run is cut short) or unusable replies (the passages stay, unjudged)."""
    failed = [v for v in verdicts if v.relevant is None]
    unjudged = [v for v in failed if v.out_of_budget]
    unusable = [v for v in failed if not v.out_of_budget]
    notes = []
    if unjudged:
        ctx.cut_short = ctx.cut_short or unjudged[0].reason
        notes.append(
            ctx.note(f"search cut short: {ctx.cut_short} ({len(unjudged)} chunk(s) left unjudged)")
        )
    if unusable and ctx.unreachable is None:
        notes.append(
            ctx.note(f"{len(unusable)} chunk(s) unjudged: verdict failed ({unusable[0].reason})")
        )
    return notes


def informative(verdicts: Sequence[Verdict]) -> bool:
    """Whether a round's verdicts told passages apart: some kept and some dropped. All kept or
    all dropped says nothing about which passage matters (with a small model, the usual
    case), so later rounds rank by retrieval instead of paying for more verdicts."""
    said = [v.relevant for v in verdicts if v.relevant is not None]
    return len(said) < 3 or (any(said) and not all(said))


def _word(token: str) -> str:
    return token.strip().strip("\"'`.:{}[],").strip().lower()


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def _margin(tok: TokenLogprob) -> float | None:
    options = dict(tok.top)
    options.setdefault(tok.token, tok.logprob)
    if len(options) < 2:
        return None
    yes = [lp for t, lp in options.items() if _word(t) == "yes"]
    no = [lp for t, lp in options.items() if _word(t) == "no"]
    floor = min(options.values())
    return _logsumexp(yes or [floor]) - _logsumexp(no or [floor])


def yes_no_margins(tokens: Sequence[TokenLogprob]) -> list[float]:
    """log P(YES) - log P(NO) at each token of the reply that is a YES or a NO, in order,
    summed over spellings ("YES", " yes", "Yes"). A side missing from the top alternatives is
    taken as likely as the least likely alternative shown (in truth it is at most that). Empty
    when a verdict token came without alternatives."""
    out = []
    for tok in tokens:
        if _word(tok.token) not in ("yes", "no"):
            continue
        margin = _margin(tok)
        if margin is None:
            return []
        out.append(margin)
    return out


def yes_no_margin(tokens: Sequence[TokenLogprob]) -> float | None:
    """The margin of the first verdict token of a reply (see ``yes_no_margins``)."""
    margins = yes_no_margins(tokens)
    return margins[0] if margins else None
