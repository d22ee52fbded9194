"""HTTP API: OpenAI-compatible chat (any chatbot UI or the ``openai`` client can talk to it) plus
a small REST surface for queries, loads and health.

``create_app`` builds the FastAPI app around a ``DeepSearcher``; ``run_server`` serves it with
uvicorn. The server process owns the Milvus Lite database, so loads run here too. Wire formats
live in ``openai_api``; the error shape in ``errors``; keys, browser checks, body limit and the
search queue in ``guard``; streaming in ``stream``; what clients may see of paths and internal
addresses in ``public``.
"""

from __future__ import annotations

import asyncio
import logging
import math
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
from deepsearcher.agents.followup import rewrite_followup
from deepsearcher.config import ServerSettings, Settings
from deepsearcher.options import QueryOptions
from deepsearcher.searcher import DeepSearcher
from deepsearcher.server.access import Access, KeyRing, access_of, load_keys_file
from deepsearcher.server.errors import RequestError, error_response, search_timeout
from deepsearcher.server.guard import (
    API_KEYS_ENV,
    APIKeyMiddleware,
    BodyLimitMiddleware,
    BrowserGuardMiddleware,
    SearchSlot,
    SearchSlots,
    check_bind,
    parse_api_keys,
)
from deepsearcher.server.load import HTTPLoads, default_upload_dir
from deepsearcher.server.mcp import build_mcp, http_routes
from deepsearcher.server.openai_api import (
    DEFAULT_MODEL,
    ChatMessage,
    ChatRequest,
    ChunkWriter,
    LoadRequest,
    QueryRequest,
    answer_details,
    chat_completion,
    check_question,
    history_turns,
    parse_body,
    sources_markdown,
    sse,
)
from deepsearcher.server.page import PAGE_PATHS, page_routes
from deepsearcher.server.public import PublicView, common_root
from deepsearcher.server.research import RESEARCH_MODEL, research_chat, research_routes
from deepsearcher.server.stream import EventPump, EventStreamResponse
from deepsearcher.store import validate_collection_name
from deepsearcher.types import (
    Answer,
    AnswerDeltaEvent,
    DoneEvent,
    Event,
    NoteEvent,
    Usage,
)

logger = logging.getLogger(__name__)
# A readiness probe must answer before the load balancer's own probe timeout gives up on it.
_READY_TIMEOUT_S = 5.0


class _Service:
    """The search endpoints' work: the search queue, timeouts, streaming, and what of it the
    client sees."""

    def __init__(self, searcher: DeepSearcher, settings: Settings, loads: HTTPLoads) -> None:
        self.searcher = searcher
        self.server = settings.server
        self.loads = loads
        self.slots = SearchSlots(
            self.server.max_concurrent_searches, self.server.max_queued_searches
        )
        # Each collection's common folder, with the collection version it was computed at:
        # another server or a CLI load on the same store may change it at any time.
        self._roots: dict[str, tuple[str, Path | None]] = {}
        self.view = PublicView(settings, loads.upload_dir, self._root_of)

    # -- searching --------------------------------------------------------------------------

    async def acquire(self) -> SearchSlot:
        slot = await self.slots.acquire()
        if slot is None:
            wait = self.slots.expected_wait_s()
            raise RequestError(
                429,
                f"server busy: {self.slots.limit} searches running and "
                f"{self.slots.max_queued} waiting",
                type_="rate_limit_error",
                code="server_busy",
                hint="retry after the Retry-After seconds, or raise "
                "server.max_queued_searches / server.max_concurrent_searches",
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
        return slot

    def _root_of(self, name: str) -> Path | None:
        return self._roots.get(name, ("", None))[1]

    async def public_answer(self, answer: Answer) -> Answer:
        """The answer with source paths relative to a root the client knows of."""
        await self.learn_roots({s.collection for s in answer.sources if s.kind == "doc"})
        return self.view.answer(answer)

    async def learn_roots(self, collections: set[str | None]) -> None:
        """The common folder of each collection's files, which ``view`` shows paths under,
        re-read whenever the collection's version in the store moved (a load by any process)."""
        names = sorted(c for c in collections if c)
        if not names:
            return
        store = self.searcher.store
        versions = await asyncio.to_thread(store.collection_versions, names)
        for name in names:
            version = versions.get(name, "")
            known = self._roots.get(name)
            # "" is a collection from before versions: it cannot say it changed.
            if known is None or not version or known[0] != version:
                records = await asyncio.to_thread(store.manifest.file_records, name)
                self._roots[name] = (version, common_root(records))

    async def public_event(self, event: Event) -> Event:
        if isinstance(event, DoneEvent) and event.answer is not None:
            return DoneEvent(answer=await self.public_answer(event.answer))
        return self.view.event(event)

    async def check_collections(self, names: list[str]) -> None:
        store = await asyncio.to_thread(lambda: self.searcher.store)
        for name in names:
            try:
                validate_collection_name(name)
            except errors.StoreError:
                meta = None  # not a possible collection name: as unknown as a missing one
            else:
                meta = await asyncio.to_thread(store.get_meta, name)
            if meta is None:
                raise RequestError(
                    404,
                    f"collection '{name}' does not exist",
                    type_="not_found_error",
                    code="collection_not_found",
                    hint=f"GET /v1/models lists the collections; model '{DEFAULT_MODEL}' searches all",
                )

    async def scoped(self, access: Access, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` limited to the collections ``access`` may read: a named one is checked
        (403 before 404, so a refused key learns nothing of what exists); without one, routing
        and "search all" see only the readable ones."""
        named = options.get("collections") or []
        access.check_read(named)
        await self.check_collections(named)
        if not access.reads_all:
            infos = await asyncio.to_thread(self.searcher.collections)
            readable = access.readable_or_refuse(i.name for i in infos)
            options = {**options, "allowed_collections": readable}
        return options

    def search_options(self, options: dict[str, Any]) -> dict[str, Any]:
        # The run (search and answer) ends within its budget plus a small grace; 80% of the
        # request timeout leaves that grace and the time to send the answer before the 504.
        # The budget's name goes along, so a cut-short note names the limit that applied.
        soft = self.server.request_timeout_s * 0.8
        if soft < self.searcher.settings.query.timeout_s:
            name = f"80% of server.request_timeout_s={self.server.request_timeout_s:g}s"
            options = {**options, "timeout_s": soft, "budget_name": name}
        return options

    async def events(
        self, question: str, history: list[ChatMessage], options: dict[str, Any]
    ) -> AsyncIterator[Event]:
        """The search's events; a follow-up is first rewritten into a standalone question."""
        usage = Usage()
        notes: list[str] = []
        if history:
            llm = self.searcher.llm
            note: str | None
            if llm is None:
                note = "no LLM configured: the follow-up was searched as asked"
            else:
                question, note = await rewrite_followup(
                    llm, question, history_turns(history), usage
                )
            if note:
                notes.append(note)
            yield NoteEvent(message=note or f"standalone question: {question}")
        use_cache = bool(options.get("cache", True))
        values = {k: v for k, v in options.items() if k != "cache"}
        search = QueryOptions.from_mapping(self.search_options(values))
        async for event in self.searcher.astream(question, search, use_cache=use_cache):
            if isinstance(event, DoneEvent) and event.answer is not None:
                event.answer.usage.add(usage)
                event.answer.notes[:0] = notes
            yield event

    async def answer(
        self, question: str, history: list[ChatMessage], options: dict[str, Any]
    ) -> Answer:
        slot = await self.acquire()
        try:
            answer = await asyncio.wait_for(
                self._collect(question, history, options), self.server.request_timeout_s
            )
        except TimeoutError:
            raise search_timeout(self.server.request_timeout_s) from None
        finally:
            slot.release()
        return await self.public_answer(answer)

    async def answer_unless_gone(
        self,
        request: Request,
        question: str,
        history: list[ChatMessage],
        options: dict[str, Any],
    ) -> Answer | None:
        """The answer, or None when the client hung up first: then the search (and its LLM
        calls) is cancelled rather than finished for nobody."""
        search = asyncio.create_task(self.answer(question, history, options))
        gone = asyncio.create_task(_disconnected(request))
        try:
            await asyncio.wait({search, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not search.done():
                search.cancel()
                await asyncio.wait({search})  # its slot is released before we go on
        if search.cancelled():
            logger.info("client disconnected: search cancelled")
            return None
        return search.result()

    async def _collect(
        self, question: str, history: list[ChatMessage], options: dict[str, Any]
    ) -> Answer:
        async for event in self.events(question, history, options):
            if isinstance(event, DoneEvent) and event.answer is not None:
                return event.answer
        raise errors.DeepSearcherError("the search ended without an answer")

    async def stream_chat(
        self, req: ChatRequest, question: str, history: list[ChatMessage], options: dict[str, Any]
    ) -> Response:
        slot = await self.acquire()
        timeout = self.server.request_timeout_s
        deadline = asyncio.get_running_loop().time() + timeout
        pump = EventPump(self.events(question, history, options))

        def close() -> None:
            pump.close()
            slot.release()

        try:  # failures before the first event still get a real HTTP status
            first = await pump.next_within(deadline, timeout)
        except BaseException:
            close()
            raise
        return EventStreamResponse(self._chunks(req, first, pump, deadline), close)

    async def _chunks(
        self, req: ChatRequest, event: Event | None, pump: EventPump, deadline: float
    ) -> AsyncIterator[str]:
        out = ChunkWriter(req.model)
        yield out.frame({"role": "assistant", "content": ""})
        told: list[str] = []
        noted_after_text = False
        try:
            while event is not None:
                event = await self.public_event(event)
                if isinstance(event, AnswerDeltaEvent):
                    told.append(event.text)
                    yield out.frame({"content": event.text})
                elif isinstance(event, DoneEvent) and event.answer is not None:
                    answer = event.answer
                    text = "".join(told)
                    tail = sources_markdown(answer.sources)
                    if not text.strip():  # nothing streamed (no LLM, or a fallback answer)
                        tail = answer.answer + tail
                    elif noted_after_text and answer.answer.strip() != text.strip():
                        # The answer stream broke off and was replaced: send what stands.
                        tail = "\n\n" + answer.answer + tail
                    yield out.frame(
                        {"content": tail},
                        "stop",
                        sources=[s.to_dict() for s in answer.sources],
                        evidence=answer.evidence,
                        deepsearcher=answer_details(answer),
                    )
                    if req.include_usage:
                        yield out.usage(answer.usage)
                    yield sse("[DONE]")
                    return
                else:
                    noted_after_text = noted_after_text or (
                        bool(told) and isinstance(event, NoteEvent)
                    )
                    yield out.frame({}, deepsearcher_event=event.to_dict())
                event = await pump.next_within(deadline, self.server.request_timeout_s)
            raise errors.DeepSearcherError("the search ended without an answer")
        except (RequestError, errors.DeepSearcherError) as exc:
            # Headers are gone: the OpenAI clients raise on an error object in the stream.
            body = error_response(exc, self.view.text).body
            yield sse(bytes(body).decode())

    # -- health -----------------------------------------------------------------------------

    async def readiness(self) -> tuple[int, dict[str, Any]]:
        """200 when the store answers (a load balancer sends this server traffic), 503 when it
        does not; a missing LLM only degrades (answers fall back to passages)."""
        body: dict[str, Any] = {"status": "ready"}
        status = 200
        try:
            infos = await asyncio.wait_for(
                asyncio.to_thread(self.searcher.collections), _READY_TIMEOUT_S
            )
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
        body["llm"] = await _probe_llm(self.searcher.settings)
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
    svc = _Service(searcher, settings, loads)

    # The MCP server (streamable HTTP at /mcp) shares the loads, the search slots and budget,
    # and what clients may see; the middleware below (API keys, browser checks, body limit) covers it like every route.
    mcp = build_mcp(
        searcher,
        settings,
        loads=loads,
        view=svc.view,
        slots=svc.slots,
        search_options=svc.search_options,
    )
    app = FastAPI(
        title="DeepSearcher", lifespan=_lifespan(searcher, mcp), docs_url=None, redoc_url=None
    )
    app.state.service = svc
    app.router.routes.extend(http_routes(mcp))
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


def _add_middleware(
    app: FastAPI, server: ServerSettings, api_keys: list[str] | KeyRing | None
) -> None:
    # Added innermost first: CORS must see preflights and decorate 401s, so it goes outside.
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


def _search_routes(svc: _Service) -> APIRouter:
    """OpenAI-compatible chat and models, and our own ``/v1/query``."""
    router = APIRouter()

    @router.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req: ChatRequest = parse_body(await request.body(), ChatRequest)
        if req.model == RESEARCH_MODEL:
            return await research_chat(svc, request, req)
        question, history = req.question_and_history(svc.server.max_question_chars)
        options = req.options()
        if req.model and req.model != DEFAULT_MODEL:
            options["collections"] = [req.model]
        options = await svc.scoped(access_of(request.scope), options)
        if req.stream:
            return await svc.stream_chat(req, question, history, options)
        answer = await svc.answer_unless_gone(request, question, history, options)
        if answer is None:
            return Response(status_code=499)  # nobody is listening; uvicorn drops it
        return JSONResponse(chat_completion(answer, req.model))

    @router.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        access = access_of(request.scope)
        infos = await asyncio.to_thread(svc.searcher.collections)
        everything = "every collection" if access.reads_all else "every collection this key reads"
        data = [
            _model(DEFAULT_MODEL, f"searches {everything}"),
            _model(RESEARCH_MODEL, f"writes a cited research report over {everything}"),
        ]
        for info in infos:
            if info.name not in (DEFAULT_MODEL, RESEARCH_MODEL) and access.readable(info.name):
                description = info.meta.description if info.meta else ""
                data.append(
                    {**_model(info.name, description), "chunks": info.rows, "files": info.files}
                )
        return {"object": "list", "data": data}

    @router.post("/v1/query")
    async def query(request: Request) -> Response:
        req: QueryRequest = parse_body(await request.body(), QueryRequest)
        check_question(req.question, svc.server.max_question_chars)
        options = req.options()
        if req.collections:
            options["collections"] = req.collections
        options = await svc.scoped(access_of(request.scope), options)
        answer = await svc.answer_unless_gone(request, req.question, [], options)
        if answer is None:
            return Response(status_code=499)
        return JSONResponse(answer.to_dict())

    return router


def _load_routes(svc: _Service) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/load")
    async def load(request: Request) -> dict[str, Any]:
        access = access_of(request.scope)
        access.check_load()  # before the body is read: a key that may not load uploads nothing
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            report = await svc.loads.load_uploads(request, authorize=access.check_load)
        else:
            req = parse_body(await request.body(), LoadRequest)
            access.check_load(req.collection or svc.searcher.settings.vector_store.collection)
            report = await svc.loads.load_paths(req)
        return svc.view.report(report).to_dict()

    return router


def _health_routes(svc: _Service) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz() -> JSONResponse:
        status, body = await svc.readiness()
        return JSONResponse(body, status)

    return router


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection. Called once the body is read: the
    server's receive channel then only ever says ``http.disconnect``."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


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
