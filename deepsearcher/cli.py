"""Command line: the only module that prints. Everything else logs or emits events."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from deepsearcher.config import Settings, load_settings
from deepsearcher.errors import DeepSearcherError
from deepsearcher.ingest import require_loaded
from deepsearcher.searcher import DeepSearcher

# Locals are hidden so an API key in a local variable never reaches a traceback.
app = typer.Typer(
    name="deepsearcher",
    help="Deep search over your private documents.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
collections_app = typer.Typer(help="List or drop collections.", pretty_exceptions_show_locals=False)
app.add_typer(collections_app, name="collections")

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="Config file (default: ./config.yaml).")
]
VerboseOpt = Annotated[int, typer.Option("--verbose", "-v", count=True, help="-v info, -vv debug.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout only.")]
CollectionOpt = Annotated[
    str | None, typer.Option("--collection", help="Collection name (default from config).")
]


def _err_console() -> Console:
    return Console(stderr=True)


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    root = logging.getLogger()
    root.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("deepsearcher").setLevel(level)
    logging.getLogger("loaders").setLevel(level)
    if verbose < 2:
        # Milvus Lite logs a full traceback when its database is locked, and pymilvus warns on
        # every Lite query iterator; we report both conditions ourselves, in one line.
        logging.getLogger("milvus_lite").setLevel(logging.CRITICAL)
        logging.getLogger("pymilvus").setLevel(logging.ERROR)


def fail(exc: DeepSearcherError) -> typer.Exit:
    con = _err_console()
    con.print(f"[bold red]error:[/] {exc.message}", highlight=False, soft_wrap=True)
    con.print(f"[yellow]hint:[/] {exc.hint}", highlight=False, soft_wrap=True)
    return typer.Exit(1)


def make_settings(config: Path | None, **overrides: Any) -> Settings:
    return load_settings(config, overrides=overrides)


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
    """Load documents into a collection (incremental: unchanged files are skipped)."""
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
                on_progress=view.update,
            )
        if as_json:
            typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
        else:
            print_load_summary(Console(), report)
        require_loaded(report)
    except DeepSearcherError as exc:
        raise fail(exc) from None


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
        bool | None, typer.Option("--web/--no-web", help="Also search the web (overrides config).")
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """Answer a question from the loaded documents, with numbered citations."""
    _setup_logging(verbose)
    from deepsearcher.cli_render import QueryView

    try:
        settings = make_settings(
            config, query={"agent": agent, "max_iter": max_iter, "top_k": top_k, "rerank": rerank}
        )
        options = {"collections": collection or None, "web": web}
        with DeepSearcher(settings) as ds:
            if as_json:
                answer = ds.query(question, **options)
                typer.echo(json.dumps(answer.to_dict(), ensure_ascii=False))
            else:
                with QueryView(_err_console(), Console(), verbose=verbose > 0) as view:
                    answer = asyncio.run(_consume(ds, question, view, options))
                view.finish(answer)
    except DeepSearcherError as exc:
        raise fail(exc) from None
    _report_lost_llm(settings, answer, explicit_agent=agent is not None)


def _report_lost_llm(settings: Settings, answer: Any, *, explicit_agent: bool) -> None:
    """An LLM that refused the connection: the passages were shown; now one error line and
    its hint. The exit code is 1 only when --agent asked for an LLM answer explicitly: with the
    configured default, the passages are the degraded answer and scripts keep working."""
    from deepsearcher.agents.base import LLM_UNREACHABLE
    from deepsearcher.llm import LLMUnreachableError, unreachable_hint

    if answer.mode != "retrieval-only" or not settings.llm_configured():
        return
    note = next((n for n in answer.notes if n.startswith(LLM_UNREACHABLE)), None)
    if note is not None:
        message = note.removeprefix(f"{LLM_UNREACHABLE}: ")
        exit_ = fail(LLMUnreachableError(message, unreachable_hint(settings.llm.base_url or "")))
        if explicit_agent:
            raise exit_


async def _consume(ds: DeepSearcher, question: str, view: Any, options: dict[str, Any]) -> Any:
    from deepsearcher.agents.base import LLM_UNREACHABLE

    answer = None
    async for event in ds.astream(question, **options):
        if event.type == "done":
            answer = event.answer  # type: ignore[attr-defined]
        elif not getattr(event, "message", "").startswith(LLM_UNREACHABLE):  # said once, below
            view.handle(event)
    return answer


# ---------------------------------------------------------------------------------------------
# collections
# ---------------------------------------------------------------------------------------------


@collections_app.callback(invoke_without_command=True)
def collections_list(
    ctx: typer.Context,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """List collections with their row counts, embedding model and description."""
    if ctx.invoked_subcommand is not None:
        return
    _setup_logging(verbose)
    try:
        with DeepSearcher(make_settings(config)) as ds:
            infos = ds.collections()
    except DeepSearcherError as exc:
        raise fail(exc) from None
    if as_json:
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
    Console().print(table)


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
    """Serve an OpenAI-compatible chat API (and /v1/query, /v1/load) over the collections."""
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
    """Print the effective settings (file < env < defaults) as commented YAML. No secrets:
    settings only name the environment variables that hold them."""
    from deepsearcher.config import render_config_yaml

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
