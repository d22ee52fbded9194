"""``deepsearcher eval``: recall, answer quality and cost over a questions file.

Registered in ``commands`` as ``app.command("eval")(eval_command)``; kept apart so that module
stays thin. Like the other commands it prints; the work happens in ``deepsearcher.evaluation``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deepsearcher.cli.console import err_console, reported_errors
from deepsearcher.cli.logs import setup_logging
from deepsearcher.cli.options import ConfigOpt, VerboseOpt, make_settings
from deepsearcher.errors import ConfigError
from deepsearcher.searcher import DeepSearcher


def parse_int_list(value: str, option: str) -> list[int]:
    """``"2,5,10"`` -> ``[2, 5, 10]``; every item a positive integer."""
    try:
        items = [int(v) for v in value.replace(" ", "").split(",") if v]
    except ValueError:
        items = []
    if not items or any(i < 1 for i in items):
        raise ConfigError(
            f"invalid {option} '{value}'",
            f"give positive integers separated by commas, e.g. {option} 2,5,10",
        )
    return sorted(dict.fromkeys(items))


KOpt = Annotated[
    str,
    typer.Option(
        "--k",
        help="Cut-offs for recall@k, comma-separated: gold documents among the top k chunks "
        "(chunk R@k) and among the top k distinct documents (doc R@k).",
    ),
]
MaxIterOpt = Annotated[
    str | None,
    typer.Option(
        "--max-iter",
        help="Deep search iterations: N, or 1,2,3 to compare (default from config).",
    ),
]
RetrievalOnlyOpt = Annotated[
    bool,
    typer.Option(
        "--retrieval-only",
        help="Dense vs hybrid search recall, no LLM (automatic without one).",
    ),
]


def eval_command(
    questions: Annotated[
        Path, typer.Argument(help="Questions JSONL (id, question, answers, gold_doc_ids).")
    ],
    corpus: Annotated[
        Path, typer.Option("--corpus", help="Folder holding the documents the gold_doc_ids name.")
    ],
    collection: Annotated[
        str | None,
        typer.Option(
            "--collection", help="Collection to load and search (default: eval_<dataset>)."
        ),
    ] = None,
    agent: Annotated[str, typer.Option("--agent", help="deep, naive or both.")] = "both",
    k: KOpt = "2,5,10",
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the first N questions.")
    ] = None,
    max_iter: MaxIterOpt = None,
    out: Annotated[
        Path, typer.Option("--out", help="Folder for results.jsonl, summary.json and plots.")
    ] = Path("eval-out"),
    retrieval_only: RetrievalOnlyOpt = False,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Questions in flight at once.")
    ] = 4,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the summary as one JSON object on stdout only."),
    ] = False,
    config: ConfigOpt = None,
    verbose: VerboseOpt = 0,
) -> None:
    """Measure recall@k, answers and cost on a questions file. EM/F1 need an LLM. The corpus
    is loaded first (incrementally, so an unchanged corpus costs only hashing)."""
    from deepsearcher.cli.render import LoadProgressView

    setup_logging(verbose)
    from deepsearcher.evaluation.report import markdown_report, summary_json, write_outputs
    from deepsearcher.evaluation.runner import EvalOptions, load_corpus, run_eval

    with reported_errors():
        if agent not in ("deep", "naive", "both"):
            raise ConfigError(f"unknown agent '{agent}'", "use --agent deep, naive or both")
        opts = EvalOptions(
            questions=questions,
            corpus=corpus,
            collection=collection,
            agents=["deep", "naive"] if agent == "both" else [agent],
            ks=parse_int_list(k, "--k"),
            limit=limit,
            max_iters=parse_int_list(max_iter, "--max-iter") if max_iter else [],
            retrieval_only=retrieval_only,
            concurrency=concurrency,
        )
        settings = make_settings(config)
        err = err_console()
        with DeepSearcher(settings) as ds:
            with LoadProgressView(err, verbose=verbose > 0) as view:
                loaded = asyncio.run(load_corpus(ds, opts, view.update))
            with _QuestionProgress(err) as progress:
                result = asyncio.run(run_eval(ds, opts, loaded=loaded, on_result=progress.advance))
        markdown = markdown_report(result, title=f"{questions.name} on {result.collection}")
        files = write_outputs(result, out, markdown)
    if as_json:
        typer.echo(json.dumps(summary_json(result), ensure_ascii=False))
    else:
        Console().print(markdown, markup=False, highlight=False, soft_wrap=True)
    written = ", ".join(str(p) for p in files.values())
    err.print(f"[dim]wrote {written}[/]", highlight=False, soft_wrap=True)


class _QuestionProgress:
    """Questions done (per agent/mode run), with the running error count."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]questions"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[errors]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self._task = self._progress.add_task("questions", total=None, errors="")
        self._errors = 0

    def __enter__(self) -> _QuestionProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.__exit__(*exc)

    def advance(self, row: dict[str, Any], total: int) -> None:
        if row.get("error"):
            self._errors += 1
        errors = f"[red]{self._errors} failed[/]" if self._errors else ""
        self._progress.update(self._task, total=total, advance=1, errors=errors)
