"""Small asyncio helpers shared by the agents and the server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

T = TypeVar("T")


class _End:
    """Marks the end of the source in the queue."""


class TaskPump(Generic[T]):
    """Consumes an async iterator in a task of its own and hands its items over a queue, so
    the reader can stop waiting at a deadline. Cancelling a task is clean; cancelling across
    an async generator's yields is not (the cancellation would land in whatever the consumer
    awaits at that moment). An exception in the source is raised by ``next``."""

    def __init__(self, source: AsyncIterator[T]) -> None:
        self._queue: asyncio.Queue[T | _End | Exception] = asyncio.Queue()
        self._task = asyncio.create_task(self._run(source))

    async def _run(self, source: AsyncIterator[T]) -> None:
        try:
            async for item in source:
                self._queue.put_nowait(item)
        except Exception as exc:  # handed to the reader, which raises it
            self._queue.put_nowait(exc)
        else:
            self._queue.put_nowait(_End())

    async def next(self, timeout_s: float) -> T | None:
        """The next item, None at the end; ``TimeoutError`` when ``timeout_s`` passes first."""
        item = await asyncio.wait_for(self._queue.get(), max(timeout_s, 0.001))
        if isinstance(item, _End):
            return None
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self._task.cancel()
