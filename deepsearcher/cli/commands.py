"""The typer app and its commands: load, query, collections, serve, mcp, config (eval is in
``eval``). The cli package is the only one that prints; everything else logs or emits events."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from deepsearcher.cli.console import err_console, fail, out_console, reported_errors
from deepsearcher.cli.eval import eval_command
from deepsearcher.cli.logs import setup_logging
from deepsearcher.cli.options import CollectionOpt, ConfigOpt, JsonOpt, VerboseOpt, make_settings
from deepsearcher.cli.research import research_command
from deepsearcher.config import Settings
from deepsearcher.errors import CollectionNotFoundError, DeepSearcherError
from deepsearcher.filters import Filter, FilterError
from deepsearcher.options import LoadOptions, QueryOptions
from deepsearcher.searcher import DeepSearcher, require_loaded

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
    wait: Annotated[
        bool,
        typer.Option(
            "--wait/--no-wait",
            help="Wait while another load of the collection runs (default; bounded by "
            "loading.lease_wait_s), or fail at once.",
        ),
    ] = True,
    engine: Annotated[
        str | None,
        typer.Option(help="local or ray: where parsing and embedding run (loading.engine)."),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(help="Ray cluster address (loading.ray_address); unset: local Ray."),
    ] = None,
    ray_workers: Annotated[
        int | None, typer.Option(min=1, help="Ray workers that embed (loading.ray_workers).")
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """Load documents into a collection. Incremental: unchanged files are skipped, and an
    interrupted load resumes when run again. One load at a time per collection: another load
    of it, from any process on the same store, waits for this one."""
    setup_logging(verbose)
    from deepsearcher.cli.render import LoadProgressView, print_load_summary

    # Each file's hash is recorded only after its chunks are stored, so a rerun after Ctrl-C
    # redoes exactly the unfinished files.
    interrupted = DeepSearcherError(
        "load interrupted",
        "run the same command again to resume: stored files are skipped, the others are loaded",
    )
    with reported_errors(interrupted=interrupted):
        settings = make_settings(
            config,
            {
                "loading.engine": ("--engine", engine),
                "loading.ray_address": ("--ray-address", ray_address),
                "loading.ray_workers": ("--ray-workers", ray_workers),
                **({} if wait else {"loading.lease_wait_s": ("--no-wait", 0)}),
            },
        )
        view = LoadProgressView(err_console(), enabled=not as_json, verbose=verbose > 0)
        with DeepSearcher(settings) as ds, view:
            report = ds.load(
                paths,
                collection,
                LoadOptions(description=description, force=force, prune=prune, rebuild=rebuild),
                # With --json nothing renders progress, so skipped files are logged instead.
                on_progress=None if as_json else view.update,
            )
        if as_json:
            typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
        else:
            print_load_summary(out_console(), report)
        require_loaded(report)


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
    max_iter: Annotated[int | None, typer.Option("--max-iter", help="Search iterations.")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", help="Chunks per query.")] = None,
    rerank: Annotated[
        str | None, typer.Option(help="lookup, llm, llm-batch or none (query.rerank).")
    ] = None,
    web: Annotated[
        bool | None,
        typer.Option("--web/--no-web", help="Also search the web (overrides config)."),
    ] = None,
    no_cache: Annotated[
        bool,
        typer.Option("--no-cache", help="Search afresh even when the answer is cached."),
    ] = False,
    filter_: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            help="Only passages meeting KEY OP VALUE (repeatable, ANDed): source=hr/**, "
            "type=pdf,docx, modified>=2025-01-01, page<=5, meta.date>=2025-03-01, meta.from~ann.",
        ),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = 0,
) -> None:
    """Answer a question from the loaded documents. The answer cites passages as [n]; without an
    LLM the passages that match best are printed in full."""
    handler = setup_logging(verbose)
    flt = _parse_filter(filter_)
    from deepsearcher.cli.render import QueryView

    with reported_errors():
        if not question.strip():
            raise DeepSearcherError(
                "the question is empty", 'ask something: deepsearcher query "Who approves travel?"'
            )
        # The per-question knobs travel in QueryOptions, which checks their ranges and names
        # for every front end (library, CLI, HTTP, MCP) alike.
        settings = make_settings(config)
        options = QueryOptions(
            agent=agent,
            collections=collection or None,
            top_k=top_k,
            max_iter=max_iter,
            rerank=rerank,
            web=web,
            filter=flt,
        )
        with DeepSearcher(settings) as ds:
            if as_json:
                answer = ds.query(question, options, use_cache=not no_cache)
                typer.echo(json.dumps(answer.to_dict(), ensure_ascii=False))
            else:
                handler.addFilter(_drop_rendered_notes)
                with QueryView(err_console(), out_console(), verbose=verbose > 0) as view:
                    answer = asyncio.run(_consume(ds, question, view, options, not no_cache))
                view.finish(answer)
    _report_lost_llm(settings, answer, explicit_agent=agent is not None)


def _parse_filter(expressions: list[str] | None) -> Filter | None:
    """``--filter`` values as one Filter; a bad one is a usage error (exit 2), like a bad flag."""
    try:
        return Filter.parse(expressions or []) or None
    except FilterError as exc:
        fail(exc)
        raise typer.Exit(2) from None


def _report_lost_llm(settings: Settings, answer: Any, *, explicit_agent: bool) -> None:
    """An LLM that refused the connection: the passages were shown; now one error line and
    its hint. The exit code is 1 only when --agent asked for an LLM answer explicitly: with the
    configured default, the passages are the degraded answer and scripts keep working."""
    from deepsearcher.llm import LLMUnreachableError, unreachable_hint

    if answer.mode != "retrieval-only" or not settings.llm_configured():
        return
    if answer.llm_unreachable is not None:
        hint = unreachable_hint(settings.llm.base_url or "")
        exit_ = fail(LLMUnreachableError(answer.llm_unreachable, hint))
        if explicit_agent:
            raise exit_


def _drop_rendered_notes(record: logging.LogRecord) -> bool:
    # The live view prints each note event; the same note's log record (shown at -v) would
    # print it a second time. Imported here: run_context imports the LLM client (slow), which
    # only a query needs.
    from deepsearcher.run_context import NOTES_LOGGER

    return record.name != NOTES_LOGGER


async def _consume(
    ds: DeepSearcher, question: str, view: Any, options: QueryOptions, use_cache: bool
) -> Any:
    answer = None
    async for event in ds.astream(question, options, use_cache=use_cache):
        if event.type == "done":
            answer = event.answer
        # The lost LLM is said once, by _report_lost_llm.
        elif not (event.type == "note" and event.llm_unreachable):
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
    setup_logging(verbose)
    with reported_errors(), DeepSearcher(make_settings(config)) as ds:
        infos = ds.collections()
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
                    | ({"error": i.error.message, "hint": i.error.hint} if i.error else {})
                    for i in infos
                ]
            )
        )
    elif not infos:
        typer.echo("no collections yet; load some: deepsearcher load PATH")
    else:
        table = Table("collection", "files", "chunks", "embedding model", "description")
        for i in infos:
            table.add_row(
                i.name,
                "?" if i.error else str(i.files),
                "?" if i.error else str(i.rows),
                i.meta.embedding_model if i.meta else "?",
                "(could not be opened: see below)"
                if i.error
                else (i.meta.description if i.meta else "") or "",
            )
        out_console().print(table, soft_wrap=False)
    # The others are listed; each one that could not be opened says why, and the exit is 1.
    broken = [fail(i.error) for i in infos if i.error is not None]
    if broken:
        raise broken[0]


@collections_app.command("drop")
def collections_drop(
    name: Annotated[str, typer.Argument(help="Collection to drop.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Drop a collection and its file manifest."""
    with reported_errors(), DeepSearcher(make_settings(config)) as ds:
        if name not in {i.name for i in ds.collections()}:
            raise CollectionNotFoundError(
                f"collection '{name}' does not exist", "list them: deepsearcher collections"
            )
        if not yes and not typer.confirm(f"Drop collection '{name}' and all its chunks?"):
            raise typer.Exit(1)
        ds.drop_collection(name)
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
    setup_logging(verbose)
    from deepsearcher.server import run_server

    with reported_errors():
        run_server(
            make_settings(config),
            host=host,
            port=port,
            insecure=insecure,
            log_level="debug" if verbose > 1 else "info",
        )


@app.command()
def mcp(config: ConfigOpt = None, verbose: VerboseOpt = 0) -> None:
    """Serve the MCP tools (search, deep_search, list_collections, load) over stdio, for agents
    and IDE assistants. stdout carries the protocol; logs go to stderr."""
    setup_logging(verbose)
    from deepsearcher.server.mcp import build_mcp

    with reported_errors():
        settings = make_settings(config)
        with DeepSearcher(settings) as ds:
            _ = ds.store  # a locked or unreachable store fails here, before the client waits
            build_mcp(ds).run("stdio")


@app.command("config")
def show_config(config: ConfigOpt = None) -> None:
    """Print the effective settings as commented YAML. Built-in defaults are overridden by the
    config file, which DEEPSEARCHER_<SECTION>__<KEY> environment variables override in turn.
    No secrets: settings only name the environment variables that hold them."""
    from deepsearcher.config import render_config_yaml

    setup_logging(0, opens_store=False)  # for warnings about misspelt DEEPSEARCHER_* variables
    with reported_errors():
        typer.echo(render_config_yaml(make_settings(config)))


app.command("eval")(eval_command)
app.command("research")(research_command)


def main() -> None:
    """Console-script entry point."""
    # Windows consoles default to a legacy code page; asyncio's default policy is fine elsewhere.
    if sys.platform == "win32":  # pragma: no cover
        asyncio.set_event_loop_policy(asyncio.WindowsSelectorEventLoopPolicy())  # type: ignore[attr-defined]
    app()
