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

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from deepsearcher.describe import describe_event
from deepsearcher.research import ResearchEvent, ResearchRequest
from deepsearcher.server.access import access_of
from deepsearcher.server.errors import RequestError
from deepsearcher.server.openai_api import (
    ChatMessage,
    ChatRequest,
    ChunkWriter,
    check_question,
    completion_body,
    parse_body,
    sse,
)
from deepsearcher.server.service import SearchService
from deepsearcher.server.stream import ChatFrames, EventStreamResponse, chat_stream
from deepsearcher.types import Usage

logger = logging.getLogger(__name__)

RESEARCH_MODEL = "deepsearcher-research"
CLARIFY_PREFIX = "Before I research this: "


class ResearchBody(BaseModel):
    """``POST /v1/research``."""

    model_config = ConfigDict(extra="forbid")
    request: str = Field(min_length=1)
    collections: list[str] | None = None
    # Types only: the ranges are ResearchRequest's (the research.* settings').
    max_sections: int | None = None
    max_revisions: int | None = None
    max_llm_calls: int | None = None
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

    @model_validator(mode="after")
    def _check_limits(self) -> ResearchBody:
        # Refused when the body is read, before access or the queue: InvalidOptionError is
        # not a ValueError, so pydantic lets it through to the server's error handler (a 400
        # naming the field).
        ResearchRequest(
            self.request,
            max_sections=self.max_sections,
            max_revisions=self.max_revisions,
            max_llm_calls=self.max_llm_calls,
        )
        return self


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


# -- chat ------------------------------------------------------------------------------------


async def research_chat(svc: SearchService, request: Request, req: ChatRequest) -> Response:
    """``/v1/chat/completions`` with ``model: deepsearcher-research``."""
    text, answered, asked_before = research_turn(req.messages, svc.server.max_question_chars)
    ask = svc.searcher.settings.research.clarify and not asked_before
    rreq = await svc.research_request(
        access_of(request.scope), text, clarify=_asker(None, ask), clarification=answered
    )
    if req.stream:
        return await _stream(svc, req, rreq)
    try:
        report = await svc.unless_gone(request.scope, svc.report(rreq), "research")
    except NeedsClarification as q:
        return JSONResponse(
            completion_body(req.model, CLARIFY_PREFIX + q.question, Usage(), {"deepsearcher": {}})
        )
    details = {k: v for k, v in report.to_dict().items() if k not in ("sections", "summary")}
    return JSONResponse(
        completion_body(req.model, report.to_markdown(), report.usage, {"deepsearcher": details})
    )


async def _stream(svc: SearchService, req: ChatRequest, rreq: ResearchRequest) -> Response:
    run = await svc.research_stream(rreq)
    try:  # a clarifying question, or a failure before the first event, is a whole reply
        return await chat_stream(
            req, run, _ReportFrames(svc), svc.view.text, "the research run ended without a report"
        )
    except NeedsClarification as q:
        out = ChunkWriter(req.model)
        frames = [
            out.frame({"role": "assistant", "content": ""}),
            out.frame({"content": CLARIFY_PREFIX + q.question}, "stop"),
            *([out.usage(Usage())] if req.include_usage else []),
            sse("[DONE]"),
        ]
        return EventStreamResponse(_iterate(frames), lambda: None)


async def _iterate(frames: list[str]) -> AsyncIterator[str]:
    for frame in frames:
        yield frame


class _ReportFrames:
    """A research run as chat frames: each stage as ``reasoning_content`` and a
    ``deepsearcher_event``, then the report's Markdown."""

    def __init__(self, svc: SearchService) -> None:
        self.svc = svc

    async def __call__(self, event: ResearchEvent, out: ChunkWriter) -> ChatFrames:
        svc = self.svc
        if event.type == "done" and event.report is not None:
            report = await svc.public_report(event.report)
            details = {
                k: v for k, v in report.to_dict().items() if k not in ("sections", "summary")
            }
            last = out.frame({"content": report.to_markdown()}, "stop", deepsearcher=details)
            return ChatFrames([last], report.usage)
        line = describe_event(event, "line")
        delta = {"reasoning_content": svc.view.text(line) + "\n"} if line else {}
        return ChatFrames([out.frame(delta, deepsearcher_event=svc.public_research_event(event))])


def progress_line(event: ResearchEvent) -> str | None:
    """One plain line per stage, for a chat client's reasoning pane."""
    return describe_event(event, "line")


# -- /v1/research ----------------------------------------------------------------------------


def research_routes(svc: SearchService) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/research")
    async def research(request: Request) -> Response:
        body: ResearchBody = parse_body(await request.body(), ResearchBody)
        check_question(body.request, svc.server.max_question_chars)
        ask = body.clarify and svc.searcher.settings.research.clarify
        reply, answered = body.clarification, None
        if reply is not None and body.question:
            reply, answered = None, (body.question, body.clarification or "")
        rreq = await svc.research_request(
            access_of(request.scope),
            body.request,
            collections=body.collections,
            clarify=_asker(reply, ask),
            clarification=answered,
            max_sections=body.max_sections,
            max_revisions=body.max_revisions,
            max_llm_calls=body.max_llm_calls,
            figures=body.figures,
            web=body.web,
        )
        try:
            report = await svc.unless_gone(request.scope, svc.report(rreq), "research")
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
        return JSONResponse(report.to_dict())

    return router
