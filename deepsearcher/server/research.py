"""Research reports over HTTP: the ``deepsearcher-research`` chat model and ``/v1/research``.

The chat model is stateless. A request whose brief has a clarifying question, in a
conversation with no earlier one, is answered with that question as the assistant turn (it
starts with ``CLARIFY_PREFIX``, which is how the next request recognises it); when the client
sends the conversation back with the user's reply, the user message before the question is the
request and the reply goes into the brief. A stream carries the stages as ``reasoning_content``
(and each event as ``deepsearcher_event``), then the report's Markdown. ``/v1/research`` returns
the JSON of ``deepsearcher research --json``. Both go through the same per-key access, search
slots, request deadline and body limit as the query routes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from deepsearcher import errors
from deepsearcher.aio import TaskPump
from deepsearcher.research import Report, ResearchEvent, ResearchRequest
from deepsearcher.research.models import Source
from deepsearcher.server.access import access_of
from deepsearcher.server.errors import RequestError, error_response, search_timeout
from deepsearcher.server.openai_api import (
    ChatMessage,
    ChatRequest,
    ChunkWriter,
    check_question,
    completion_body,
    parse_body,
    sse,
)
from deepsearcher.server.stream import EventStreamResponse
from deepsearcher.types import Usage

if TYPE_CHECKING:
    from deepsearcher.server.app import _Service

logger = logging.getLogger(__name__)

RESEARCH_MODEL = "deepsearcher-research"
CLARIFY_PREFIX = "Before I research this: "


class ResearchBody(BaseModel):
    """``POST /v1/research``."""

    model_config = ConfigDict(extra="forbid")
    request: str = Field(min_length=1)
    collections: list[str] | None = None
    max_sections: int | None = Field(None, ge=1, le=12)
    max_revisions: int | None = Field(None, ge=0, le=5)
    max_llm_calls: int | None = Field(None, ge=5)
    web: bool | None = None
    figures: bool = False
    # true: stop at the brief's clarifying question and return it (unless research.clarify is
    # off); send the reply back as "clarification" with the same request. false, as for the
    # CLI without a terminal: the brief records the assumption it made.
    clarify: bool = False
    clarification: str | None = None
    # The question "clarification" answers, as returned: the brief is then written with both
    # in one call. Without it the reply answers whatever question the brief asks.
    question: str | None = None


class NeedsClarification(Exception):
    """Ends a run at its brief: the question goes to the user, who may answer in a new
    request."""

    def __init__(self, question: str) -> None:
        super().__init__(question)
        self.question = question


def _asker(reply: str | None, ask: bool) -> Callable[[str], Awaitable[str | None]] | None:
    """The run's ``clarify`` callback: the user's reply when there is one; else stop the run
    with the question when asking is on; else none (the brief records its assumption)."""
    if reply is None and not ask:
        return None

    async def clarify(question: str) -> str | None:
        if reply is not None:
            return reply
        raise NeedsClarification(question)

    return clarify


# -- the conversation ------------------------------------------------------------------------


def research_turn(
    messages: Sequence[ChatMessage], max_chars: int
) -> tuple[str, tuple[str, str] | None, bool]:
    """(the request, our clarifying question and the user's reply to it or None, whether the
    conversation already had a clarifying question)."""
    turns = [m for m in messages if m.role in ("user", "assistant") and m.text().strip()]
    last = messages[-1]
    text = last.text().strip()
    if last.role != "user" or not text:
        raise RequestError(400, "the last message must be a user message holding the request")
    check_question(text, max_chars)
    asked = [i for i, m in enumerate(turns[:-1]) if _is_clarification(m)]
    if asked and asked[-1] == len(turns) - 2:  # the user answers our question
        before = [m for m in turns[: asked[-1]] if m.role == "user"]
        question = turns[asked[-1]].text().strip()[len(CLARIFY_PREFIX) :].strip()
        if before:
            return before[-1].text().strip(), (question, text), True
    return text, None, bool(asked)


def _is_clarification(m: ChatMessage) -> bool:
    return m.role == "assistant" and m.text().lstrip().startswith(CLARIFY_PREFIX)


# -- running ---------------------------------------------------------------------------------


async def _research_request(
    svc: _Service,
    request: Request,
    text: str,
    *,
    collections: list[str] | None = None,
    clarify: Callable[[str], Awaitable[str | None]] | None = None,
    clarification: tuple[str, str] | None = None,
    **limits: Any,
) -> ResearchRequest:
    """The run's request: the collections this key may read, and a time budget that ends
    before the server's deadline (as ``search_options`` does for a question)."""
    options = await svc.scoped(access_of(request.scope), {"collections": collections or []})
    names = collections or options.get("allowed_collections")  # None: every collection
    settings = svc.searcher.settings
    run_s = settings.research.timeout_s or settings.query.timeout_s * (
        settings.research.budget_factor
    )
    soft = svc.server.request_timeout_s * 0.8
    name = f"80% of server.request_timeout_s={svc.server.request_timeout_s:g}s"
    return ResearchRequest(
        text,
        collections=list(names) if names else None,
        timeout_s=min(run_s, soft),
        budget_name=name if soft < run_s else None,
        clarify=clarify,
        clarification=clarification,
        **{k: v for k, v in limits.items() if v is not None},
    )


async def public_report(svc: _Service, report: Report) -> Report:
    """The report with source paths relative to a root the client knows of, and messages
    without the server's internals."""
    await svc.learn_roots({e.collection for e in report.evidence if e.kind == "doc"})
    view = svc.view
    evidence = {
        e.id: e
        if e.kind == "web"
        else dataclasses.replace(e, source=view.path(e.source, e.collection))
        for e in report.evidence
    }
    return dataclasses.replace(
        report,
        evidence=list(evidence.values()),
        sources=[Source(s.n, evidence.get(s.evidence_id, s.evidence)) for s in report.sources],
        notes=view.texts(report.notes),
        missing=view.texts(report.missing),
        cut_short=view.text(report.cut_short) if report.cut_short else None,
    )


async def _report(svc: _Service, req: ResearchRequest, web: bool | None) -> Report:
    slot = await svc.acquire()
    timeout = svc.server.request_timeout_s
    try:
        report = await asyncio.wait_for(svc.searcher.aresearch(req, web=web), timeout)
    except TimeoutError:
        raise search_timeout(timeout) from None
    finally:
        slot.release()
    return await public_report(svc, report)


async def _unless_gone(request: Request, work: Awaitable[Any]) -> Any:
    """``work``'s result, or None when the client hung up first (the run is cancelled then:
    a report nobody reads is many LLM calls wasted)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
    if task.cancelled():
        logger.info("client disconnected: research cancelled")
        return None
    return task.result()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


# -- chat ------------------------------------------------------------------------------------


async def research_chat(svc: _Service, request: Request, req: ChatRequest) -> Response:
    """``/v1/chat/completions`` with ``model: deepsearcher-research``."""
    text, answered, asked_before = research_turn(req.messages, svc.server.max_question_chars)
    ask = svc.searcher.settings.research.clarify and not asked_before
    rreq = await _research_request(
        svc, request, text, clarify=_asker(None, ask), clarification=answered
    )
    if req.stream:
        return await _stream(svc, req, rreq)
    try:
        report = await _unless_gone(request, _report(svc, rreq, None))
    except NeedsClarification as q:
        return JSONResponse(
            completion_body(req.model, CLARIFY_PREFIX + q.question, Usage(), {"deepsearcher": {}})
        )
    if report is None:
        return Response(status_code=499)
    details = {k: v for k, v in report.to_dict().items() if k not in ("sections", "summary")}
    return JSONResponse(
        completion_body(req.model, report.to_markdown(), report.usage, {"deepsearcher": details})
    )


async def _stream(svc: _Service, req: ChatRequest, rreq: ResearchRequest) -> Response:
    slot = await svc.acquire()
    timeout = svc.server.request_timeout_s
    deadline = asyncio.get_running_loop().time() + timeout
    pump: TaskPump[ResearchEvent] = TaskPump(svc.searcher.astream_research(rreq))

    def close() -> None:
        pump.close()
        slot.release()

    async def next_event() -> ResearchEvent | None:
        try:
            return await pump.next(deadline - asyncio.get_running_loop().time())
        except TimeoutError:
            raise search_timeout(timeout) from None

    try:  # a clarifying question, or a failure before the first event, is a whole reply
        first = await next_event()
    except NeedsClarification as q:
        close()
        out = ChunkWriter(req.model)
        frames = [
            out.frame({"role": "assistant", "content": ""}),
            out.frame({"content": CLARIFY_PREFIX + q.question}, "stop"),
            *([out.usage(Usage())] if req.include_usage else []),
            sse("[DONE]"),
        ]
        return EventStreamResponse(_iterate(frames), lambda: None)
    except BaseException:
        close()
        raise
    return EventStreamResponse(_chunks(svc, req, first, next_event), close)


async def _iterate(frames: list[str]) -> AsyncIterator[str]:
    for frame in frames:
        yield frame


async def _chunks(
    svc: _Service,
    req: ChatRequest,
    event: ResearchEvent | None,
    next_event: Callable[[], Awaitable[ResearchEvent | None]],
) -> AsyncIterator[str]:
    out = ChunkWriter(req.model)
    yield out.frame({"role": "assistant", "content": ""})
    try:
        while event is not None:
            if event.type == "done" and event.report is not None:
                report = await public_report(svc, event.report)
                details = {
                    k: v for k, v in report.to_dict().items() if k not in ("sections", "summary")
                }
                yield out.frame({"content": report.to_markdown()}, "stop", deepsearcher=details)
                if req.include_usage:
                    yield out.usage(report.usage)
                yield sse("[DONE]")
                return
            line = progress_line(event)
            delta = {"reasoning_content": svc.view.text(line) + "\n"} if line else {}
            yield out.frame(delta, deepsearcher_event=_public_event(svc, event))
            event = await next_event()
        raise errors.DeepSearcherError("the research run ended without a report")
    except (RequestError, errors.DeepSearcherError) as exc:
        body = error_response(exc, svc.view.text).body
        yield sse(bytes(body).decode())


def _public_event(svc: _Service, event: ResearchEvent) -> dict[str, Any]:
    d = event.to_dict()
    for key in ("message", "error", "cut_short", "result"):
        if isinstance(d.get(key), str):
            d[key] = svc.view.text(d[key])
    return d


def progress_line(event: ResearchEvent) -> str | None:
    """One plain line per stage, for a chat client's reasoning pane."""
    if event.type == "brief" and event.brief is not None:
        return f"Brief: {event.brief.goal} ({len(event.brief.must_answer)} question(s))"
    if event.type == "plan" and event.plan is not None:
        titles = "; ".join(s.title for s in event.plan.sections)
        return f"Plan: {len(event.plan.sections)} section(s): {titles}"
    if event.type == "researcher_started":
        return f"Researching: {event.section}"
    if event.type == "researcher_finished":
        if event.error:
            return f"Section '{event.section}' missing: {event.error}"
        return f"Done: {event.section} ({event.findings} finding(s), {event.calls} calls)"
    if event.type == "quality" and event.quality is not None:
        q = event.quality
        return (
            f"Check: coverage {q.coverage:.0%}, {len(q.uncited_sentences)} uncited, "
            f"{len(q.contradictions)} conflicting source pair(s)"
        )
    if event.type == "revision":
        return f"Revision {event.round}: researching {'; '.join(event.gaps)}"
    if event.type == "note":
        return f"Note: {event.message}"
    if event.type == "tool_call":
        return f"Tool {event.tool}: {event.result}"
    return None


# -- /v1/research ----------------------------------------------------------------------------


def research_routes(svc: _Service) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/research")
    async def research(request: Request) -> Response:
        body: ResearchBody = parse_body(await request.body(), ResearchBody)
        check_question(body.request, svc.server.max_question_chars)
        ask = body.clarify and svc.searcher.settings.research.clarify
        reply, answered = body.clarification, None
        if reply is not None and body.question:
            reply, answered = None, (body.question, body.clarification or "")
        rreq = await _research_request(
            svc,
            request,
            body.request,
            collections=body.collections,
            clarify=_asker(reply, ask),
            clarification=answered,
            max_sections=body.max_sections,
            max_revisions=body.max_revisions,
            max_llm_calls=body.max_llm_calls,
            figures=body.figures,
        )
        try:
            report = await _unless_gone(request, _report(svc, rreq, body.web))
        except NeedsClarification as q:
            return JSONResponse(
                {
                    "object": "research.clarification",
                    "request": body.request,
                    "question": q.question,
                    "hint": "send the same request again with this question as 'question' and "
                    "your answer as 'clarification', or without clarify to let the brief "
                    "assume",
                }
            )
        if report is None:
            return Response(status_code=499)
        return JSONResponse(report.to_dict())

    return router
