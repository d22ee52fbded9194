"""Streaming a search to a client: its events handed across tasks with a deadline, and an SSE
response that frees the search's resources however the stream ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from deepsearcher.aio import TaskPump
from deepsearcher.server.errors import search_timeout
from deepsearcher.types import Event


class EventPump(TaskPump[Event]):
    """A search's events handed across tasks, read against the request's deadline."""

    async def next_within(self, deadline: float, timeout_s: float) -> Event | None:
        """The next event, None at the end; a 504 ``RequestError`` naming ``timeout_s`` when
        the deadline passes first."""
        try:
            return await self.next(deadline - asyncio.get_running_loop().time())
        except TimeoutError:
            raise search_timeout(timeout_s) from None


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
