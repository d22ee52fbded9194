"""Stage 3, the research: one researcher per section, concurrently (at most
``max_concurrency``), each with its share of the run's one budget; their results merged in
plan order, so evidence ids (E1, E2...) do not depend on timing. A researcher that fails
leaves its section named as missing; the others go on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from deepsearcher.errors import DeepSearcherError
from deepsearcher.research.budget import MIN_RESEARCHER_CALLS, WRITE_RESERVE_CALLS
from deepsearcher.research.events import ResearcherFinishedEvent, ResearcherStartedEvent
from deepsearcher.research.models import Evidence, Finding, Hypothesis, SectionResult, Subtask
from deepsearcher.research.researcher import ResearcherDeps, research_section
from deepsearcher.research.state import RunDeps, RunState
from deepsearcher.research.text import norm

logger = logging.getLogger(__name__)


def shares(state: RunState, deps: RunDeps, subtasks: Sequence[Subtask]) -> list[int]:
    """Each subtask's LLM calls: what the budget has left after the writer's reserve, split
    by complexity, none more than one question's."""
    ctx = state.ctx
    left = ctx.max_llm_calls - ctx.usage.llm_calls - WRITE_RESERVE_CALLS
    total = sum(s.complexity for s in subtasks) or 1
    cap = deps.settings.query.max_llm_calls
    return [min(cap, max(0, left) * s.complexity // total) for s in subtasks]


async def research_sections(state: RunState, deps: RunDeps, subtasks: Sequence[Subtask]) -> None:
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
    for result in results:  # merged in plan order: evidence ids do not depend on timing
        merge(state, result)


async def _researcher(
    state: RunState, deps: RunDeps, subtask: Subtask, budget: int
) -> SectionResult:
    deps.emit(ResearcherStartedEvent(section=subtask.title, budget=budget))
    state.researchers_in_flight += 1
    state.max_researchers_in_flight = max(
        state.max_researchers_in_flight, state.researchers_in_flight
    )
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
    finally:
        state.researchers_in_flight -= 1


def merge(state: RunState, result: SectionResult) -> None:
    """Global evidence ids (E1...) for the result's passages, its findings de-duplicated
    against every earlier researcher's."""
    state.results.append(result)
    local: dict[str, str] = {}
    for ev in result.evidence:
        if ev.id not in state.evidence:
            ev_global = Evidence(**{**ev.__dict__, "id": f"E{len(state.evidence) + 1}"})
            state.evidence[ev.id] = ev_global
        local[ev.id] = state.evidence[ev.id].id
    seen = {norm(f.claim): f for f in state.findings}
    for finding in result.findings:
        ids = [local[k] for k in finding.evidence if k in local]
        if (same := seen.get(norm(finding.claim))) is not None:
            same.evidence += [i for i in ids if i not in same.evidence]
            continue
        merged = Finding(finding.claim, ids, finding.section, finding.expression)
        state.findings.append(merged)
        seen[norm(merged.claim)] = merged
    known = {norm(h.statement) for h in state.hypotheses}
    for h in result.hypotheses:
        if norm(h.statement) not in known:
            known.add(norm(h.statement))
            ids = [local[k] for k in h.evidence if k in local]
            state.hypotheses.append(Hypothesis(h.statement, h.status if ids else "open", ids))
