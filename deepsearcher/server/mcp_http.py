"""``/mcp``: the MCP server over streamable HTTP, as a route of the HTTP app.

The SDK's session manager speaks the protocol. In front of it stand two things the SDK does not
do: MCP sessions are bounded per client (an API key, or the client's address without keys) and
in all, so one key cannot take every session and lock the others out (the SDK's own bound is
global: 10,000 sessions by default, for 30 minutes each); and the transport's own refusals (a
bad or expired session id, a wrong Accept header, an over-size body: JSON-RPC or plain text)
reach the client in the server's one error shape, like every other route's.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from http import HTTPStatus

from mcp.server.mcpserver import MCPServer
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deepsearcher.config import ServerSettings
from deepsearcher.server.access import KEY_ID_SCOPE_KEY, access_of
from deepsearcher.server.errors import RequestError, send_error

logger = logging.getLogger(__name__)

# The SDK's default body limit, stated: JSON-RPC messages are small (uploads go to /v1/load).
MCP_MAX_BODY_BYTES = 4 * 2**20
_SESSION_HEADER = b"mcp-session-id"


@dataclass
class _Session:
    owner: str
    in_flight: int = 0
    last_active: float = field(default_factory=time.monotonic)


class SessionLedger:
    """Who opened each MCP session and whether it is still open. A session ends when its
    client deletes it or, as the SDK has it, after ``idle_s`` with no request in flight (an
    open event stream is one). Used from the event loop thread only."""

    def __init__(self, per_client: int, max_sessions: int, idle_s: float) -> None:
        self.per_client = per_client
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self._sessions: dict[str, _Session] = {}
        self._opening: Counter[str] = Counter()  # sessions being opened, by owner

    def _prune(self, now: float) -> None:
        expired = [sid for sid, s in self._sessions.items() if self._ends_at(s) <= now]
        for sid in expired:
            del self._sessions[sid]

    def _ends_at(self, session: _Session) -> float:
        return math.inf if session.in_flight else session.last_active + self.idle_s

    def _wait_s(self, sessions: Iterable[_Session], now: float) -> int:
        """Seconds until the first of ``sessions`` ends by itself (the idle time when none
        is idle: all of them are busy)."""
        soonest = min((self._ends_at(s) for s in sessions), default=math.inf)
        wait = soonest - now if math.isfinite(soonest) else self.idle_s
        return max(1, math.ceil(wait))

    def admit(self, owner: str, shown: str) -> RequestError | None:
        """Room for ``owner`` to open a session (held until ``opened``), or the refusal."""
        now = time.monotonic()
        self._prune(now)
        mine = [s for s in self._sessions.values() if s.owner == owner]
        if len(mine) + self._opening[owner] >= self.per_client:
            logger.warning("refused an MCP session to %s: %d open", shown, len(mine))
            return RequestError(
                429,
                f"too many open MCP sessions: {shown} holds {len(mine)} "
                f"(server.mcp_sessions_per_client={self.per_client})",
                type_="rate_limit_error",
                code="mcp_sessions_exceeded",
                hint="reuse an open session, or end those no longer used (DELETE /mcp with "
                "their Mcp-Session-Id, or close the client); an idle session ends after "
                f"server.mcp_session_idle_s={self.idle_s:g}s",
                headers={"Retry-After": str(self._wait_s(mine, now))},
            )
        if len(self._sessions) + self._opening.total() >= self.max_sessions:
            logger.warning("refused an MCP session to %s: the server holds its maximum", shown)
            return self.server_full()
        self._opening[owner] += 1
        return None

    def server_full(self) -> RequestError:
        now = time.monotonic()
        return RequestError(
            503,
            f"too many open MCP sessions on this server "
            f"(server.mcp_max_sessions={self.max_sessions})",
            type_="server_error",
            code="mcp_sessions_full",
            hint="retry after the Retry-After seconds, or ask the operator to raise "
            "server.mcp_max_sessions",
            headers={"Retry-After": str(self._wait_s(self._sessions.values(), now))},
        )

    def opened(self, owner: str, session_id: str | None) -> None:
        """The opening request answered: with a session id when it opened one."""
        self._opening[owner] -= 1
        if self._opening[owner] <= 0:
            del self._opening[owner]
        if session_id:
            self._sessions[session_id] = _Session(owner, in_flight=1)

    def owner_of(self, session_id: str) -> str | None:
        session = self._sessions.get(session_id)
        return session.owner if session is not None else None

    def begin(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight += 1

    def end(self, session_id: str, status: int | None, method: str) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            return
        session.in_flight = max(0, session.in_flight - 1)
        session.last_active = time.monotonic()
        if status == 404 or (method == "DELETE" and status is not None and status < 300):
            del self._sessions[session_id]  # ended by its client, or gone from the SDK

    def open_sessions(self) -> int:
        self._prune(time.monotonic())
        return len(self._sessions)


def _client(scope: Scope) -> tuple[str, str]:
    """Who is asking, for the bound per client: the API key, else the client's address;
    and how a message names them."""
    key_id = scope.get(KEY_ID_SCOPE_KEY)
    if isinstance(key_id, str):
        return f"key:{key_id}", f"API key '{access_of(scope).name}'"
    host = (scope.get("client") or ("unknown", 0))[0]
    return f"address:{host}", f"client {host}"


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class McpEndpoint:
    """The ASGI app at ``/mcp``: the SDK's handler behind the session bounds and the error
    shape."""

    def __init__(self, handle: ASGIApp, ledger: SessionLedger) -> None:
        self.handle = handle
        self.ledger = ledger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.handle(scope, receive, send)
            return
        owner, shown = _client(scope)
        method = scope.get("method", "")
        session_id = _header(scope["headers"], _SESSION_HEADER)
        opening = session_id is None and method == "POST"
        if opening:
            refusal = self.ledger.admit(owner, shown)
            if refusal is not None:
                await send_error(send, refusal)
                return
        elif session_id is not None:
            if self.ledger.owner_of(session_id) not in (None, owner):
                # Another client's session: answered as the SDK answers an unknown one.
                await send_error(send, _transport_error(404, b"Session not found", []))
                return
            self.ledger.begin(session_id)
        status: int | None = None
        shaped = _ErrorShape(send, self.ledger)

        async def watch(message: Message) -> None:
            nonlocal status, session_id
            if message["type"] == "http.response.start":
                status = message["status"]
                if opening:
                    opened = _header(message.get("headers", []), _SESSION_HEADER)
                    self.ledger.opened(owner, opened if status < 400 else None)
                    session_id = opened if status < 400 else None
            await shaped.send(message)

        try:
            await self.handle(scope, receive, watch)
        finally:
            if opening and status is None:
                self.ledger.opened(owner, None)  # no answer at all: nothing was opened
            if session_id is not None:
                self.ledger.end(session_id, status, method)


class _ErrorShape:
    """Passes responses through, but holds one with an error status, reads its body and sends
    it again in the server's error shape (the SDK answers JSON-RPC errors, or plain text)."""

    def __init__(self, send: Send, ledger: SessionLedger) -> None:
        self._send = send
        self._ledger = ledger
        self._held: Message | None = None
        self._body: list[bytes] = []

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            self._held = message
            return
        if self._held is None or message["type"] != "http.response.body":
            await self._send(message)
            return
        self._body.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        status = self._held["status"]
        if status == 503:  # the SDK's own bound: its words are "Too many open sessions"
            error = self._ledger.server_full()
        else:
            error = _transport_error(status, b"".join(self._body), self._held.get("headers", []))
        self._held = None
        await send_error(self._send, error)


# Status -> (OpenAI error type, code, hint) for the transport's refusals.
_TRANSPORT_ERRORS: dict[int, tuple[str, str, str]] = {
    400: (
        "invalid_request_error",
        "invalid_mcp_request",
        "send one JSON-RPC message per POST with the Mcp-Session-Id and "
        "Mcp-Protocol-Version headers of an initialized session (an MCP client does this)",
    ),
    404: (
        "not_found_error",
        "mcp_session_not_found",
        "the session ended (it was deleted, or idle longer than server.mcp_session_idle_s): "
        "initialize a new one",
    ),
    405: (
        "invalid_request_error",
        "method_not_allowed",
        "POST JSON-RPC messages to /mcp; GET opens a session's event stream, DELETE ends it",
    ),
    406: (
        "invalid_request_error",
        "not_acceptable",
        "send 'Accept: application/json, text/event-stream' (GET: text/event-stream)",
    ),
    409: (
        "invalid_request_error",
        "conflict",
        "a session has one event stream (GET) at a time: close the other first",
    ),
    413: (
        "invalid_request_error",
        "request_too_large",
        f"an MCP message may be at most {MCP_MAX_BODY_BYTES / 2**20:g} MiB; load files with "
        "POST /v1/load",
    ),
    415: (
        "invalid_request_error",
        "unsupported_media_type",
        "send the body as JSON with 'Content-Type: application/json'",
    ),
}


def _transport_error(
    status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]]
) -> RequestError:
    """The transport's refusal in the server's shape: its message (a JSON-RPC error's, or the
    plain text), a type, code and hint by status, and its other headers (Allow, ...)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        text = str(parsed["error"].get("message", ""))
    if status == 413:
        text = f"request body is larger than {MCP_MAX_BODY_BYTES / 2**20:g} MiB (the MCP limit)"
    message = (text.splitlines() or [""])[0][:300] or HTTPStatus(status).phrase
    type_, code, hint = _TRANSPORT_ERRORS.get(
        status,
        ("server_error", "mcp_transport_error", "retry; the server log says more")
        if status >= 500
        else ("invalid_request_error", "invalid_mcp_request", _TRANSPORT_ERRORS[400][2]),
    )
    kept = {
        k.decode("latin-1"): v.decode("latin-1")
        for k, v in headers
        if k.lower() not in (b"content-type", b"content-length")
    }
    return RequestError(status, message, type_=type_, code=code, hint=hint, headers=kept)


def http_routes(mcp: MCPServer, server: ServerSettings, path: str = "/mcp") -> list[BaseRoute]:
    """The streamable HTTP endpoint as a route of the HTTP app, which runs
    ``mcp.session_manager.run()`` in its lifespan. The SDK's own Host/Origin check is off: the
    app's BrowserGuardMiddleware and API keys stand in front of every route, this one too, with
    the server's configured names rather than the SDK's loopback-only list."""
    from mcp.server.transport_security import TransportSecuritySettings

    mcp.streamable_http_app(  # creates mcp.session_manager with these bounds
        streamable_http_path=path,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=server.mcp_session_idle_s,
        max_sessions=server.mcp_max_sessions,
        max_request_body_size=MCP_MAX_BODY_BYTES,
    )
    ledger = SessionLedger(
        server.mcp_sessions_per_client, server.mcp_max_sessions, server.mcp_session_idle_s
    )
    return [Route(path, endpoint=McpEndpoint(mcp.session_manager.handle_request, ledger))]
