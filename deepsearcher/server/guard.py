"""What stands between the network and the searcher: API keys, the bind check, the browser
checks (Host, Origin, Content-Type), the request body limit and the bound on concurrent deep
searches with its queue. Plain ASGI, so it also covers 404s and streams.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import math
import time
from collections import deque
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deepsearcher.errors import ConfigError
from deepsearcher.server.access import KEY_ID_SCOPE_KEY, NO_ACCESS, SCOPE_KEY, Access, KeyRing
from deepsearcher.server.errors import RequestError, send_error

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


def check_bind(host: str, api_keys: Sequence[str] | KeyRing, *, insecure: bool) -> None:
    """Refuse to expose private documents on a network interface without API keys."""
    if api_keys or insecure or is_loopback(host):
        return
    raise ConfigError(
        f"refusing to serve on {host} without API keys: anyone who can reach it could read "
        "your documents",
        f"set {API_KEYS_ENV}=key1,key2 (clients send 'Authorization: Bearer <key>'), bind "
        "127.0.0.1, or pass --insecure if a proxy in front of it authenticates",
    )


class APIKeyMiddleware:
    """Every request but ``/healthz``, ``open_paths`` and CORS preflights needs
    ``Authorization: Bearer <key>``. The key's ``Access`` goes on the request scope
    (``access.SCOPE_KEY``), where the routes and MCP tools read it."""

    def __init__(
        self, app: ASGIApp, api_keys: KeyRing | Sequence[str], open_paths: Iterable[str] = ()
    ) -> None:
        self.app = app
        self._keys = api_keys if isinstance(api_keys, KeyRing) else KeyRing.full(api_keys)
        self._open = OPEN_PATHS | frozenset(open_paths)  # e.g. the chat page, which holds no data

    def _access(self, scope: Scope) -> Access | None:
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            return None
        access = self._keys.resolve(token.strip())
        if access is not None:
            # Which key, for limits per key (MCP sessions): full-access keys share one name.
            scope[KEY_ID_SCOPE_KEY] = hashlib.sha256(token.strip()).hexdigest()[:16]
        return access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        access = self._access(scope)
        if access is not None:
            scope[SCOPE_KEY] = access
            await self.app(scope, receive, send)
            return
        if scope["path"] in self._open or scope.get("method") == "OPTIONS":
            scope[SCOPE_KEY] = NO_ACCESS  # the page loads without a key; it reads nothing
            await self.app(scope, receive, send)
            return
        refusal = RequestError(
            401,
            "missing or invalid API key",
            type_="authentication_error",
            code="invalid_api_key",
            hint=f"send 'Authorization: Bearer <key>' with one of the keys in {API_KEYS_ENV}",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await send_error(send, refusal)


# Headers the checks here and the API key read: with two of one, a proxy that checked or
# logged the first would be bypassed by the second (a dict keeps the last).
_SINGLETONS = {
    b"authorization": "Authorization",
    b"host": "Host",
    b"origin": "Origin",
    b"content-type": "Content-Type",
}


def _repeated_singleton(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The name of a header that must appear once but appears more often, if any."""
    seen: set[bytes] = set()
    for name, _ in headers:
        key = name.lower()
        if key in _SINGLETONS:
            if key in seen:
                return _SINGLETONS[key]
            seen.add(key)
    return None


def _host_name(host_header: str) -> str:
    """``example.com:8000`` -> ``example.com``; ``[::1]:8000`` -> ``::1``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_name(name: str) -> bool:
    """A Host name that only this machine can mean: localhost (and *.localhost), loopback IPs."""
    return is_loopback(name) or name.endswith(".localhost")


class BrowserGuardMiddleware:
    """Keeps web pages the user opens away from the server.

    A page on another origin can make the browser POST a ``text/plain`` or multipart body
    without a preflight (CSRF), and a page on a name that an attacker re-points at 127.0.0.1
    can even read the answers (DNS rebinding). Without API keys, so: the Host must be a loopback
    name or address or one of ``allowed_hosts``; a request carrying an Origin must come from
    the server's own origin or one of ``allowed_origins`` (clients without Origin, such as curl
    and the SDKs, pass). With keys a page cannot send the key, so only the Content-Type rule
    applies: JSON bodies must say ``application/json`` (multipart only for uploads), which no
    page can send cross-origin without a preflight that CORS refuses. Before all of that, with
    keys or without, a header these checks or the API key read (Authorization, Host, Origin,
    Content-Type) sent twice is a 400: a proxy that checked the first must not be bypassed by
    the second.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        check_origin: bool,
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
        multipart_paths: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.check_origin = check_origin
        self.allowed_hosts = {h.strip().lower() for h in allowed_hosts}
        self.allowed_origins = {o.strip().rstrip("/").lower() for o in allowed_origins}
        self.multipart_paths = frozenset(multipart_paths)

    def _refusal(self, scope: Scope) -> RequestError | None:
        repeated = _repeated_singleton(scope["headers"])
        if repeated is not None:
            return RequestError(
                400,
                f"request refused: the {repeated} header is sent more than once",
                code="repeated_header",
                hint=f"send one {repeated} header (RFC 9110 allows only one); a proxy in front "
                "may have added a second",
            )
        headers = dict(scope["headers"])
        if self.check_origin and scope["path"] not in OPEN_PATHS:
            host = headers.get(b"host", b"").decode("latin-1")
            if "*" not in self.allowed_hosts and not (
                is_loopback_name(_host_name(host)) or _host_name(host) in self.allowed_hosts
            ):
                return RequestError(
                    403,
                    "request refused: the Host header is not a name of this server",
                    type_="permission_error",
                    code="host_not_allowed",
                    hint="call the server as localhost or 127.0.0.1, or add the name clients use "
                    "to server.allowed_hosts (or set DEEPSEARCHER_API_KEYS)",
                )
            origin = headers.get(b"origin")
            if origin is not None and not self._origin_allowed(origin.decode("latin-1"), host):
                return RequestError(
                    403,
                    "request refused: cross-origin browser requests are not allowed",
                    type_="permission_error",
                    code="origin_not_allowed",
                    hint="add the web page's origin (scheme://host:port) to server.cors_origins, "
                    "or call the server from outside a browser",
                )
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            raw = headers.get(b"content-type", b"").decode("latin-1")
            media = raw.split(";", 1)[0].strip().lower()
            multipart = scope["path"] in self.multipart_paths
            if media != "application/json" and not (multipart and media == "multipart/form-data"):
                shown = media or "none"
                return RequestError(
                    415,
                    f"unsupported Content-Type: {shown[:100]}",
                    code="unsupported_media_type",
                    hint="send the body as JSON with 'Content-Type: application/json'"
                    + (" (or files as multipart/form-data)" if multipart else ""),
                )
        return None

    def _origin_allowed(self, origin: str, host: str) -> bool:
        origin = origin.strip().rstrip("/").lower()
        if "*" in self.allowed_origins or origin in self.allowed_origins:
            return True
        parts = urlsplit(origin)
        # Same origin: the page was served by this very host (already checked above).
        return parts.scheme in ("http", "https") and parts.netloc == host.strip().lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (refusal := self._refusal(scope)) is not None:
            await send_error(send, refusal)
            return
        await self.app(scope, receive, send)


class _TooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """413 for bodies over the limit: at once by Content-Length, else while reading (chunked)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reject(self, send: Send) -> None:
        mb = self.max_bytes / 1_000_000
        too_large = RequestError(
            413,
            f"request body is larger than {mb:g} MB",
            code="request_too_large",
            hint="send smaller files, or raise server.max_request_mb",
        )
        await send_error(send, too_large)

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
        self._since = time.monotonic()

    def release(self) -> None:
        if self._owner is not None:
            self._owner.record(time.monotonic() - self._since)
            self._owner.hand_on()
            self._owner = None


class SearchSlots:
    """A bound on concurrent deep searches with a first-come-first-served queue in front.

    A burst beyond the slots waits its turn instead of being refused: refusing at once made
    every client retry after the same second, so retries collided again (a 429 storm). Only
    when the queue is full is a request refused, with the wait it would have had as
    ``Retry-After``. Used from the event loop thread only.
    """

    def __init__(self, limit: int, max_queued: int = 0) -> None:
        self.limit = limit
        self.max_queued = max_queued
        self.in_use = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._mean_s: float | None = None  # how long a search holds a slot, smoothed

    @property
    def queued(self) -> int:
        return sum(not w.done() for w in self._waiters)

    def record(self, seconds: float) -> None:
        self._mean_s = seconds if self._mean_s is None else 0.8 * self._mean_s + 0.2 * seconds

    def expected_wait_s(self) -> float:
        """Seconds until a request arriving now would start: the queue ahead of it drains
        ``limit`` searches at a time."""
        waves = math.ceil((self.queued + 1) / self.limit)
        return waves * (self._mean_s if self._mean_s is not None else 1.0)

    def try_acquire(self) -> SearchSlot | None:
        if self.in_use >= self.limit or self.queued:
            return None
        self.in_use += 1
        return SearchSlot(self)

    async def acquire(self) -> SearchSlot | None:
        """A slot, after waiting in line if need be; None when the line is full."""
        slot = self.try_acquire()
        if slot is not None:
            return slot
        if self.queued >= self.max_queued:
            return None
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.hand_on()  # granted just as the request went away: pass the slot on
            else:
                waiter.cancel()
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        return SearchSlot(self)

    def hand_on(self) -> None:
        """A slot is free: give it to the first waiter still waiting, else mark it free."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot changes hands; in_use stays
                return
        self.in_use -= 1
