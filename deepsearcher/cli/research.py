"""``deepsearcher research``: a cited report over the loaded documents (issue #14, preview).

Registered in ``commands`` as ``app.command("research")(research_command)``. It prints the
stages on stderr as they happen and the report (Markdown, or ``--json``) on stdout or to
``--out`` (with ``--json``, stdout carries the JSON either way, so a script that reads it
gets the report); the work happens in ``deepsearcher.research``."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from deepsearcher.cli.console import err_console, reported_errors
from deepsearcher.cli.logs import setup_logging
from deepsearcher.cli.options import ConfigOpt, JsonOpt, VerboseOpt, make_settings
from deepsearcher.errors import DeepSearcherError
from deepsearcher.research import ResearchEvent, ResearchRequest
from deepsearcher.searcher import DeepSearcher


def research_command(
    request: Annotated[str, typer.Argument(help="What the report should find out.")],
    collection: Annotated[
        list[str] | None,
        typer.Option("--collection", help="Search only these collections (repeatable)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the report to this file (with --json the JSON also goes to stdout).",
        ),
    ] = None,
    max_sections: Annotated[
        int | None,
        typer.Option(
            "--max-sections", min=1, max=12, help="Sections of the plan [research.max_sections]."
        ),
    ] = None,
    max_revisions: Annotated[
        int | None,
        typer.Option(
            "--max-revisions", min=0, max=5, help="Gap-filling rounds [research.max_revisions]."
        ),
    ] = None,
    max_llm_calls: Annotated[
        int | None,
        typer.Option(
            "--max-llm-calls",
            min=5,
            help="The run's LLM-call budget [research.max_llm_calls; unset: "
            "research.budget_factor x query.max_llm_calls].",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency", min=1, help="Researchers running at once [research.max_concurrency]."
        ),
    ] = None,
    figures: Annotated[
        bool,
        typer.Option(
            "--figures",
            help="Derive figures (sums, ratios, growth) from the findings with the calculator; "
            "every number must appear in the evidence it cites.",
        ),
    ] = False,
    web: Annotated[
        bool | None,
        typer.Option(
            "--web/--no-web",
            help="Researchers may also search the web and fetch the pages found "
            "[web_search.enabled].",
            show_default=False,
        ),
    ] = None,
    clarify: Annotated[
        bool | None,
        typer.Option(
            "--clarify/--no-clarify",
            help="Ask the brief's clarifying question when the request is ambiguous "
            "[research.clarify]; never when stdin is not a terminal: the brief then records "
            "the assumption it made.",
            show_default=False,
        ),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """Write a cited research report: a brief, a plan of sections researched concurrently by
    the deep-search loop, a quality check and gap-filling revisions. Preview."""
    setup_logging(verbose)
    with reported_errors():
        if not request.strip():
            raise DeepSearcherError(
                "the request is empty",
                'say what to research: deepsearcher research "our exposure to the battery supplier"',
            )
        # Flags go into the settings (config.yaml < env < flags); the request takes its
        # limits from there.
        settings = make_settings(
            config,
            {
                "research.max_sections": ("--max-sections", max_sections),
                "research.max_revisions": ("--max-revisions", max_revisions),
                "research.max_llm_calls": ("--max-llm-calls", max_llm_calls),
                "research.max_concurrency": ("--concurrency", concurrency),
                "research.clarify": ("--clarify", clarify),
            },
        )
        req = ResearchRequest(request, collections=collection or None, figures=figures)
        err = err_console()
        with (
            DeepSearcher(settings) as ds,
            err.status("research: writing the brief", spinner="dots") as status,
        ):

            def show(event: ResearchEvent) -> None:
                line = _stage_line(event, verbose > 0)
                if line:
                    err.print(line, highlight=False)
                status.update(f"research: {event.type.replace('_', ' ')}")

            async def ask_user(question: str) -> str | None:
                status.stop()  # the spinner would overwrite the prompt
                try:
                    reply = await asyncio.to_thread(err.input, f"[bold]? {question}[/] ")
                finally:
                    status.start()
                return reply.strip() or None

            if settings.research.clarify and sys.stdin.isatty():
                req = replace(req, clarify=ask_user)
            report = asyncio.run(ds.aresearch(req, web=web, on_event=show))
        text = (
            json.dumps(report.to_dict(), ensure_ascii=False, indent=2)
            if as_json
            else report.to_markdown()
        )
        if out is not None:
            out.write_text(text, encoding="utf-8")
            err.print(f"report written to {out}", highlight=False)
        if out is None or as_json:  # --json: stdout is the machine's channel, --out or not
            typer.echo(text)
        _summary(err, report.usage.llm_calls, report.seconds, report.cut_short)


def _stage_line(event: ResearchEvent, verbose: bool) -> str | None:
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


def _summary(err: Console, calls: int, seconds: float, cut_short: str | None) -> None:
    cut = f" — cut short: {cut_short}" if cut_short else ""
    err.print(f"{calls} LLM calls, {seconds:.1f}s{cut}", highlight=False, style="dim")
