"""HTTP API: OpenAI-compatible chat (any chatbot UI or the ``openai`` client can talk to it) plus
a small REST surface for queries, loads and health.

``create_app`` builds the FastAPI app around a ``DeepSearcher``; ``run_server`` serves it with
uvicorn. The server process owns the Milvus Lite database, so loads run here too. Wire formats
live in ``openai_api``; the error shape in ``errors``; keys, browser checks, body limit and the
search queue in ``guard``; streaming in ``stream``; what clients may see of paths and internal
addresses in ``public``. The routes here are adapters: access, deadlines, the queue and
cancelling a request whose client hung up belong to ``service.SearchService``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from mcp.server.mcpserver import MCPServer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from deepsearcher import errors
from deepsearcher.config import ServerSettings, Settings
from deepsearcher.describe import describe_event
from deepsearcher.searcher import DeepSearcher
from deepsearcher.server.access import KeyRing, access_of, load_keys_file
from deepsearcher.server.disconnect import DisconnectWatchMiddleware
from deepsearcher.server.errors import ClientGone, RequestError, error_response
from deepsearcher.server.guard import (
    API_KEYS_ENV,
    APIKeyMiddleware,
    BodyLimitMiddleware,
    BrowserGuardMiddleware,
    check_bind,
    parse_api_keys,
)
from deepsearcher.server.load import HTTPLoads, default_upload_dir
from deepsearcher.server.mcp import build_mcp
from deepsearcher.server.mcp_http import http_routes
from deepsearcher.server.openai_api import (
    DEFAULT_MODEL,
    ChatRequest,
    ChunkWriter,
    QueryRequest,
    answer_details,
    chat_completion,
    check_question,
    history_turns,
    parse_body,
    sources_markdown,
)
from deepsearcher.server.page import PAGE_PATHS, page_routes
from deepsearcher.server.research import RESEARCH_MODEL, research_chat, research_routes
from deepsearcher.server.service import SearchRequest, SearchService
from deepsearcher.server.stream import ChatFrames, chat_stream
from deepsearcher.types import AnswerDeltaEvent, DoneEvent, Event

logger = logging.getLogger(__name__)
# A readiness probe must answer before the load balancer's own probe timeout gives up on it.
_READY_TIMEOUT_S = 5.0


class _AnswerFrames:
    """A search as chat frames: each answer delta as content, each other step as a
    ``deepsearcher_event``, then what stands of the answer and its sources."""

    def __init__(self, svc: SearchService) -> None:
        self.svc = svc
        self.told: list[str] = []

    async def __call__(self, event: Event, out: ChunkWriter) -> ChatFrames:
        event = await self.svc.public_event(event)
        if isinstance(event, AnswerDeltaEvent):
            self.told.append(event.text)
            return ChatFrames([out.frame({"content": event.text})])
        if not (isinstance(event, DoneEvent) and event.answer is not None):
            # The one wording of every front end (describe.py) rides with the event: the chat
            # page shows it as it stands.
            said = {**event.to_dict(), "text": describe_event(event, "line")}
            return ChatFrames([out.frame({}, deepsearcher_event=said)])
        answer = event.answer
        tail = sources_markdown(answer.sources)
        if not "".join(self.told).strip():  # nothing streamed (no LLM, or a fallback answer)
            tail = answer.answer + tail
        elif answer.stream_replaced:  # broke off, or repaired: send what stands
            tail = "\n\n" + answer.answer + tail
        last = out.frame(
            {"content": tail},
            "stop",
            # The answer as it stands: with the citations attribution added to what was
            # streamed (a page renders this; the deltas are the model's words).
            answer=answer.answer,
            sources=[s.to_dict() for s in answer.sources],
            evidence=answer.evidence,
            deepsearcher=answer_details(answer),
        )
        return ChatFrames([last], answer.usage)


async def _readiness(searcher: DeepSearcher) -> tuple[int, dict[str, Any]]:
    """200 when the store answers (a load balancer sends this server traffic), 503 when it
    does not; a missing LLM only degrades (answers fall back to passages)."""
    body: dict[str, Any] = {"status": "ready"}
    status = 200
    try:
        infos = await asyncio.wait_for(searcher.acollections(), _READY_TIMEOUT_S)
        body["store"] = {"ok": True, "reachable": True, "collections": len(infos)}
    except (errors.DeepSearcherError, TimeoutError) as exc:
        # The driver's text names the store's host and port: the log keeps it.
        logger.warning("readiness: the vector store did not answer: %s", exc or "timed out")
        reason = (
            f"no answer within {_READY_TIMEOUT_S:g}s"
            if isinstance(exc, TimeoutError)
            else type(exc.__cause__ or exc).__name__
        )
        body["store"] = {
            "ok": False,
            "reachable": False,
            "error": f"the vector store is unreachable ({reason})",
        }
        body["status"], status = "unavailable", 503
    body["llm"] = await _probe_llm(searcher.settings)
    if body["llm"].get("reachable") is False and status == 200:
        body["status"] = "degraded"
    return status, body


async def _probe_llm(settings: Settings) -> dict[str, Any]:
    """Configured, and reachable by a cheap GET {base_url}/models (never the key in the reply)."""
    if not settings.llm_configured():
        return {"configured": False}
    import httpx

    from deepsearcher.llm import OPENAI_BASE_URL

    base = (settings.llm.base_url or OPENAI_BASE_URL).rstrip("/")
    key = os.environ.get(settings.llm.api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with httpx.AsyncClient(timeout=2.0) as client:
            resp = await client.get(f"{base}/models", headers=headers)
    except httpx.HTTPError as exc:
        return {"configured": True, "reachable": False, "error": type(exc).__name__}
    return {"configured": True, "reachable": resp.status_code < 500, "status": resp.status_code}


def create_app(
    searcher: DeepSearcher,
    settings: Settings,
    *,
    api_keys: list[str] | KeyRing | None = None,
    upload_dir: Path | None = None,
) -> FastAPI:
    """The HTTP app around ``searcher``. ``settings.server`` sets the limits; with ``api_keys``
    every endpoint but ``/healthz`` needs ``Authorization: Bearer <key>`` (plain keys may do
    everything; a ``KeyRing`` says what each key may read and load)."""
    loads = HTTPLoads(
        searcher, settings.server, upload_dir or default_upload_dir(searcher.settings)
    )
    svc = SearchService(searcher, settings, loads=loads)

    # The MCP server (streamable HTTP at /mcp) is another front end over the same service:
    # the loads, the search slots and budget, what clients may see; the middleware below
    # (API keys, browser checks, body limit) covers it like every route.
    mcp = build_mcp(searcher, settings, service=svc)
    app = FastAPI(
        title="DeepSearcher", lifespan=_lifespan(searcher, mcp), docs_url=None, redoc_url=None
    )
    app.state.service = svc
    app.router.routes.extend(http_routes(mcp, settings.server))
    _answer_errors(app, svc.view.text)
    _add_middleware(app, settings.server, api_keys)
    app.include_router(_search_routes(svc))
    app.include_router(research_routes(svc))
    app.include_router(_load_routes(svc))
    app.include_router(_health_routes(svc))
    app.include_router(page_routes(settings.server, keys_required=bool(api_keys)))
    return app


def _lifespan(
    searcher: DeepSearcher, mcp: MCPServer
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the MCP sessions run with the app; the LLM client is closed on
    shutdown, inside the server's loop."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield
        llm = searcher.llm
        if llm is not None and hasattr(llm, "aclose"):
            await llm.aclose()  # the HTTP client belongs to this event loop

    return lifespan


def _answer_errors(app: FastAPI, public: Callable[[str], str]) -> None:
    """Every error in the OpenAI shape, with ``public`` hiding the server's internals."""
    # Known errors are answered by the exception middleware; only bugs reach Exception (500).
    handled = (
        RequestError,
        errors.DeepSearcherError,
        StarletteHTTPException,
        RequestValidationError,
    )
    for exc_type in (*handled, Exception):
        app.add_exception_handler(exc_type, lambda _req, exc: error_response(exc, public))
    # Nobody is listening: uvicorn drops the response.
    app.add_exception_handler(ClientGone, lambda _req, _exc: Response(status_code=499))


def _add_middleware(
    app: FastAPI, server: ServerSettings, api_keys: list[str] | KeyRing | None
) -> None:
    # Added innermost first: CORS must see preflights and decorate 401s, so it goes outside.
    # Innermost of all: the watch that tells every route and transport when a client is gone.
    app.add_middleware(DisconnectWatchMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_bytes=int(server.max_request_mb * 1_000_000))
    if api_keys:
        # The page and its assets hold no data: the browser loads them before the key is typed.
        app.add_middleware(APIKeyMiddleware, api_keys=api_keys, open_paths=PAGE_PATHS)
    if server.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=server.cors_origins,
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type"],
        )
    # Outermost: a page the user opens is refused before anything else looks at its request.
    bind = server.host
    own = [] if bind in ("", "0.0.0.0", "::") else [bind.strip("[]")]
    app.add_middleware(
        BrowserGuardMiddleware,
        check_origin=not api_keys,
        allowed_hosts=[*server.allowed_hosts, *own],
        allowed_origins=server.cors_origins,
        multipart_paths=["/v1/load"],
    )


def _search_routes(svc: SearchService) -> APIRouter:
    """OpenAI-compatible chat and models, and our own ``/v1/query``."""
    router = APIRouter()

    @router.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req: ChatRequest = parse_body(await request.body(), ChatRequest)
        if req.model == RESEARCH_MODEL:
            return await research_chat(svc, request, req)
        question, history = req.question_and_history(svc.server.max_question_chars)
        named = [req.model] if req.model and req.model != DEFAULT_MODEL else None
        ask = SearchRequest(question, req.query_options(named), history_turns(history), req.cache)
        access = access_of(request.scope)
        if req.stream:
            run = await svc.answer_stream(access, ask)
            ended = "the search ended without an answer"
            return await chat_stream(req, run, _AnswerFrames(svc), svc.view.text, ended)
        answer = await svc.unless_gone(request.scope, svc.answer(access, ask), "search")
        return JSONResponse(chat_completion(answer, req.model))

    @router.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        access = access_of(request.scope)
        infos = await svc.collections(access)
        everything = "every collection" if access.reads_all else "every collection this key reads"
        data = [
            _model(DEFAULT_MODEL, f"searches {everything}"),
            _model(RESEARCH_MODEL, f"writes a cited research report over {everything}"),
        ]
        for info in infos:
            if info.name not in (DEFAULT_MODEL, RESEARCH_MODEL):
                description = info.meta.description if info.meta else ""
                model = {**_model(info.name, description), "chunks": info.rows, "files": info.files}
                if info.error is not None:  # listed, with why it cannot be searched now
                    model["error"] = svc.view.text(f"{info.error.message}; {info.error.hint}")
                data.append(model)
        return {"object": "list", "data": data}

    @router.post("/v1/query")
    async def query(request: Request) -> Response:
        req: QueryRequest = parse_body(await request.body(), QueryRequest)
        check_question(req.question, svc.server.max_question_chars)
        ask = SearchRequest(req.question, req.query_options(req.collections), use_cache=req.cache)
        work = svc.answer(access_of(request.scope), ask)
        return JSONResponse((await svc.unless_gone(request.scope, work, "search")).to_dict())

    return router


def _load_routes(svc: SearchService) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/load")
    async def load(request: Request) -> dict[str, Any]:
        return (await svc.load(access_of(request.scope), request)).to_dict()

    return router


def _health_routes(svc: SearchService) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz() -> JSONResponse:
        status, body = await _readiness(svc.searcher)
        return JSONResponse(body, status)

    return router


def _model(name: str, description: str) -> dict[str, Any]:
    return {
        "id": name,
        "object": "model",
        "created": 0,
        "owned_by": "deepsearcher",
        "description": description,
    }


def server_keys(server: ServerSettings, environ: dict[str, str] | None = None) -> KeyRing:
    """The keys in ``$DEEPSEARCHER_API_KEYS`` (full access) and in ``server.keys_file``."""
    env = dict(os.environ) if environ is None else environ
    keys = KeyRing.full(parse_api_keys(env.get(API_KEYS_ENV)))
    if server.keys_file:
        keys = keys + load_keys_file(server.keys_file, env)
    return keys


def run_server(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    insecure: bool = False,
    log_level: str = "info",
) -> None:
    """Serve until interrupted. Keys come from ``$DEEPSEARCHER_API_KEYS``; binding a non-loopback
    host without keys raises ``ConfigError`` unless ``insecure``."""
    host = host or settings.server.host
    port = settings.server.port if port is None else port
    api_keys = server_keys(settings.server)
    check_bind(host, api_keys, insecure=insecure)
    # The bound address is a name of this server: Host headers naming it are not rebinding.
    settings = settings.model_copy(
        update={"server": settings.server.model_copy(update={"host": host})}
    )
    if not api_keys:
        logger.warning("serving without API keys (set %s to require them)", API_KEYS_ENV)
    import uvicorn

    searcher = DeepSearcher(settings)
    try:
        # Open the store and the embedder now: a locked database fails here, not on the first
        # request, and the first question does not wait for the model to load.
        _ = searcher.store
        _ = searcher.embedder
        app = create_app(searcher, settings, api_keys=api_keys)
        uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
    finally:
        searcher.close()
