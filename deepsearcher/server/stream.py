"""Streaming a run: ``Run``, a search or research run read event by event against the request's
deadline, holding its search slot; and the one loop that turns a run's events into
``chat.completion.chunk`` frames (``chat_stream``), for a search and a research report alike,
in an SSE response that frees the run's resources (its slot, its task: ``Run.close``) however
the stream ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from deepsearcher import errors
from deepsearcher.aio import TaskPump
from deepsearcher.server.errors import RequestError, error_response, search_timeout
from deepsearcher.server.guard import SearchSlot
from deepsearcher.server.openai_api import ChatRequest, ChunkWriter, sse
from deepsearcher.types import Usage

E = TypeVar("E")
T = TypeVar("T")


class EventStreamResponse(StreamingResponse):
    """SSE whose cleanup (search slot, search task) runs however the stream ends."""

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[str], on_close: Callable[[], None]) -> None:
        super().__init__(content, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


class Run(Generic[T]):
    """A run being streamed: its events read against the request's deadline, its search slot
    held until ``close`` (which also cancels the run)."""

    def __init__(self, source: AsyncIterator[T], slot: SearchSlot | None, timeout_s: float):
        self.timeout_s = timeout_s
        self._deadline = asyncio.get_running_loop().time() + timeout_s
        self._pump: TaskPump[T] = TaskPump(source)
        self._slot = slot

    async def next(self) -> T | None:
        """The next event, None at the end; the 504 when the deadline passes first."""
        try:
            return await self._pump.next(self._deadline - asyncio.get_running_loop().time())
        except TimeoutError:
            raise search_timeout(self.timeout_s) from None

    def close(self) -> None:
        self._pump.close()
        if self._slot is not None:
            self._slot.release()


@dataclass
class ChatFrames:
    """What one event of a run becomes: its frames, and on the run's last event its usage."""

    frames: list[str] = field(default_factory=list)
    usage: Usage | None = None  # set: this was the last event


# How a kind of run words its events as frames (a search's answer deltas, a report's stages).
FrameEvent = Callable[[E, ChunkWriter], Awaitable[ChatFrames]]


async def chat_stream(
    req: ChatRequest,
    run: Run[E],
    frame_event: FrameEvent[E],
    public: Callable[[str], str],
    ended: str,
) -> EventStreamResponse:
    """``run`` as a chat stream: the first event is awaited here, so a failure before it
    (a 403, a full queue, a bad option) is still a real HTTP status; then the frames follow.
    ``ended`` is the error when the run stops without a last event; ``public`` strips what a
    client must not see from errors."""
    try:
        first = await run.next()
    except BaseException:
        run.close()
        raise
    return EventStreamResponse(_frames(req, first, run, frame_event, public, ended), run.close)


async def _frames(
    req: ChatRequest,
    event: E | None,
    run: Run[E],
    frame_event: FrameEvent[E],
    public: Callable[[str], str],
    ended: str,
) -> AsyncIterator[str]:
    out = ChunkWriter(req.model)
    yield out.frame({"role": "assistant", "content": ""})
    try:
        while event is not None:
            step = await frame_event(event, out)
            for frame in step.frames:
                yield frame
            if step.usage is not None:
                if req.include_usage:
                    yield out.usage(step.usage)
                yield sse("[DONE]")
                return
            event = await run.next()
        raise errors.DeepSearcherError(ended)
    except (RequestError, errors.DeepSearcherError) as exc:
        # Headers are gone: the OpenAI clients raise on an error object in the stream.
        yield sse(bytes(error_response(exc, public).body).decode())
