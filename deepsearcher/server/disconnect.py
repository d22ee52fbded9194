"""Knowing when a client has gone, for every route and transport alike.

ASGI tells an app that its client closed the connection only as an ``http.disconnect`` message
from ``receive()``, and only to a caller of ``receive()``. A route that waits for its search
can ask; a transport that has handed the request to work running elsewhere never does: the MCP
SDK runs a tool call in its session's task, and nothing there reads the POST that carried the
call, so a client whose socket closed went on costing LLM calls and a search slot. This
middleware reads ``receive()`` itself once the body is in, marks the request's
``ClientConnection`` gone when the client leaves, and answers the app's own later calls from
that, so there is one reader and one answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

SCOPE_KEY = "deepsearcher.connection"


class ClientConnection:
    """Whether the client of one HTTP request is still connected."""

    def __init__(self) -> None:
        self._gone = asyncio.Event()

    @property
    def gone(self) -> bool:
        return self._gone.is_set()

    async def wait_gone(self) -> None:
        """Returns once the client has closed the connection (or the response is complete)."""
        await self._gone.wait()

    def mark_gone(self) -> None:
        self._gone.set()


def connection_of(scope: Mapping[str, Any]) -> ClientConnection | None:
    """The request's connection watch (None outside the server's middleware)."""
    conn = scope.get(SCOPE_KEY)
    return conn if isinstance(conn, ClientConnection) else None


class DisconnectWatchMiddleware:
    """Puts a ``ClientConnection`` on each HTTP request's scope and keeps it up to date."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        conn = ClientConnection()
        scope[SCOPE_KEY] = conn
        watcher: asyncio.Task[None] | None = None

        async def watch() -> None:
            # After the body the server only ever says http.disconnect: when the client
            # closes the connection, or once the response is complete.
            while (await receive())["type"] != "http.disconnect":
                pass
            conn.mark_gone()

        async def app_receive() -> Message:
            nonlocal watcher
            if watcher is not None:  # the body is in: the watcher is the one reader now
                await conn.wait_gone()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                conn.mark_gone()
            elif not message.get("more_body", False):
                watcher = asyncio.create_task(watch())
            return message

        try:
            await self.app(scope, app_receive, send)
        finally:
            if watcher is not None:
                watcher.cancel()
