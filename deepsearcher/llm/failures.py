"""How a chat call failed, in one line: the transport errors that mean a stream was cut or
nothing answered, the reason shown in errors and logs (never headers or keys)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os

import httpx
import openai

from deepsearcher.retry import Retryable


class StreamAborted(Exception):
    """A stream the server broke off (dropped connection, no finish_reason): answered once
    more without streaming instead of being retried as a stream."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def transport_errors(name: str = "HTTPError") -> tuple[type[Exception], ...]:
    # openai 1.x streams over httpx, 3.x over httpx2; a cut stream raises the library's own
    # error, which the SDK does not wrap.
    errors: list[type[Exception]] = [getattr(httpx, name)]
    with contextlib.suppress(ImportError):
        errors.append(getattr(importlib.import_module("httpx2"), name))
    return tuple(errors)


TRANSPORT_ERRORS = transport_errors()
# Refused, unknown host, no route, failed TLS handshake: nothing answered at all. (A connect
# timeout is a TimeoutException, not a ConnectError: a slow server is worth a retry.)
CONNECT_ERRORS = transport_errors("ConnectError")
STREAM_ERRORS: tuple[type[Exception], ...] = (openai.APIError, Retryable, *TRANSPORT_ERRORS)
# Raised while reading a stream that had begun: the server or a proxy cut it.
ABORTS = TRANSPORT_ERRORS
# A reply that is late or unusable (5xx, 429, timeout, no choices) is worth another attempt.
CALL_RETRYABLE: tuple[type[Exception], ...] = (Retryable, asyncio.TimeoutError)
STREAM_RETRYABLE: tuple[type[Exception], ...] = (
    Retryable,
    openai.APIConnectionError,
    *TRANSPORT_ERRORS,
)


def connect_reason(exc: BaseException) -> str:
    """The OS's reason ("Connection refused", "Name or service not known") from the chain
    under the transport's generic "All connection attempts failed"."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.strerror:
            # asyncio words a refusal "Connect call failed (...)"; the errno says it plainly.
            # Resolver errors (gaierror) have negative codes and their own text.
            return os.strerror(seen.errno) if seen.errno and seen.errno > 0 else seen.strerror
        seen = seen.__cause__ or seen.__context__
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def failure_reason(exc: BaseException, timeout_s: float) -> tuple[str, float | None]:
    if isinstance(exc, Retryable):
        return exc.reason, exc.delay
    if isinstance(exc, asyncio.TimeoutError):
        return f"timed out after {timeout_s:g}s", None
    return describe(exc), None


def describe(exc: BaseException) -> str:
    """A short reason: status and the server's own message, never headers or keys."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = ""
        body = exc.body
        if isinstance(body, dict):
            err = body.get("error", body)
            message = str(err.get("message", "") if isinstance(err, dict) else err)
        message = " ".join((message or exc.message).split())[:200]
        if status == 429 and "rate" not in message.lower():
            message = f"rate limited ({message})"
        return f"{status} {message}".strip()
    if isinstance(exc, openai.APITimeoutError) or "Timeout" in type(exc).__name__:
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return f"connection failed ({cause.__class__.__name__ if cause else 'no response'})"
    return f"{exc.__class__.__name__}: {' '.join(str(exc).split())[:200]}"
