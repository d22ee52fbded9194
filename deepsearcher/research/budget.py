"""The run's one budget as researchers see it: a ``ChatModel`` whose every call is admitted by,
and counted in, the run's ``RunContext``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.llm import ChatModel, Completion, JsonSchema, Message, StreamPiece, ToolSchema
from deepsearcher.run_context import RunContext

WRITE_RESERVE_CALLS = 3  # kept back from the researchers: the draft (and its retry), a check
MIN_RESEARCHER_CALLS = 3  # decompose, a verdict, the answer: less cannot find anything


class ResearchBudgetSpent(LLMError):
    """The run's shared budget refused a researcher's call. An ``LLMError`` on purpose: every
    step of the deep-search loop already degrades on one (a verdict dropped, the loop ended,
    the answer listing its passages)."""

    default_hint = "raise the run's budget (--max-llm-calls) or ask for fewer sections"


class SharedBudgetModel:
    """A researcher's ``ChatModel``: every call is admitted by, and counted in, the run's one
    ``RunContext``, so concurrent researchers share a single budget of calls, tokens and time."""

    def __init__(self, inner: ChatModel, ctx: RunContext, reserve_calls: int) -> None:
        self.inner = inner
        self.ctx = ctx
        self.reserve_calls = reserve_calls
        self.name = inner.name

    def _admit(self) -> None:
        try:
            self.ctx.check_budget(self.reserve_calls)
        except BudgetExceeded as exc:
            self.ctx.cut_short = self.ctx.cut_short or exc.message
            raise ResearchBudgetSpent(f"research budget spent: {exc.message}") from None

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[ToolSchema] | None = None,
        schema: JsonSchema | None = None,
        logprobs: bool = False,
    ) -> Completion:
        self._admit()
        self.ctx.in_flight += 1
        try:
            completion = await self.inner.complete(
                messages,
                max_tokens=max_tokens,
                temperature=temperature,
                tools=tools,
                schema=schema,
                logprobs=logprobs,
            )
        finally:
            self.ctx.in_flight -= 1
        self.ctx.usage.add(completion.usage)
        return completion

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int | None = None
    ) -> AsyncIterator[StreamPiece]:
        self._admit()
        self.ctx.in_flight += 1
        try:
            async for piece in self.inner.stream(messages, max_tokens=max_tokens):
                if piece.usage is not None:
                    self.ctx.usage.add(piece.usage)
                yield piece
        finally:
            self.ctx.in_flight -= 1
