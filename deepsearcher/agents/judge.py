"""Judging passages: one YES/NO verdict per passage (``llm``) or one call per batch
(``llm-batch``). A verdict that cannot be had is a ``Verdict`` without ``relevant`` and with the
reason, so the loop can count it and say why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from deepsearcher.agents import prompts
from deepsearcher.agents.base import ask, escape_document, messages_for, render_document
from deepsearcher.agents.parsing import parse_yes_no, parse_yes_no_list
from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.run_context import RunContext
from deepsearcher.types import Hit


@dataclass(frozen=True)
class Verdict:
    """Is ``hit`` relevant? ``relevant`` is None when no verdict could be had: then ``reason``
    says why, and ``out_of_budget`` tells a spent budget (the passage was never judged) from a
    failed or unusable reply."""

    hit: Hit
    relevant: bool | None
    reason: str | None = None
    out_of_budget: bool = False

    @classmethod
    def failed(cls, hit: Hit, exc: LLMError | BudgetExceeded) -> Verdict:
        return cls(hit, None, exc.message, out_of_budget=isinstance(exc, BudgetExceeded))


async def judge_one(
    ctx: RunContext, question: str, queries: Sequence[str], hit: Hit
) -> list[Verdict]:
    prompt = prompts.JUDGE.format(
        question=escape_document(question),
        queries=escape_document(str(list(queries))),
        document=render_document(hit),
    )
    try:
        return [Verdict(hit, await ask(ctx, messages_for(prompt), parse_yes_no))]
    except (BudgetExceeded, LLMError) as exc:
        return [Verdict.failed(hit, exc)]


async def judge_batch(
    ctx: RunContext, question: str, queries: Sequence[str], hits: Sequence[Hit]
) -> list[Verdict]:
    docs = "\n\n".join(render_document(h, i) for i, h in enumerate(hits, start=1))
    prompt = prompts.JUDGE_BATCH.format(
        question=escape_document(question),
        queries=escape_document(str(list(queries))),
        documents=docs,
        count=len(hits),
    )
    try:
        verdicts = await ask(ctx, messages_for(prompt), partial(parse_yes_no_list, count=len(hits)))
    except (BudgetExceeded, LLMError) as exc:
        return [Verdict.failed(h, exc) for h in hits]
    return [
        Verdict(h, v, None if v is not None else "no verdict for this passage")
        for h, v in zip(hits, verdicts, strict=True)
    ]
