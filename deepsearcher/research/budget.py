"""The run's one budget as researchers see it: a ``ChatModel`` whose every call is admitted by,
and counted in, the run's ``RunContext``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.llm import ChatModel, Completion, Message, StreamPiece, ToolSchema
from deepsearcher.run_context import RunContext

MIN_RESEARCHER_CALLS = 3  # decompose, a verdict, the answer: less cannot find anything


class ResearchBudgetSpent(LLMError):
    """The run's shared budget refused a researcher's call. An ``LLMError`` on purpose: every
    step of the deep-search loop already degrades on one (a verdict dropped, the loop ended,
    the answer listing its passages)."""

    default_hint = "raise the run's budget (--max-llm-calls) or ask for fewer sections"


class CallGate:
    """Lets one call run alone: the run's researchers start their calls through the gate, and
    ``alone()`` closes it, waits for the calls in flight to end, and opens it again after.
    A server that aborts a streamed reply when another request arrives (llama.cpp's, unless
    started with ``--interrupt_requests false``) lets an answer written alone finish."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._active = 0
        self._alone = asyncio.Lock()

    async def enter(self) -> None:
        await self._open.wait()
        self._active += 1
        self._idle.clear()

    def leave(self) -> None:
        self._active -= 1
        if self._active == 0:
            self._idle.set()

    @asynccontextmanager
    async def alone(self) -> AsyncIterator[None]:
        async with self._alone:
            self._open.clear()
            try:
                await self._idle.wait()
                yield
            finally:
                self._open.set()


class SharedBudgetModel:
    """A researcher's ``ChatModel``: every call is admitted by, and counted in, the run's one
    ``RunContext``, so concurrent researchers share a single budget of calls, tokens and time."""

    def __init__(
        self,
        inner: ChatModel,
        ctx: RunContext,
        gate: CallGate | None = None,
    ) -> None:
        self.inner = inner
        self.ctx = ctx
        self.name = inner.name
        self.gate = gate  # None: the call that runs alone, or a run without one

    def _admit(self) -> None:
        try:
            # Nothing is kept back: after the researchers the run makes no LLM call.
            self.ctx.check_budget(0)
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
        **options: Any,
    ) -> Completion:
        # ``options``: whatever else the ChatModel protocol offers a call (a response format,
        # say) reaches the model unchanged, so researchers get every feature the agents use.
        self._admit()
        if self.gate is not None:
            await self.gate.enter()
        self.ctx.in_flight += 1
        try:
            completion = await self.inner.complete(
                messages, max_tokens=max_tokens, temperature=temperature, tools=tools, **options
            )
        finally:
            self.ctx.in_flight -= 1
            if self.gate is not None:
                self.gate.leave()
        self.ctx.usage.add(completion.usage)
        return completion

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int | None = None, **options: Any
    ) -> AsyncIterator[StreamPiece]:
        self._admit()
        if self.gate is not None:
            await self.gate.enter()
        self.ctx.in_flight += 1
        try:
            async for piece in self.inner.stream(messages, max_tokens=max_tokens, **options):
                if piece.usage is not None:
                    self.ctx.usage.add(piece.usage)
                yield piece
        finally:
            self.ctx.in_flight -= 1
            if self.gate is not None:
                self.gate.leave()
