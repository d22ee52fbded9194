"""Command line: the only module that prints. Everything else logs or emits events."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from deepsearcher.cli_options import ConfigOpt, JsonOpt, VerboseOpt
from deepsearcher.config import Settings, load_settings
from deepsearcher.errors import DeepSearcherError
from deepsearcher.ingest import require_loaded
from deepsearcher.options import QueryOptions
from deepsearcher.searcher import DeepSearcher

# Locals are hidden so an API key in a local variable never reaches a traceback. Plain help
# (rich_markup_mode=None): typer's rich panels print a value type after every flag
# ("--json <bool>", "-v <int>", "--help <bool>"), which reads as if "-v 2" were accepted.
app = typer.Typer(
    name="deepsearcher",
    help="Deep search over your private documents.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    rich_markup_mode=None,
)
collections_app = typer.Typer(
    help="List or drop collections.",
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)
app.add_typer(collections_app, name="collections")

CollectionOpt = Annotated[
    str | None, typer.Option("--collection", help="Collection name (default from config).")
]


def _err_console() -> Console:
    # soft_wrap: without a terminal rich would break lines at 80 columns, mid-path.
    return Console(stderr=True, soft_wrap=True)


def _out_console() -> Console:
    return Console(soft_wrap=True)


# Libraries that log or print on their own; quiet below -vv (pymilvus warns about mvccTs on
# every Lite query iterator; Milvus Lite logs a traceback when its database is locked, which we
# report ourselves in one line).
_LIBRARY_LOGGERS = ("pymilvus", "milvus_lite", "jieba", "py.warnings")


class _Formatter(logging.Formatter):
    """``warning: …`` like the CLI's own ``error:`` lines; -v adds the logger name."""

    def __init__(self, with_name: bool) -> None:
        super().__init__()
        self.with_name = with_name

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        name = f" {record.name}" if self.with_name else ""
        return f"{record.levelname.lower()}{name}: {text}"


def _setup_logging(verbose: int, *, opens_store: bool = True) -> logging.Handler:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    if verbose < 2:
        # grpc's C core logs to stderr (chttp2 "too_many_pings" GOAWAYs from the keepalive the
        # Milvus client sets) and reads these variables once, when it is first imported.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    if opens_store:
        # Both would undo the levels set below if imported later: jieba (the BM25 analyzer
        # Milvus Lite runs in-process) adds its own stderr handler and a DEBUG level and prints
        # its dictionary loading on the first search; pymilvus installs its own handler and
        # levels with dictConfig. The command imports both anyway once it opens the store.
        import jieba  # noqa: F401
        import pymilvus  # noqa: F401

    root = logging.getLogger()
    root.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(with_name=verbose > 0))
    root.addHandler(handler)
    # Other libraries inherit the root level: nothing from them below -vv.
    root.setLevel(logging.WARNING if verbose > 1 else logging.CRITICAL)
    logging.getLogger("deepsearcher").setLevel(level)
    logging.getLogger("loaders").setLevel(level)
    logging.captureWarnings(True)
    for name in _LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING if verbose > 1 else logging.CRITICAL + 1)
    return handler


def fail(exc: DeepSearcherError) -> typer.Exit:
    con = _err_console()
    con.print(f"[bold red]error:[/] {exc.message}", highlight=False, soft_wrap=True)
    con.print(f"[yellow]hint:[/] {exc.hint}", highlight=False, soft_wrap=True)
    return typer.Exit(1)


def make_settings(
    config: Path | None, options: Mapping[str, tuple[str, Any]] | None = None
) -> Settings:
    """Settings with CLI options on top: ``{"query.top_k": ("--top-k", 8)}``; a ``None`` value
    was not given. The option names go into config errors ("from option --top-k")."""
    overrides: dict[str, dict[str, Any]] = {}
    for key, (_option, value) in (options or {}).items():
        section, _, field = key.partition(".")
        overrides.setdefault(section, {})[field] = value
    names = {key: option for key, (option, _value) in (options or {}).items()}
    return load_settings(config, overrides=overrides, override_options=names)


# ---------------------------------------------------------------------------------------------
# load
# ---------------------------------------------------------------------------------------------


@app.command()
def load(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to load.")],
    collection: CollectionOpt = None,
    description: Annotated[
        str | None, typer.Option(help="What the collection holds (used to route questions).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-embed every file.")] = False,
    prune: Annotated[bool, typer.Option("--prune", help="Remove chunks of deleted files.")] = False,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Drop and recreate the collection.")
    ] = False,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """Load documents into a collection. Incremental: unchanged files are skipped, and an
    interrupted load resumes when run again."""
    _setup_logging(verbose)
    from deepsearcher.cli_render import LoadProgressView, print_load_summary

    try:
        settings = make_settings(config)
        view = LoadProgressView(_err_console(), enabled=not as_json, verbose=verbose > 0)
        with DeepSearcher(settings) as ds, view:
            report = ds.load(
                paths,
                collection,
                description=description,
                force=force,
                prune=prune,
                rebuild=rebuild,
                # With --json nothing renders progress, so skipped files are logged instead.
                on_progress=None if as_json else view.update,
            )
        if as_json:
            typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
        else:
            print_load_summary(_out_console(), report)
        require_loaded(report)
    except DeepSearcherError as exc:
        raise fail(exc) from None
    except KeyboardInterrupt:
        # Each file's hash is recorded only after its chunks are stored, so a rerun redoes
        # exactly the unfinished files. fail() prints the two lines; 130 is the shell's SIGINT code.
        fail(
            DeepSearcherError(
                "load interrupted",
                "run the same command again to resume: stored files are skipped, "
                "the others are loaded",
            )
        )
        raise typer.Exit(130) from None


# ---------------------------------------------------------------------------------------------
# query
# ---------------------------------------------------------------------------------------------


@app.command()
def query(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    collection: Annotated[
        list[str] | None,
        typer.Option("--collection", help="Search only these collections (repeatable)."),
    ] = None,
    agent: Annotated[str | None, typer.Option(help="deep (default) or naive.")] = None,
    max_iter: Annotated[
        int | None, typer.Option("--max-iter", min=1, help="Search iterations.")
    ] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", min=1, help="Chunks per query.")] = None,
    rerank: Annotated[str | None, typer.Option(help="llm, llm-batch or none.")] = None,
    web: Annotated[
        bool | None,
        typer.Option("--web/--no-web", help="Also search the web (overrides config)."),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """Answer a question from the loaded documents. The answer cites passages as [n]; without an
    LLM the passages that match best are printed in full."""
    handler = _setup_logging(verbose)
    from deepsearcher.cli_render import QueryView

    try:
        if not question.strip():
            raise DeepSearcherError(
                "the question is empty", 'ask something: deepsearcher query "Who approves travel?"'
            )
        settings = make_settings(
            config,
            {
                "query.agent": ("--agent", agent),
                "query.max_iter": ("--max-iter", max_iter),
                "query.top_k": ("--top-k", top_k),
                "query.rerank": ("--rerank", rerank),
            },
        )
        options = QueryOptions(collections=collection or None, web=web)
        with DeepSearcher(settings) as ds:
            if as_json:
                answer = ds.query(question, options)
                typer.echo(json.dumps(answer.to_dict(), ensure_ascii=False))
            else:
                handler.addFilter(_drop_rendered_notes)
                with QueryView(_err_console(), _out_console(), verbose=verbose > 0) as view:
                    answer = asyncio.run(_consume(ds, question, view, options))
                view.finish(answer)
    except DeepSearcherError as exc:
        raise fail(exc) from None
    _report_lost_llm(settings, answer, explicit_agent=agent is not None)


def _report_lost_llm(settings: Settings, answer: Any, *, explicit_agent: bool) -> None:
    """An LLM that refused the connection: the passages were shown; now one error line and
    its hint. The exit code is 1 only when --agent asked for an LLM answer explicitly: with the
    configured default, the passages are the degraded answer and scripts keep working."""
    from deepsearcher.llm import LLMUnreachableError, unreachable_hint
    from deepsearcher.run_context import LLM_UNREACHABLE

    if answer.mode != "retrieval-only" or not settings.llm_configured():
        return
    note = next((n for n in answer.notes if n.startswith(LLM_UNREACHABLE)), None)
    if note is not None:
        message = note.removeprefix(f"{LLM_UNREACHABLE}: ")
        exit_ = fail(LLMUnreachableError(message, unreachable_hint(settings.llm.base_url or "")))
        if explicit_agent:
            raise exit_


def _drop_rendered_notes(record: logging.LogRecord) -> bool:
    # The live view prints each note event; the same note's log record (shown at -v) would
    # print it a second time.
    return not (record.name == "deepsearcher.run_context" and record.funcName == "note")


async def _consume(ds: DeepSearcher, question: str, view: Any, options: QueryOptions) -> Any:
    from deepsearcher.run_context import LLM_UNREACHABLE

    answer = None
    async for event in ds.astream(question, options):
        if event.type == "done":
            answer = event.answer
        # The lost LLM is said once, by _report_lost_llm.
        elif not (event.type == "note" and event.message.startswith(LLM_UNREACHABLE)):
            view.handle(event)
    return answer


# ---------------------------------------------------------------------------------------------
# collections
# ---------------------------------------------------------------------------------------------


@collections_app.callback(invoke_without_command=True)
def collections_list(
    ctx: typer.Context,
    config: ConfigOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON array on stdout only, an object per collection "
            "(name, files, chunks, embedding_model, description).",
        ),
    ] = False,
    verbose: VerboseOpt = 0,
) -> None:
    """List collections with their files, chunks, embedding model and description."""
    if ctx.invoked_subcommand is not None:
        return
    _setup_logging(verbose)
    try:
        with DeepSearcher(make_settings(config)) as ds:
            infos = ds.collections()
    except DeepSearcherError as exc:
        raise fail(exc) from None
    if as_json:  # an array, as --help says: the collections are the only content
        typer.echo(
            json.dumps(
                [
                    {
                        "name": i.name,
                        "chunks": i.rows,
                        "files": i.files,
                        "embedding_model": i.meta.embedding_model if i.meta else None,
                        "description": i.meta.description if i.meta else None,
                    }
                    for i in infos
                ]
            )
        )
        return
    if not infos:
        typer.echo("no collections yet; load some: deepsearcher load PATH")
        return
    table = Table("collection", "files", "chunks", "embedding model", "description")
    for i in infos:
        table.add_row(
            i.name,
            str(i.files),
            str(i.rows),
            i.meta.embedding_model if i.meta else "?",
            (i.meta.description if i.meta else "") or "",
        )
    _out_console().print(table, soft_wrap=False)


@collections_app.command("drop")
def collections_drop(
    name: Annotated[str, typer.Argument(help="Collection to drop.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Drop a collection and its file manifest."""
    try:
        with DeepSearcher(make_settings(config)) as ds:
            if name not in {i.name for i in ds.collections()}:
                from deepsearcher.errors import CollectionNotFoundError

                raise CollectionNotFoundError(
                    f"collection '{name}' does not exist", "list them: deepsearcher collections"
                )
            if not yes and not typer.confirm(f"Drop collection '{name}' and all its chunks?"):
                raise typer.Exit(1)
            ds.drop_collection(name)
    except DeepSearcherError as exc:
        raise fail(exc) from None
    typer.echo(f"dropped {name}")


# ---------------------------------------------------------------------------------------------
# serve
# ---------------------------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default server.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default server.port).")] = None,
    insecure: Annotated[
        bool,
        typer.Option("--insecure", help="Allow a non-loopback bind without DEEPSEARCHER_API_KEYS."),
    ] = False,
    config: ConfigOpt = None,
    verbose: VerboseOpt = 0,
) -> None:
    """Serve an OpenAI-compatible chat API over the collections. Also /v1/query and /v1/load."""
    _setup_logging(verbose)
    from deepsearcher.server import run_server

    try:
        run_server(
            make_settings(config),
            host=host,
            port=port,
            insecure=insecure,
            log_level="debug" if verbose > 1 else "info",
        )
    except DeepSearcherError as exc:
        raise fail(exc) from None


@app.command("config")
def show_config(config: ConfigOpt = None) -> None:
    """Print the effective settings as commented YAML. Built-in defaults are overridden by the
    config file, which DEEPSEARCHER_<SECTION>__<KEY> environment variables override in turn.
    No secrets: settings only name the environment variables that hold them."""
    from deepsearcher.config import render_config_yaml

    _setup_logging(0, opens_store=False)  # for warnings about misspelt DEEPSEARCHER_* variables
    try:
        typer.echo(render_config_yaml(make_settings(config)))
    except DeepSearcherError as exc:
        raise fail(exc) from None


def _register_eval() -> None:
    # Imported here: cli_eval builds on this module's helpers (fail, make_settings, options).
    from deepsearcher.cli_eval import eval_command

    app.command("eval")(eval_command)


_register_eval()


def main() -> None:
    """Console-script entry point."""
    # Windows consoles default to a legacy code page; asyncio's default policy is fine elsewhere.
    if sys.platform == "win32":  # pragma: no cover
        asyncio.set_event_loop_policy(asyncio.WindowsSelectorEventLoopPolicy())  # type: ignore[attr-defined]
    app()
