"""Events as text: the one place a search or research event becomes a line a person reads.

Every front end describes events through ``describe_event``: the CLI in the ``terminal`` style
(Rich markup, indented under its stage, model text escaped so a "[" in it stays text), the MCP
progress notifications and the research chat's reasoning pane in the ``line`` style (one plain
line each). ``None`` means the event is not worth a line in that style.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from rich.markup import escape

from deepsearcher.research import ResearchEvent
from deepsearcher.types import Event, HopEvent

Style = Literal["line", "terminal"]


def describe_event(
    event: Event | ResearchEvent, style: Style = "line", *, verbose: bool = False
) -> str | None:
    """``event`` as text in ``style``; ``verbose`` adds the terminal's per-step detail (each
    relevance verdict, each researcher starting, each tool call)."""
    if isinstance(event, ResearchEvent):
        if style == "terminal":
            return _research_terminal(event, verbose)
        return _research_line(event)
    if style == "terminal":
        return _search_terminal(event, verbose)
    return _search_line(event)


# -- search (the deep-search loop's events) ---------------------------------------------------


def _steps(steps: list[str], depends_on: list[list[int]]) -> list[str]:
    return [
        f"{i}. {step}" + (f" (after {', '.join(map(str, deps))})" if deps else "")
        for i, (step, deps) in enumerate(zip(steps, depends_on, strict=False), start=1)
    ]


def _found(event: HopEvent) -> str:
    if event.status != "answered":
        return f"lookup {event.index}: {event.query} → {event.status}"
    where = (
        f" ({Path(event.source).name}{f' p. {event.page}' if event.page else ''})"
        if event.source
        else ""
    )
    return f"lookup {event.index}: {event.query} → {event.answer}{where}"


def _search_line(event: Event) -> str | None:
    if event.type == "plan":
        return "plan: " + "; ".join(_steps(event.steps, event.depends_on))
    if event.type == "hop":
        return _found(event)
    if event.type == "sub_queries":
        return f"sub-queries: {'; '.join(event.queries)}"
    if event.type == "search":
        return f"searched {event.query!r}: {event.hits} hits, {event.new} new"
    if event.type == "verdict":
        return f"{'kept' if event.kept else 'dropped'} {event.source}"
    if event.type == "reflection":
        gaps = "; ".join(event.gap_queries) or "none"
        return f"reflection: follow-up queries {gaps}"
    if event.type == "note":
        return f"note: {event.message}"
    if event.type == "done":
        return "done"
    return None  # answer deltas: the answer itself, not a step


def _search_terminal(event: Event, verbose: bool) -> str | None:
    if event.type == "plan":
        if len(event.steps) < 2 and not verbose:
            return None  # one lookup: the question itself, nothing to show
        lines = "".join(f"\n   {escape(s)}" for s in _steps(event.steps, event.depends_on))
        return f"[bold cyan]▸ plan[/]{lines}"
    if event.type == "hop":
        mark = "[green]✓[/]" if event.status == "answered" else "[yellow]∅[/]"
        return f"   {mark} {escape(_found(event))}"
    if event.type == "sub_queries":
        label = "sub-queries" if event.iteration == 1 else f"iteration {event.iteration}"
        bullets = "".join(f"\n   • {escape(q)}" for q in event.queries)
        return f"[bold cyan]▸ {label}[/]{bullets}"
    if event.type == "search":
        return f"   [dim]search[/] {escape(repr(event.query))}: {event.hits} hits, {event.new} new"
    if event.type == "verdict":
        if not verbose:
            return None
        mark = "[green]YES[/]" if event.kept else "[red]NO [/]"
        margin = "" if event.margin is None else f" [dim](margin {event.margin:+.2f})[/]"
        return f"   {mark} {escape(event.source)}{margin}"
    if event.type == "reflection":
        if event.gap_queries:
            return f"[bold cyan]▸ gaps found[/] → {len(event.gap_queries)} new queries"
        return "[bold cyan]▸ reflection[/]: evidence complete"
    if event.type == "note":
        return f"[yellow]note:[/] {escape(event.message)}"
    return None


# -- research (the report's stages) -----------------------------------------------------------


def _research_line(event: ResearchEvent) -> str | None:
    if event.type == "brief" and event.brief is not None:
        return f"Brief: {event.brief.goal} ({len(event.brief.must_answer)} question(s))"
    if event.type == "plan" and event.plan is not None:
        titles = "; ".join(s.title for s in event.plan.sections)
        return f"Plan: {len(event.plan.sections)} section(s): {titles}"
    if event.type == "researcher_started":
        return f"Researching: {event.section}"
    if event.type == "researcher_finished":
        if event.error:
            return f"Section '{event.section}' missing: {event.error}"
        return f"Done: {event.section} ({event.findings} finding(s), {event.calls} calls)"
    if event.type == "quality" and event.quality is not None:
        q = event.quality
        return (
            f"Check: coverage {q.coverage:.0%}, {len(q.uncited_sentences)} uncited, "
            f"{len(q.contradictions)} conflicting source pair(s)"
        )
    if event.type == "revision":
        return f"Revision {event.round}: researching {'; '.join(event.gaps)}"
    if event.type == "note":
        return f"Note: {event.message}"
    if event.type == "tool_call":
        return f"Tool {event.tool}: {event.result}"
    return None


def _research_terminal(event: ResearchEvent, verbose: bool) -> str | None:
    # Goals, titles, tool arguments and notes come from the model: escaped, so a "[" in them
    # is shown as text rather than read as Rich markup.
    if event.type == "brief" and event.brief is not None:
        goal = escape(event.brief.goal)
        return f"[bold]brief[/] {goal} ({len(event.brief.must_answer)} question(s))"
    if event.type == "plan" and event.plan is not None:
        titles = escape(", ".join(s.title for s in event.plan.sections))
        return f"[bold]plan[/] {len(event.plan.sections)} section(s): {titles}"
    if event.type == "researcher_started":
        if not verbose:
            return None
        return f"  [cyan]→[/] {escape(event.section)} (budget {event.budget} calls)"
    if event.type == "researcher_finished":
        if event.error:
            return f"  [red]✗[/] {escape(event.section)}: {escape(event.error)}"
        cut = f", cut short: {escape(event.cut_short)}" if event.cut_short else ""
        return (
            f"  [green]✓[/] {escape(event.section)}: {event.findings} finding(s), "
            f"{event.calls} calls{cut}"
        )
    if event.type == "tool_call":
        if not verbose:
            return None
        mark = "[red]✗[/]" if event.error else "[dim]·[/]"
        args = escape(json.dumps(event.arguments, ensure_ascii=False)[:120])
        result = escape(" ".join(event.result.split())[:120])
        return f"    {mark} {escape(event.section or '')} {escape(event.tool)} {args} → {result}"
    if event.type == "hypothesis" and event.hypothesis is not None:
        h = event.hypothesis
        return f"  [magenta]hypothesis[/] {h.status}: {escape(h.statement)}"
    if event.type == "quality" and event.quality is not None:
        q = event.quality
        return (
            f"[bold]check[/] coverage {q.coverage:.0%}, {len(q.uncited_sentences)} uncited, "
            f"{len(q.weak_citations)} weakly supported, "
            f"{len(q.contradictions)} conflicting source pair(s)"
        )
    if event.type == "revision":
        return f"[bold]revision {event.round}[/] researching: {escape(', '.join(event.gaps))}"
    if event.type == "note":
        return f"[yellow]note:[/] {escape(event.message)}"
    return None
