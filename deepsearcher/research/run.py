"""A research run: brief -> plan -> researchers (concurrent, one shared budget) -> draft ->
quality check -> gap-filling rounds and revision -> ``Report``. The model is asked for the
brief, the plan and the researchers' work; the draft, the check and the report are code.

The stages stand in one row under this module and import nothing from each other: ``brief``,
``plan``, ``gather`` (the researchers, ``research.researcher``), ``write``, ``check`` and
``report``, each a function of the run's state and its dependencies (``state.RunState``,
``state.RunDeps``) returning a typed value (``ResearchBrief``, ``Plan``, ``Gathered``,
``Draft``, ``Quality``, ``Report``); what the run keeps of them is set here. Every stage
degrades visibly: a failed brief uses the request as its goal, an unusable plan becomes a
one-section plan, a researcher that fails leaves its section named as missing, a spent budget
writes the report from what was found and marks it cut short, a sentence no passage holds is
marked in the report instead of cited.

``stream_research`` is the run: it yields the stage events as they happen (researchers run
concurrently and emit into its one queue); the last is a ``ResearchDoneEvent`` carrying the
``Report``. Whoever wants only the report collects the stream (``DeepSearcher.aresearch``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from deepsearcher.config import Settings
from deepsearcher.errors import BudgetExceeded
from deepsearcher.llm import ChatModel
from deepsearcher.research.brief import make_brief
from deepsearcher.research.budget import MIN_RESEARCHER_CALLS
from deepsearcher.research.check import check, gaps_of
from deepsearcher.research.events import (
    QualityEvent,
    ResearchDoneEvent,
    ResearchEvent,
    RevisionEvent,
)
from deepsearcher.research.gather import gather
from deepsearcher.research.models import Report, ResearchRequest, Subtask
from deepsearcher.research.plan import make_plan
from deepsearcher.research.report import finish
from deepsearcher.research.state import (
    Limits,
    RunDeps,
    RunState,
    budget_for,
    limits_for,
    note,
    spent,
)
from deepsearcher.research.write import write_draft
from deepsearcher.retrieval import Retriever
from deepsearcher.tools.web import WebSearchTool

__all__ = ["Limits", "budget_for", "execute", "limits_for", "stream_research"]


async def execute(state: RunState, deps: RunDeps) -> Report:
    """The stages in order, then revision rounds while the check finds a question not
    covered or a contradiction not yet researched, and the budget allows; the report, also
    sent as the last event."""
    started = time.perf_counter()
    brief = await make_brief(state, deps)
    plan = await make_plan(state, deps, brief)
    state.merge(await gather(state, deps, plan.sections))
    draft = await write_draft(state, deps, plan)
    quality = check(state, draft, brief)
    deps.emit(QualityEvent(quality=quality, round=0))
    rounds = 0
    while rounds < state.limits.max_revisions:
        gaps = gaps_of(state, quality)
        if not gaps:
            break
        try:
            state.ctx.check_budget(MIN_RESEARCHER_CALLS)
        except BudgetExceeded as exc:
            spent(state, exc)
            note(state, deps, f"no revision: {exc.message}")
            break
        rounds += 1
        deps.emit(RevisionEvent(round=rounds, gaps=list(gaps)))
        before = len(state.findings)
        gap_tasks = [Subtask(f"Gap: {g}", g) for g in gaps[: state.limits.max_sections]]
        state.merge(await gather(state, deps, gap_tasks))
        if len(state.findings) == before:
            note(state, deps, "gap research found nothing new; keeping the draft")
            break
        draft = await write_draft(state, deps, plan)
        quality = check(state, draft, brief)
        deps.emit(QualityEvent(quality=quality, round=rounds))
    report = finish(state, deps, draft, quality, rounds, brief, plan, started)
    deps.emit(ResearchDoneEvent(report=report))
    return report


async def stream_research(
    settings: Settings,
    llm: ChatModel,
    retriever: Retriever,
    request: ResearchRequest,
    *,
    web: WebSearchTool | None = None,
) -> AsyncIterator[ResearchEvent]:
    """Yield the run's events as they happen; the last is a ``ResearchDoneEvent`` carrying
    the ``Report``. The run's one pump: the stages and the concurrent researchers emit into
    a queue that this generator reads, and closing the generator cancels the run."""
    queue: asyncio.Queue[ResearchEvent | BaseException] = asyncio.Queue()
    deps = RunDeps(settings, llm, retriever, request, queue.put_nowait, web)

    async def main() -> None:
        try:
            await execute(RunState.start(deps), deps)
        except BaseException as exc:
            queue.put_nowait(exc)
            raise

    task = asyncio.ensure_future(main())
    try:
        while True:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            yield item
            if item.type == "done":
                return
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
