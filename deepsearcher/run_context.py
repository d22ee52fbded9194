"""The state of one question's run: usage, budget (calls, tokens, time) and visible notes.

Neutral ground: the agents and the tools both take a ``RunContext``, and neither has to import
the other to get it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from deepsearcher.config import Settings
from deepsearcher.errors import BudgetExceeded
from deepsearcher.llm import ChatModel, LLMUnreachableError
from deepsearcher.types import Answer, DoneEvent, NoteEvent, Usage

# The run's notes are logged under their own name (at INFO), so a front end that shows them as
# events can leave their log records out.
NOTES_LOGGER = "deepsearcher.notes"
_notes_log = logging.getLogger(NOTES_LOGGER)
T = TypeVar("T")

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
    unreachable: LLMUnreachableError | None = None  # the first refused connection: no more calls
    # The note saying why the answer step wrote no answer (it failed, had no time left, or the
    # LLM is unreachable), so a caller that must react (research) reads a field, not the notes.
    no_answer: str | None = None

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
        _notes_log.info("%s", message)
        return NoteEvent(message=message)

    def unreachable_reason(self) -> str | None:
        """What a user is told when the LLM refused the connection; None while it has not."""
        if self.unreachable is None:
            return None
        return f"{self.unreachable.message}; showing the best passages only"

    def no_answer_note(self, message: str) -> NoteEvent:
        """The note of an answer step that wrote no answer (only passages); the first one is
        kept as ``no_answer``."""
        self.no_answer = self.no_answer or message
        return self.note(message)

    def unreachable_note(self) -> NoteEvent:
        assert self.unreachable is not None
        # Once the LLM refused, no answer can be written, wherever the run noticed.
        event = self.no_answer_note(f"{LLM_UNREACHABLE}: {self.unreachable_reason()}")
        event.llm_unreachable = True
        return event

    def finish(self, answer: Answer) -> DoneEvent:
        """The run's last event, with what the run used and how it degraded on ``answer``."""
        answer.usage = self.usage
        answer.cut_short = self.cut_short
        answer.notes = self.notes
        answer.seconds = self.elapsed()
        answer.llm_unreachable = self.unreachable_reason()
        answer.no_answer = self.no_answer
        return DoneEvent(answer=answer)

    async def llm_call(self, call: Callable[[], Awaitable[T]], *, budgeted: bool = True) -> T:
        """One LLM call of the run, within its budget and the time left: search-phase calls
        (``budgeted``) leave the answer its reserve. A refused connection is remembered, so no
        later step calls an LLM that will refuse again."""
        if self.unreachable is not None:
            raise self.unreachable
        if budgeted:
            self.check_budget()
        left = self.search_remaining_s() if budgeted else self.remaining_s()
        self.in_flight += 1
        try:
            return await asyncio.wait_for(call(), max(left, 0.001))
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
