"""``SearchService``: the one request pipeline under the server's front ends.

OpenAI chat, the REST routes, the research routes and the MCP tools are adapters: each parses
its own wire format, then asks this service for the operation (an answer or its stream,
passages, a passage by id, the collections, a load, a research run), which owns what they must
all do alike:

- **access**: each operation checks the caller's ``Access`` itself, here and nowhere else: a
  request sees only the collections its key may read (a named one refused with 403 before
  anything says whether it exists) and loads only where its key may load;
- **deadlines**: the run's time budget ends inside ``server.request_timeout_s``, and the work is
  cut at that deadline with the 504 of ``errors.search_timeout``;
- **the search queue**: a run holds one of the ``SearchSlots`` while it works;
- **cancel on disconnect**: a run whose client hung up is cancelled, not finished for nobody
  (``ClientGone``);
- **what a client may see**: paths, endpoints and messages through ``PublicView``.

A local front end (``deepsearcher mcp`` over stdio, used by the person who runs it) gets the
same pipeline with ``remote=False``: no queue, no budget cut, paths shown as stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from starlette.requests import Request

from deepsearcher import errors
from deepsearcher.config import Settings
from deepsearcher.errors import check_question_length
from deepsearcher.options import QueryOptions
from deepsearcher.research import Report, ResearchEvent, ResearchRequest
from deepsearcher.research.models import Source as ReportSource
from deepsearcher.searcher import (
    CollectionInfo,
    DeepSearcher,
    Passages,
    validate_collection_name,
)
from deepsearcher.server.access import Access
from deepsearcher.server.disconnect import connection_of
from deepsearcher.server.errors import ClientGone, RequestError, search_timeout
from deepsearcher.server.guard import SearchSlot, SearchSlots
from deepsearcher.server.load import HTTPLoads, default_upload_dir
from deepsearcher.server.openai_api import DEFAULT_MODEL, LoadRequest, parse_body
from deepsearcher.server.public import PublicView, common_root
from deepsearcher.server.stream import Run
from deepsearcher.types import Answer, DoneEvent, Event, Hit, LoadReport, NoteEvent, Usage

logger = logging.getLogger(__name__)

T = TypeVar("T")
_CHUNK_ID = re.compile(r"[0-9a-f]{40}")  # chunking.chunk_id_for: a sha1 hex digest
_BUSY_HINT = (
    "retry after the Retry-After seconds, or raise "
    "server.max_queued_searches / server.max_concurrent_searches"
)


@dataclass(frozen=True)
class SearchRequest:
    """One question as every front end hands it over: the text, the conversation before it as
    ``(role, text)`` turns (a follow-up is rewritten into a standalone question first), the
    typed options, and whether a cached answer may serve it."""

    question: str
    options: QueryOptions = field(default_factory=QueryOptions)
    history: Sequence[tuple[str, str]] = ()
    use_cache: bool = True


class SearchService:
    """Searches and research runs for the front ends, scoped, queued, timed and made public."""

    def __init__(
        self,
        searcher: DeepSearcher,
        settings: Settings | None = None,
        *,
        loads: HTTPLoads | None = None,
        remote: bool = True,
    ) -> None:
        settings = settings or searcher.settings
        self.searcher = searcher
        self.server = settings.server
        self.remote = remote
        self.loads = loads or HTTPLoads(
            searcher, settings.server, default_upload_dir(searcher.settings)
        )
        self.slots = SearchSlots(
            self.server.max_concurrent_searches, self.server.max_queued_searches
        )
        # Each collection's common folder, with the collection version it was computed at:
        # another server or a CLI load on the same store may change it at any time.
        self._roots: dict[str, tuple[str, Path | None]] = {}
        self.view = PublicView(settings, self.loads.upload_dir, self._root_of)

    # -- access -------------------------------------------------------------------------------

    async def readable(
        self, access: Access, named: Sequence[str], *, check_named: bool = True
    ) -> list[str] | None:
        """The collections ``access`` may read, or None for all of them. A named collection it
        may not read is a 403 before ``check_named`` looks for it (a 404), so a refused key
        learns nothing of what exists; a key that reads none of the collections is a 403
        rather than a search of nothing."""
        access.check_read(named)
        if check_named:
            await self.check_collections(named)
        if access.reads_all:
            return None
        infos = await self.searcher.acollections()
        return access.readable_or_refuse(i.name for i in infos)

    async def scoped(
        self, access: Access, options: QueryOptions, *, check_named: bool = True
    ) -> QueryOptions:
        """``options`` limited to the collections ``access`` may read. A named collection that
        does not exist is refused here, before the run waits for a slot: a 404 whose hint
        names ``/v1/models``, or without ``check_named`` the library's own error (a front end
        that is not HTTP, such as an MCP tool)."""
        named = list(options.collections or ())
        readable = await self.readable(access, named, check_named=check_named)
        if named and not check_named:
            await self.searcher.acheck_collections(named)
        if readable is None:
            return options
        return options.with_values({"allowed_collections": readable})

    async def check_collections(self, names: Sequence[str]) -> None:
        """A 404 for the first of ``names`` that is not a collection."""
        for name in names:
            try:
                validate_collection_name(name)
            except errors.StoreError:
                meta = None  # not a possible collection name: as unknown as a missing one
            else:
                meta = await self.searcher.astore.get_meta(name)
            if meta is None:
                raise RequestError(
                    404,
                    f"collection '{name}' does not exist",
                    type_="not_found_error",
                    code="collection_not_found",
                    hint=f"GET /v1/models lists the collections; model '{DEFAULT_MODEL}' searches all",
                )

    # -- deadlines and the queue --------------------------------------------------------------

    def query_options(self, options: QueryOptions) -> QueryOptions:
        """``options`` with the server's time budget. The run (search and answer) ends within
        its budget plus a small grace; 80% of the request timeout leaves that grace and the
        time to send the answer before the 504. The budget's name goes along, so a cut-short
        note names the limit that applied."""
        soft = self.server.request_timeout_s * 0.8
        if not self.remote or soft >= self.searcher.settings.query.timeout_s:
            return options
        return options.with_values({"timeout_s": soft, "budget_name": self._budget_name()})

    def research_budget(self) -> tuple[float, str | None]:
        """A research run's time budget and, when the server's deadline shortened it, the
        budget's name (as ``query_options`` does for a question)."""
        settings = self.searcher.settings
        run_s = settings.research.timeout_s or settings.query.timeout_s * (
            settings.research.budget_factor
        )
        soft = self.server.request_timeout_s * 0.8
        return min(run_s, soft), self._budget_name() if soft < run_s else None

    def _budget_name(self) -> str:
        return f"80% of server.request_timeout_s={self.server.request_timeout_s:g}s"

    async def within_deadline(self, work: Awaitable[T]) -> T:
        """``work``'s result, cancelled with the 504 when ``server.request_timeout_s`` passes."""
        try:
            return await asyncio.wait_for(work, self.server.request_timeout_s)
        except TimeoutError:
            raise search_timeout(self.server.request_timeout_s) from None

    async def acquire(self, hint: str = _BUSY_HINT) -> SearchSlot | None:
        """A place among the concurrent runs (None for a local front end, which has no queue);
        a 429 with ``Retry-After`` when the queue is full."""
        if not self.remote:
            return None
        slot = await self.slots.acquire()
        if slot is None:
            wait = self.slots.expected_wait_s()
            raise RequestError(
                429,
                f"server busy: {self.slots.limit} searches running and "
                f"{self.slots.max_queued} waiting",
                type_="rate_limit_error",
                code="server_busy",
                hint=hint,
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
        return slot

    async def queued(self, work: Awaitable[T], busy_hint: str = _BUSY_HINT) -> T:
        """``work`` run in a search slot, within the deadline (which starts once the slot
        is held)."""
        try:
            slot = await self.acquire(busy_hint)
        except BaseException:
            if asyncio.iscoroutine(work):
                work.close()  # refused before it started: never awaited, and not a leak
            raise
        try:
            return await self.within_deadline(work)
        finally:
            if slot is not None:
                slot.release()

    async def stream(self, source: AsyncIterator[T]) -> Run[T]:
        """``source``'s events as a ``Run`` holding a search slot, against the deadline."""
        slot = await self.acquire()
        return Run(source, slot, self.server.request_timeout_s)

    # -- cancel on disconnect -----------------------------------------------------------------

    async def unless_gone(self, scope: Mapping[str, Any], work: Awaitable[T], what: str) -> T:
        """``work``'s result, or ``ClientGone`` when the client hung up first: then ``work`` (a
        search and its LLM calls, a report's many) is cancelled rather than finished for
        nobody, and its search slot is freed. ``scope`` is the HTTP request's, whatever the
        transport (a route, an MCP tool call); the connection watch there must have seen the
        request's body (``disconnect.DisconnectWatchMiddleware``)."""
        conn = connection_of(scope)
        if conn is None:  # not over HTTP (an MCP stdio client): nobody to watch
            return await work
        task = asyncio.ensure_future(work)
        gone = asyncio.ensure_future(conn.wait_gone())
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not task.done():
                task.cancel()
                await asyncio.wait({task})  # its slot is released before we go on
        if task.cancelled():
            logger.info("client disconnected: %s cancelled", what)
            raise ClientGone(what)
        return task.result()

    # -- questions ----------------------------------------------------------------------------

    async def answer(
        self,
        access: Access,
        ask: SearchRequest,
        *,
        check_named: bool = True,
        on_event: Callable[[Event], Awaitable[None]] | None = None,
        busy_hint: str = _BUSY_HINT,
    ) -> Answer:
        """The answer over what ``access`` may read, as the client may see it, after waiting
        in the queue; ``on_event`` hears each step (as the client may see it) on the way."""
        ask = dataclasses.replace(
            ask, options=await self.scoped(access, ask.options, check_named=check_named)
        )
        answer = await self.queued(self._collect(ask, on_event), busy_hint)
        return await self.public_answer(answer)

    async def answer_stream(self, access: Access, ask: SearchRequest) -> Run[Event]:
        """The search over what ``access`` may read, event by event, holding a search slot."""
        ask = dataclasses.replace(ask, options=await self.scoped(access, ask.options))
        return await self.stream(self._events(ask))

    async def _events(self, ask: SearchRequest) -> AsyncIterator[Event]:
        """The search's events; a follow-up is first rewritten into a standalone question."""
        usage = Usage()
        notes: list[str] = []
        question = ask.question
        if ask.history:
            question, note = await self.searcher.arewrite_followup(question, ask.history, usage)
            if note:
                notes.append(note)
            yield NoteEvent(message=note or f"standalone question: {question}")
        options = self.query_options(ask.options)
        async for event in self.searcher.astream(question, options, use_cache=ask.use_cache):
            if isinstance(event, DoneEvent) and event.answer is not None:
                event.answer.usage.add(usage)
                event.answer.notes[:0] = notes
            yield event

    async def _collect(
        self, ask: SearchRequest, on_event: Callable[[Event], Awaitable[None]] | None
    ) -> Answer:
        async for event in self._events(ask):
            if on_event is not None:
                await on_event(self.view.event(event) if self.remote else event)
            if isinstance(event, DoneEvent) and event.answer is not None:
                return event.answer
        raise errors.DeepSearcherError("the search ended without an answer")

    # -- passages and collections -------------------------------------------------------------

    async def passages(self, access: Access, query: str, options: QueryOptions) -> Passages:
        """The passages most similar to ``query`` that ``access`` may read (no LLM, no search
        slot), within the deadline, with paths as the client may see them."""
        check_question_length(query, self.server.max_question_chars, "query")

        async def search() -> Passages:
            scoped = await self.scoped(access, options, check_named=False)
            return await self.searcher.asearch(query, scoped)

        found = await self.within_deadline(search())
        return Passages(await self.public_hits(found.hits), found.notes)

    async def passage(self, access: Access, collection: str, chunk_id: str) -> Hit:
        """The stored passage ``chunk_id`` of ``collection``: 403 unless ``access`` may read
        the collection, then 404 when there is no such passage."""
        access.check_read([collection])
        try:
            validate_collection_name(collection)
        except errors.StoreError:
            raise RequestError(
                404, f"no collection '{collection}'", type_="not_found_error"
            ) from None
        if not _CHUNK_ID.fullmatch(chunk_id):
            raise RequestError(
                404, f"no passage '{chunk_id}': ids are 40 hex digits", type_="not_found_error"
            )
        try:
            hit = await self.searcher.astore.get_chunk(collection, chunk_id)
        except errors.CollectionNotFoundError:
            hit = None
        if hit is None:
            raise RequestError(
                404,
                f"no passage '{chunk_id}' in collection '{collection}'",
                type_="not_found_error",
            )
        return (await self.public_hits([hit]))[0]

    async def collections(self, access: Access) -> list[CollectionInfo]:
        """The collections ``access`` may read, each with its error when it cannot be opened
        (as the client may see it)."""
        infos = await self.searcher.acollections()
        return [i for i in infos if access.readable(i.name)]

    # -- loads --------------------------------------------------------------------------------

    async def load(self, access: Access, request: Request) -> LoadReport:
        """``/v1/load``: uploaded files (multipart) or paths under ``server.load_root`` (JSON).
        A key that may load nowhere is refused before the body is read, so it uploads
        nothing; the target collection is checked before anything is stored."""
        access.check_load()
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            report = await self.loads.load_uploads(request, authorize=access.check_load)
            return self.public_load(report)
        return await self.load_paths(access, parse_body(await request.body(), LoadRequest))

    async def load_paths(self, access: Access, req: LoadRequest) -> LoadReport:
        """Load paths under ``server.load_root`` into a collection ``access`` may load into."""
        access.check_load(req.collection or self.searcher.settings.vector_store.collection)
        return self.public_load(await self.loads.load_paths(req))

    # -- research -----------------------------------------------------------------------------

    async def research_request(
        self, access: Access, text: str, collections: list[str] | None = None, **limits: object
    ) -> ResearchRequest:
        """The run's request over ``collections`` (None: every collection ``access`` reads;
        a named one it may not read is a 403, one that does not exist a 404), with a time
        budget that ends before the server's deadline."""
        readable = await self.readable(access, collections or [])
        collections = collections or readable
        timeout_s, budget_name = self.research_budget()
        given = {k: v for k, v in limits.items() if v is not None}
        return ResearchRequest(
            text,
            collections=list(collections) if collections else None,
            timeout_s=timeout_s,
            budget_name=budget_name,
            **given,  # type: ignore[arg-type]  # the routes pass ResearchRequest's own fields
        )

    async def report(self, req: ResearchRequest) -> Report:
        """The report as the client may see it, after waiting in the queue."""
        report = await self.queued(self.searcher.aresearch(req))
        return await self.public_report(report)

    async def research_stream(self, req: ResearchRequest) -> Run[ResearchEvent]:
        return await self.stream(self.searcher.astream_research(req))

    # -- what the client sees -----------------------------------------------------------------

    def _root_of(self, name: str) -> Path | None:
        return self._roots.get(name, ("", None))[1]

    async def public_hits(self, hits: list[Hit]) -> list[Hit]:
        """Passages with source paths relative to a root the client knows of."""
        if not self.remote:
            return hits
        await self.learn_roots({h.collection for h in hits})
        return [dataclasses.replace(h, source=self.view.path(h.source, h.collection)) for h in hits]

    def public_load(self, report: LoadReport) -> LoadReport:
        """The load report without server paths in its failures."""
        return self.view.report(report) if self.remote else report

    async def learn_roots(self, collections: set[str | None]) -> None:
        """The common folder of each collection's files, which ``view`` shows paths under,
        re-read whenever the collection's version in the store moved (a load by any process)."""
        names = sorted(c for c in collections if c)
        if not names:
            return
        store = self.searcher.astore
        versions = await store.collection_versions(names)
        for name in names:
            version = versions.get(name, "")
            known = self._roots.get(name)
            # "" is a collection from before versions: it cannot say it changed.
            if known is None or not version or known[0] != version:
                records = await store.file_records(name)
                self._roots[name] = (version, common_root(records))

    async def public_answer(self, answer: Answer) -> Answer:
        """The answer with source paths relative to a root the client knows of."""
        if not self.remote:
            return answer
        await self.learn_roots({s.collection for s in answer.sources if s.kind == "doc"})
        return self.view.answer(answer)

    async def public_event(self, event: Event) -> Event:
        if isinstance(event, DoneEvent) and event.answer is not None:
            return DoneEvent(answer=await self.public_answer(event.answer))
        return self.view.event(event)

    async def public_report(self, report: Report) -> Report:
        """The report with source paths relative to a root the client knows of, and messages
        without the server's internals."""
        await self.learn_roots({e.collection for e in report.evidence if e.kind == "doc"})
        view = self.view
        evidence = {
            e.id: e
            if e.kind == "web"
            else dataclasses.replace(e, source=view.path(e.source, e.collection))
            for e in report.evidence
        }
        return dataclasses.replace(
            report,
            evidence=list(evidence.values()),
            sources=[
                ReportSource(s.n, evidence.get(s.evidence_id, s.evidence)) for s in report.sources
            ],
            notes=view.texts(report.notes),
            missing=view.texts(report.missing),
            cut_short=view.text(report.cut_short) if report.cut_short else None,
        )

    def public_research_event(self, event: ResearchEvent) -> dict[str, object]:
        d = event.to_dict()
        for key in ("message", "error", "cut_short", "result"):
            if isinstance(d.get(key), str):
                d[key] = self.view.text(d[key])
        return d
