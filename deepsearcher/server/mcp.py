"""The MCP server: the searcher's tools for agents and IDE assistants, built on the official
``mcp`` SDK. ``deepsearcher mcp`` serves it over stdio; ``deepsearcher serve`` mounts the same
server at ``/mcp`` (streamable HTTP) behind its API keys and browser checks.

Tools return data only: passages, answers and reports as JSON, with no prompt text added, since
the client's model decides what to do with them. Known failures become a tool error of one line
and a hint, never a traceback.
"""

# No ``from __future__ import annotations``: the SDK reads the tools' annotations at runtime
# (argument schemas and the ``Context`` parameter), so they must be real objects.

import logging
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import Field, WithJsonSchema

from deepsearcher import errors
from deepsearcher.config import QuerySettings, Settings
from deepsearcher.describe import describe_event
from deepsearcher.options import QueryOptions
from deepsearcher.searcher import DeepSearcher
from deepsearcher.server.access import FULL_ACCESS, Access, access_of
from deepsearcher.server.errors import ClientGone, RequestError
from deepsearcher.server.openai_api import LoadRequest
from deepsearcher.server.public import PublicView
from deepsearcher.server.service import SearchRequest, SearchService
from deepsearcher.types import Event, Hit, source_label

T = TypeVar("T")
PASSAGE_URI = "passage://{collection}/{chunk_id}"
# No Retry-After header reaches an MCP client: "in a while" is all it can be told.
_BUSY_HINT = "retry in a while, or raise server.max_queued_searches"

SERVER_INSTRUCTIONS = (
    "Search private documents. `search` returns ranked passages (no LLM); `deep_search` "
    "returns an answer whose [n] markers cite its sources; `list_collections` names what can "
    "be searched; read a passage again by its `uri`."
)
_FILTER_DESCRIPTION = (
    "Only passages meeting every condition, as strings like 'source=hr/**', 'type=pdf,docx', "
    "'modified>=2025-01-01', 'page<=5', 'meta.date>=2025-03-01', 'meta.from~alice', or an "
    'object like {"source": "hr/**", "modified": {"gte": "2025-01-01"}}.'
)

# Any JSON is let through to Filter.from_json, which refuses a wrong shape with the forms it
# accepts; the schema still tells clients those forms.
_FILTER_FIELD = Field(
    description=_FILTER_DESCRIPTION,
    json_schema_extra={
        "anyOf": [
            {"type": "array", "items": {"type": "string"}},
            {"type": "string"},
            {"type": "object"},
            {"type": "null"},
        ]
    },
)


@contextmanager
def _tool_errors(view: PublicView | None) -> Iterator[None]:
    """Known failures as the client's tool error: one line and a hint."""
    try:
        yield
    except (errors.DeepSearcherError, RequestError) as exc:
        message, hint = exc.message, exc.hint
        if view is not None:
            message, hint = view.text(message), view.text(hint) if hint else hint
        # The SDK puts "Error executing tool <name>: " in front.
        raise ToolError(message + (f"\nhint: {hint}" if hint else "")) from None


def _as_setting(name: str) -> WithJsonSchema:
    """An optional option's schema with the range of ``query.<name>``, so a client sees the
    limits; the values are checked by ``QueryOptions`` (one line naming the option), not by
    this schema, so the range is still declared only on the setting."""
    setting = QuerySettings.model_json_schema()["properties"][name]
    bounds = {k: setting[k] for k in ("maximum", "minimum", "type") if k in setting}
    return WithJsonSchema({"anyOf": [bounds, {"type": "null"}], "default": None})


def _passage(hit: Hit) -> dict[str, Any]:
    return {
        "id": hit.id,
        "uri": PASSAGE_URI.format(collection=hit.collection, chunk_id=hit.id),
        "collection": hit.collection,
        "source": hit.source,
        "label": source_label(hit.source, hit.page, hit.page_end, hit.kind),
        "page": hit.page,
        "page_end": hit.page_end,
        "score": round(hit.score, 4),
        "text": hit.text,
    }


def _http_scope(ctx: Context) -> dict[str, Any]:
    """The scope of the HTTP request the call came in on; empty over stdio."""
    try:
        request = ctx.request_context.request
    except ValueError:  # called outside a request
        return {}
    scope = getattr(request, "scope", None)
    return scope if isinstance(scope, dict) else {}


def _access(ctx: Context) -> Access:
    """The calling key's access: from the HTTP request the call came in on (the API key
    middleware put it there); over stdio the local user may do everything."""
    scope = _http_scope(ctx)
    return access_of(scope) if scope else FULL_ACCESS


async def _unless_gone(svc: SearchService, ctx: Context, work: Awaitable[T], what: str) -> T:
    """``work``'s result; cancelled, with its search slot freed, when the client's connection
    closes first (the SDK runs the call apart from the request that carried it, and would
    finish it for nobody)."""
    try:
        return await svc.unless_gone(_http_scope(ctx), work, f"MCP {what}")
    except ClientGone:  # nobody reads this: the client is gone
        raise ToolError(f"the client disconnected; the {what} was stopped") from None


def _new_server() -> MCPServer:
    # MCPServer() calls logging.basicConfig, which installs a handler on the root logger when
    # it has none; the library installs no handlers (the CLI sets up logging), so it gets one
    # for the moment of the call.
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)
    try:
        return MCPServer("deepsearcher", instructions=SERVER_INSTRUCTIONS, log_level="WARNING")
    finally:
        root.removeHandler(placeholder)


def build_mcp(
    searcher: DeepSearcher,
    settings: Settings | None = None,
    *,
    service: SearchService | None = None,
) -> MCPServer:
    """The MCP server over ``searcher``, a front end of ``service``: the HTTP server's (its
    loads under ``server.load_root``, its search slots and time budget, what a remote client
    may see), or without one a local service for a stdio client (no queue, paths as stored)."""
    svc = service or SearchService(searcher, settings, remote=False)
    mcp = _new_server()
    _add_search(mcp, svc)
    _add_deep_search(mcp, svc)
    _add_list_collections(mcp, svc)
    _add_load(mcp, svc)
    _add_passage(mcp, svc)
    return mcp


def _view(svc: SearchService) -> PublicView | None:
    """What a remote client may see of paths and messages; None: shown as stored, right for
    the local user of a stdio server."""
    return svc.view if svc.remote else None


def _add_search(mcp: MCPServer, svc: SearchService) -> None:
    @mcp.tool()
    async def search(
        query: Annotated[str, Field(description="What to search for.", min_length=1)],
        ctx: Context,
        collections: Annotated[
            list[str] | None, Field(description="Search only these (default: all).")
        ] = None,
        top_k: Annotated[
            int | None,
            _as_setting("top_k"),
            Field(description="Passages to return (default: query.top_k)."),
        ] = None,
        filter: Annotated[Any, _FILTER_FIELD] = None,
    ) -> dict[str, Any]:
        """Passages most similar to `query`, with their source file, pages, collection, score
        and a `uri` to read each again. Retrieval only: no LLM is called."""
        with _tool_errors(_view(svc)):
            # The range of top_k is the setting's, checked here as for every front end.
            options = QueryOptions(collections=collections, top_k=top_k, filter=filter)
            work = svc.passages(_access(ctx), query, options)
            found = await _unless_gone(svc, ctx, work, "search")
        result: dict[str, Any] = {"query": query, "passages": [_passage(h) for h in found.hits]}
        if found.notes:
            result["notes"] = found.notes
        return result


def _add_deep_search(mcp: MCPServer, svc: SearchService) -> None:
    @mcp.tool()
    async def deep_search(
        question: Annotated[str, Field(description="The question to answer.", min_length=1)],
        ctx: Context,
        collections: Annotated[
            list[str] | None, Field(description="Search only these (default: all, or routed).")
        ] = None,
        max_iter: Annotated[
            int | None,
            _as_setting("max_iter"),
            Field(description="Search iterations (default: query.max_iter)."),
        ] = None,
        web: Annotated[
            bool | None, Field(description="Also search the web (default: web_search.enabled).")
        ] = None,
        cache: Annotated[
            bool,
            Field(description="Answer from the answer cache when asked before (cached: true)."),
        ] = True,
        filter: Annotated[Any, _FILTER_FIELD] = None,
    ) -> dict[str, Any]:
        """Answer `question` from the documents: sub-queries, searches, relevance checks and
        a written answer whose [n] markers cite `sources`. Sends a progress notification per
        step when the request carries a progress token."""
        with _tool_errors(_view(svc)):
            # Refused before it waits for a search slot (the library checks it too).
            errors.check_question_length(question, svc.server.max_question_chars)
            options = QueryOptions(
                collections=collections, max_iter=max_iter, web=web, filter=filter
            )
            progress = _Progress(ctx)
            work = svc.answer(
                _access(ctx),
                SearchRequest(question, options, use_cache=cache),
                check_named=False,
                on_event=progress,
                busy_hint=_BUSY_HINT,
            )
            answer = await _unless_gone(svc, ctx, work, "deep search")
        # The passages the answer does not cite would crowd the calling model's context; the
        # search tool finds passages on demand.
        result = answer.to_dict()
        del result["retrieved"]
        return result


class _Progress:
    """A progress notification per step of a search, when the request carries a token."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.step = 0

    async def __call__(self, event: Event) -> None:
        message = describe_event(event, "line")
        if message is not None:
            self.step += 1
            await self.ctx.report_progress(self.step, None, message)


def _add_list_collections(mcp: MCPServer, svc: SearchService) -> None:
    @mcp.tool()
    async def list_collections(ctx: Context) -> list[dict[str, Any]]:
        """The collections that can be searched: name, description, chunks and files."""
        with _tool_errors(_view(svc)):
            infos = await svc.collections(_access(ctx))
        return [
            {
                "name": i.name,
                "description": i.meta.description if i.meta else "",
                "chunks": i.rows,
                "files": i.files,
            }
            | ({"error": _shown_error(svc, i.error)} if i.error else {})
            for i in infos
        ]


def _shown_error(svc: SearchService, exc: errors.DeepSearcherError) -> str:
    text = f"{exc.message}; {exc.hint}" if exc.hint else exc.message
    return svc.view.text(text) if svc.remote else text


def _add_load(mcp: MCPServer, svc: SearchService) -> None:
    @mcp.tool()
    async def load(
        path: Annotated[
            str, Field(description="File or folder under server.load_root (relative to it).")
        ],
        ctx: Context,
        collection: Annotated[
            str | None, Field(description="Collection name (default from config).")
        ] = None,
        description: Annotated[
            str | None, Field(description="What the collection holds (used for routing).")
        ] = None,
    ) -> dict[str, Any]:
        """Load a file or folder into a collection, incrementally (unchanged files are
        skipped). Only when server.load_root is set, and only paths under it."""
        req = LoadRequest(paths=[path], collection=collection, description=description)
        with _tool_errors(_view(svc)):
            try:
                report = await svc.load_paths(_access(ctx), req)
            except RequestError as exc:
                if exc.code != "load_root_unset":
                    raise
                # The HTTP refusal's hint is about uploads, which MCP has not.
                raise errors.ConfigError(
                    "loading is disabled: server.load_root is not set",
                    "set server.load_root (or DEEPSEARCHER_SERVER__LOAD_ROOT) to the folder "
                    "MCP clients may load from",
                ) from None
        return report.to_dict()


def _add_passage(mcp: MCPServer, svc: SearchService) -> None:
    @mcp.resource(
        PASSAGE_URI,
        name="passage",
        description="A stored passage by collection and chunk id (the `uri` of a search result).",
        mime_type="application/json",
    )
    async def passage(collection: str, chunk_id: str, ctx: Context) -> dict[str, Any]:
        try:
            hit = await svc.passage(_access(ctx), collection, chunk_id)
        except RequestError as exc:
            shown = exc.message + (f"\nhint: {exc.hint}" if exc.hint else "")
            raise (ResourceNotFoundError if exc.status == 404 else ResourceError)(shown) from None
        return _passage(hit) | {"score": None}
