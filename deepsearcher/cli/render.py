"""Rich renderings for the CLI: load progress and summary, live search view, answers."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from deepsearcher.describe import describe_event
from deepsearcher.searcher import LoadProgress
from deepsearcher.types import LoadReport


class LoadProgressView:
    """Files parsed and chunks embedded, with rate and ETA, on stderr."""

    def __init__(self, console: Console, *, enabled: bool = True, verbose: bool = False) -> None:
        self.console = console
        self.enabled = enabled
        self.verbose = verbose
        self._progress = Progress(
            TextColumn("[bold]{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
            disable=not enabled,
        )
        self._files: TaskID | None = None
        self._chunks: TaskID | None = None
        self._chunk_total = 0

        self._started = False

    def __enter__(self) -> LoadProgressView:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._started:
            self._progress.__exit__(*exc)

    def update(self, p: LoadProgress) -> None:
        if not self.enabled:
            return
        prog = self._progress
        if not self._started:  # started on the first event so early errors print cleanly
            prog.__enter__()
            self._started = True
        if p.stage == "waiting":
            prog.console.print(f"[yellow]waiting:[/] {p.message}", highlight=False)
        elif p.stage == "discovered":
            self._files = prog.add_task("files", total=p.total, rate="")
            self._chunks = prog.add_task("chunks", total=0, rate="")
        elif p.stage == "hashed" and p.message == "unchanged" and self._files is not None:
            prog.advance(self._files)
            if self.verbose:
                prog.console.print(f"[dim]unchanged[/] {p.path}", highlight=False)
        elif p.stage == "failed":
            if self._files is not None:
                prog.advance(self._files)
            prog.console.print(f"[yellow]skipped[/] {p.path}: {p.message}", highlight=False)
        elif p.stage == "parsed" and self._chunks is not None:
            self._chunk_total += p.count
            prog.update(self._chunks, total=self._chunk_total)
        elif p.stage == "embedded" and self._chunks is not None:
            prog.advance(self._chunks, p.count)
            task = prog.tasks[self._chunks]
            if task.speed:
                prog.update(self._chunks, rate=f"{task.speed:.0f}/s")
        elif p.stage == "file_done" and self._files is not None:
            prog.advance(self._files)
            if self.verbose:
                prog.console.print(f"[green]loaded[/] {p.path} ({p.count} chunks)", highlight=False)
        elif p.stage == "pruned":
            prog.console.print(f"[dim]pruned[/] {p.path} ({p.count} chunks)", highlight=False)


def print_load_summary(console: Console, report: LoadReport) -> None:
    table = Table(title=f"collection {report.collection}", show_header=True)
    for col in (
        "new",
        "changed",
        "unchanged",
        "failed",
        "chunks +",
        "chunks -",
        "total",
        "seconds",
    ):
        table.add_column(col, justify="right")
    table.add_row(
        str(report.files_new),
        str(report.files_changed),
        str(report.files_unchanged),
        str(report.files_failed),
        str(report.chunks_added),
        str(report.chunks_removed),
        str(report.chunks_total),
        f"{report.seconds:.1f}",
    )
    console.print(table, soft_wrap=False)


class QueryView:
    """Live view of a deep search on stderr; the answer streams to stdout. On a terminal the
    streamed words are shown in a live region that the finished answer then replaces (with the
    citations attribution added, or the repaired text); a pipe gets the finished answer
    only."""

    def __init__(self, err: Console, out: Console, *, verbose: bool = False) -> None:
        self.err = err
        self.out = out
        self.verbose = verbose
        self.kept = 0
        self.dropped = 0
        self._status: Any = None
        self._answer_started = False
        self._streamed = ""
        self._live: Live | None = None

    def __enter__(self) -> QueryView:
        self._status = self.err.status("searching…")
        self._status.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop_status()
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)
            self._status = None

    def handle(self, event: Any) -> None:
        if event.type == "verdict":
            if event.kept:
                self.kept += 1
            else:
                self.dropped += 1
            if self._status is not None:
                self._status.update(f"judging passages: {self.kept} kept, {self.dropped} dropped")
        if event.type == "answer_delta":
            if not self._answer_started:
                self._stop_status()
                self.err.print(
                    f"[dim]kept {self.kept}, dropped {self.dropped}[/]\n", highlight=False
                )
                self._answer_started = True
                if self.out.is_terminal:
                    self._live = Live(
                        Text(""), console=self.out, auto_refresh=False, vertical_overflow="visible"
                    )
                    self._live.start()
            self._streamed += event.text
            if self._live is not None:
                self._live.update(Text(self._streamed), refresh=True)
            return
        line = describe_event(event, "terminal", verbose=self.verbose)
        if line is not None:
            self.err.print(line, highlight=False)

    def finish(self, answer: Any) -> None:
        self._stop_status()
        if self._live is not None:
            self._live.update(Text(answer.answer), refresh=True)
            self._live.stop()
            self._live = None
        elif answer.mode != "retrieval-only":  # retrieval-only: the sources below are the answer
            self.out.print(answer.answer, highlight=False, markup=False, soft_wrap=True)
        print_sources(self.out, answer)


def _first_token(answer: Any) -> str:
    first = getattr(answer, "first_token_s", None)
    return f" (first answer token {first:.1f}s)" if first is not None else ""


def print_sources(console: Console, answer: Any) -> None:
    # Without an LLM nobody has read the passages for the user: they are the answer, so they
    # are printed whole. After an answer, a one-line excerpt locates each citation.
    full = answer.mode == "retrieval-only"
    if answer.sources:
        console.print("\n[bold]Sources[/]")
        for s in answer.sources:
            where = s.label
            if s.start is not None and s.kind != "web":
                where += f" [{s.start}:{s.end}]"
            prefix = "(web) " if s.kind == "web" else ""
            how = " (attributed)" if getattr(s, "attributed", False) else ""
            # soft_wrap: a long path must not be broken by inserted newlines (copy-paste).
            console.print(
                f"[{s.n}] {prefix}{where}{how}", highlight=False, markup=False, soft_wrap=True
            )
            if full:
                text = "\n".join("    " + line for line in s.text.strip().splitlines())
                console.print(text, highlight=False, markup=False, soft_wrap=True)
            else:
                excerpt = " ".join(s.text.split())
                excerpt = excerpt if len(excerpt) <= 160 else excerpt[:159] + "…"
                console.print(f"    [dim]{escape(excerpt)}[/]", highlight=False, soft_wrap=True)
    u = answer.usage
    console.print(
        f"\n[dim]{answer.mode} · {answer.iterations} iteration(s) · {u.llm_calls} LLM calls · "
        f"{u.prompt_tokens}+{u.completion_tokens} tokens · {answer.seconds:.1f}s"
        f"{_first_token(answer)}"
        f"{' · cached (--no-cache asks afresh)' if getattr(answer, 'cached', False) else ''}[/]",
        highlight=False,
    )
    if answer.cut_short:
        console.print(f"[yellow]cut short:[/] {answer.cut_short}", highlight=False)
    evidence = getattr(answer, "evidence", "verified")
    if answer.mode == "deep" and evidence != "verified":
        # Naive RAG never verifies; for deep search this is the degradation to point out.
        console.print(f"[yellow]evidence:[/] {evidence}", highlight=False)
