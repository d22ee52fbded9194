"""Streaming a search to a client: its events handed across tasks with a deadline, and an SSE
response that frees the search's resources however the stream ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from deepsearcher.server.errors import search_timeout
from deepsearcher.types import Event


class EventPump:
    """Runs a search in its own task and hands its events over a queue, so the stream can wait
    with a deadline and be cancelled without running the generator across tasks."""

    _END = object()

    def __init__(self, events: AsyncIterator[Event]) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task = asyncio.create_task(self._run(events))

    async def _run(self, events: AsyncIterator[Event]) -> None:
        try:
            async for event in events:
                self._queue.put_nowait(event)
        except Exception as exc:  # handed to the consumer, which maps it to an error frame
            self._queue.put_nowait(exc)
        else:
            self._queue.put_nowait(self._END)

    async def next(self, deadline: float, timeout_s: float) -> Event | None:
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            item = await asyncio.wait_for(self._queue.get(), max(remaining, 0.001))
        except TimeoutError:
            raise search_timeout(timeout_s) from None
        if item is self._END:
            return None
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self._task.cancel()


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
