"""Stage 2, the plan: up to ``max_sections`` sections, each a research question with its
complexity (its share of the budget). An unusable plan becomes one section: the request."""

from __future__ import annotations

from functools import partial

from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.prompting import ask, escape_document, messages_for
from deepsearcher.research import prompts
from deepsearcher.research.events import PlanEvent
from deepsearcher.research.models import Plan, ResearchBrief, Subtask
from deepsearcher.research.parsing import PLAN_SCHEMA, parse_plan
from deepsearcher.research.state import RunDeps, RunState, note, spent


async def make_plan(state: RunState, deps: RunDeps, brief: ResearchBrief) -> Plan:
    max_sections = state.limits.max_sections
    try:
        sections = await ask(
            state.ctx,
            messages_for(prompts.PLAN.format(max_sections=max_sections, brief=brief_text(brief))),
            partial(parse_plan, max_sections=max_sections),
            schema=PLAN_SCHEMA,
        )
        plan = Plan(sections)
    except (LLMError, BudgetExceeded) as exc:
        spent(state, exc)
        message = f"plan failed ({exc.message}); researching one section"
        note(state, deps, message)
        plan = Plan([Subtask(brief.goal, deps.request.request, 2)], note=message)
    deps.emit(PlanEvent(plan=plan))
    return plan


def brief_text(brief: ResearchBrief) -> str:
    """The brief as the later stages' prompts show it (escaped)."""
    lines = [f"Goal: {brief.goal}"]
    if brief.scope:
        lines.append(f"Scope: {brief.scope}")
    if brief.audience:
        lines.append(f"Audience: {brief.audience}")
    lines += [f"Must answer: {q}" for q in brief.must_answer]
    lines += [f"Constraint: {c}" for c in brief.constraints]
    lines += [f"Assumption: {a}" for a in brief.assumptions]
    return escape_document("\n".join(lines))
