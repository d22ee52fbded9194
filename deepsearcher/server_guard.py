"""What stands between the network and the searcher: API keys, the bind check, the request body
limit and the bound on concurrent deep searches. Plain ASGI, so it also covers 404s and streams.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Sequence
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deepsearcher.errors import ConfigError

API_KEYS_ENV = "DEEPSEARCHER_API_KEYS"
OPEN_PATHS = frozenset({"/healthz"})


def parse_api_keys(raw: str | None) -> list[str]:
    """Keys from ``DEEPSEARCHER_API_KEYS`` (comma separated; blanks ignored)."""
    return [k.strip() for k in (raw or "").split(",") if k.strip()]


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def check_bind(host: str, api_keys: Sequence[str], *, insecure: bool) -> None:
    """Refuse to expose private documents on a network interface without API keys."""
    if api_keys or insecure or is_loopback(host):
        return
    raise ConfigError(
        f"refusing to serve on {host} without API keys: anyone who can reach it could read "
        "your documents",
        f"set {API_KEYS_ENV}=key1,key2 (clients send 'Authorization: Bearer <key>'), bind "
        "127.0.0.1, or pass --insecure if a proxy in front of it authenticates",
    )


def error_body(
    message: str, type_: str, code: str | None = None, hint: str | None = None
) -> dict[str, Any]:
    """The OpenAI error shape; ``hint`` is our extra field saying what to change."""
    err: dict[str, Any] = {"message": message, "type": type_, "code": code}
    if hint:
        err["hint"] = hint
    return {"error": err}


async def send_error(
    send: Send,
    status: int,
    body: dict[str, Any],
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    data = json.dumps(body).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        *headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


class APIKeyMiddleware:
    """Every request but ``/healthz`` (and CORS preflights) needs ``Authorization: Bearer <key>``."""

    def __init__(self, app: ASGIApp, api_keys: Sequence[str]) -> None:
        self.app = app
        self._keys = [k.encode() for k in api_keys]

    def _allowed(self, scope: Scope) -> bool:
        if scope["path"] in OPEN_PATHS or scope.get("method") == "OPTIONS":
            return True
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            return False
        token = token.strip()
        # Compare against every key so timing does not tell which one nearly matched.
        return any([hmac.compare_digest(token, k) for k in self._keys])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        body = error_body(
            "missing or invalid API key",
            "authentication_error",
            "invalid_api_key",
            f"send 'Authorization: Bearer <key>' with one of the keys in {API_KEYS_ENV}",
        )
        await send_error(send, 401, body, [(b"www-authenticate", b"Bearer")])


class _TooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """413 for bodies over the limit: at once by Content-Length, else while reading (chunked)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reject(self, send: Send) -> None:
        mb = self.max_bytes / 1_000_000
        body = error_body(
            f"request body is larger than {mb:g} MB",
            "invalid_request_error",
            "request_too_large",
            "send smaller files, or raise server.max_request_mb",
        )
        await send_error(send, 413, body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._reject(send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._reject(send)


class SearchSlot:
    """One held place among the concurrent searches; ``release`` may be called more than once."""

    def __init__(self, owner: SearchSlots) -> None:
        self._owner: SearchSlots | None = owner

    def release(self) -> None:
        if self._owner is not None:
            self._owner.in_use -= 1
            self._owner = None


class SearchSlots:
    """A non-blocking bound on concurrent deep searches. A burst beyond it gets 429 at once
    rather than a queue that would time out anyway. Used from the event loop thread only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0

    def try_acquire(self) -> SearchSlot | None:
        if self.in_use >= self.limit:
            return None
        self.in_use += 1
        return SearchSlot(self)
