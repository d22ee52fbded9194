"""``deepsearcher research``: a cited report over the loaded documents (preview).

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

from deepsearcher.cli.console import err_console, reported_errors
from deepsearcher.cli.logs import setup_logging
from deepsearcher.cli.options import ConfigOpt, JsonOpt, VerboseOpt, make_settings
from deepsearcher.config import Settings
from deepsearcher.describe import describe_event
from deepsearcher.errors import DeepSearcherError
from deepsearcher.research import Report, ResearchEvent, ResearchRequest
from deepsearcher.searcher import DeepSearcher

RequestArg = Annotated[str, typer.Argument(help="What the report should find out.")]
CollectionsOpt = Annotated[
    list[str] | None,
    typer.Option("--collection", help="Search only these collections (repeatable)."),
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out", help="Write the report to this file (with --json the JSON also goes to stdout)."
    ),
]
MaxSectionsOpt = Annotated[
    int | None,
    typer.Option("--max-sections", help="Sections of the plan [research.max_sections]."),
]
MaxRevisionsOpt = Annotated[
    int | None,
    typer.Option("--max-revisions", help="Gap-filling rounds [research.max_revisions]."),
]
MaxLLMCallsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-llm-calls",
        help="The run's LLM-call budget [research.max_llm_calls; unset: "
        "research.budget_factor x query.max_llm_calls].",
    ),
]
ConcurrencyOpt = Annotated[
    int | None,
    typer.Option("--concurrency", help="Researchers running at once [research.max_concurrency]."),
]
ToolStepsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tool-steps",
        help="Replies of each researcher's tool loop after its deep search; 0: off "
        "[research.max_tool_steps].",
    ),
]
HypothesesOpt = Annotated[
    int | None,
    typer.Option(
        "--max-hypotheses",
        help="Hypotheses each researcher tests for and against, when the tool loop is on "
        "[research.max_hypotheses].",
    ),
]
FiguresOpt = Annotated[
    bool,
    typer.Option(
        "--figures",
        help="Derive figures (sums, ratios, growth) from the findings with the calculator; "
        "every number must appear in the evidence it cites.",
    ),
]
WebOpt = Annotated[
    bool | None,
    typer.Option(
        "--web/--no-web",
        help="Researchers may also search the web and fetch the pages found [web_search.enabled].",
        show_default=False,
    ),
]
ClarifyOpt = Annotated[
    bool | None,
    typer.Option(
        "--clarify/--no-clarify",
        help="Ask the brief's clarifying question when the request is ambiguous "
        "[research.clarify]; never when stdin is not a terminal: the brief then records "
        "the assumption it made.",
        show_default=False,
    ),
]


def research_command(
    request: RequestArg,
    collection: CollectionsOpt = None,
    out: OutOpt = None,
    max_sections: MaxSectionsOpt = None,
    max_revisions: MaxRevisionsOpt = None,
    max_llm_calls: MaxLLMCallsOpt = None,
    concurrency: ConcurrencyOpt = None,
    max_tool_steps: ToolStepsOpt = None,
    max_hypotheses: HypothesesOpt = None,
    figures: FiguresOpt = False,
    web: WebOpt = None,
    clarify: ClarifyOpt = None,
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
        # The flags travel in the request, which checks each against the research.* setting
        # it overrides (the ranges are declared there, once).
        settings = make_settings(config)
        req = ResearchRequest(
            request,
            collections=collection or None,
            max_sections=max_sections,
            max_revisions=max_revisions,
            max_llm_calls=max_llm_calls,
            max_concurrency=concurrency,
            max_tool_steps=max_tool_steps,
            max_hypotheses=max_hypotheses,
            figures=figures,
            web=web,
        )
        ask = settings.research.clarify if clarify is None else clarify
        err = err_console()
        report = _run(settings, req, ask, err, verbose > 0)
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


def _run(
    settings: Settings, req: ResearchRequest, ask: bool, err: Console, verbose: bool
) -> Report:
    """The report, with each stage printed on ``err`` under a spinner, and the brief's
    clarifying question asked at the terminal when there is one."""
    with (
        DeepSearcher(settings) as ds,
        err.status("research: writing the brief", spinner="dots") as status,
    ):

        def show(event: ResearchEvent) -> None:
            line = _stage_line(event, verbose)
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

        if ask and sys.stdin.isatty():
            req = replace(req, clarify=ask_user)
        return asyncio.run(ds.aresearch(req, on_event=show))


def _stage_line(event: ResearchEvent, verbose: bool) -> str | None:
    return describe_event(event, "terminal", verbose=verbose)


def _summary(err: Console, calls: int, seconds: float, cut_short: str | None) -> None:
    cut = f" — cut short: {cut_short}" if cut_short else ""
    err.print(f"{calls} LLM calls, {seconds:.1f}s{cut}", highlight=False, style="dim")
