"""Stage 3, the research: one researcher per section, concurrently (at most
``max_concurrency``), each with its share of the run's one budget. Returns what they handed
back in plan order (``Gathered``), so evidence ids (E1, E2...) do not depend on timing once
``RunState.merge`` numbers them. A researcher that fails leaves its section named as missing;
the others go on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from deepsearcher.errors import DeepSearcherError
from deepsearcher.research.budget import MIN_RESEARCHER_CALLS
from deepsearcher.research.events import ResearcherFinishedEvent, ResearcherStartedEvent
from deepsearcher.research.models import Gathered, SectionResult, Subtask
from deepsearcher.research.researcher import ResearcherDeps, research_section
from deepsearcher.research.state import RunDeps, RunState

logger = logging.getLogger(__name__)


def shares(state: RunState, deps: RunDeps, subtasks: Sequence[Subtask]) -> list[int]:
    """Each subtask's LLM calls: what the budget has left, split by complexity, none more
    than one question's (the draft, the check and the report make no call)."""
    ctx = state.ctx
    left = ctx.max_llm_calls - ctx.usage.llm_calls
    total = sum(s.complexity for s in subtasks) or 1
    cap = deps.settings.query.max_llm_calls
    return [min(cap, max(0, left) * s.complexity // total) for s in subtasks]


async def gather(state: RunState, deps: RunDeps, subtasks: Sequence[Subtask]) -> Gathered:
    """Each subtask researched; the results in the order of ``subtasks``."""
    gate = asyncio.Semaphore(state.limits.max_concurrency)

    async def one(subtask: Subtask, budget: int) -> SectionResult:
        if budget < MIN_RESEARCHER_CALLS:
            reason = f"budget spent before it was researched ({budget} call(s) left)"
            state.ctx.cut_short = state.ctx.cut_short or "research LLM-call budget spent"
            result = SectionResult(subtask, budget=budget, error=reason)
        else:
            async with gate:
                result = await _researcher(state, deps, subtask, budget)
        deps.emit(
            ResearcherFinishedEvent(
                section=subtask.title,
                findings=len(result.findings),
                calls=result.calls,
                error=result.error,
                cut_short=result.cut_short,
            )
        )
        return result

    budgets = shares(state, deps, subtasks)
    results = await asyncio.gather(*(one(s, b) for s, b in zip(subtasks, budgets, strict=True)))
    return Gathered(list(results))


async def _researcher(
    state: RunState, deps: RunDeps, subtask: Subtask, budget: int
) -> SectionResult:
    deps.emit(ResearcherStartedEvent(section=subtask.title, budget=budget))
    shared = ResearcherDeps(deps, state.ctx, state.limits, state.gate)
    try:
        return await research_section(shared, subtask, budget)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # one section's failure must not lose the others
        if not isinstance(exc, DeepSearcherError):
            logger.exception("researcher for %r failed", subtask.title)
        message = exc.message if isinstance(exc, DeepSearcherError) else repr(exc)
        return SectionResult(subtask, budget=budget, error=f"researcher failed: {message}")
