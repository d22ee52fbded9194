"""The server's one error shape and one error type.

Every failure a client sees, from the middlewares in front of the app to an error inside a
stream, is the OpenAI error object ``{"error": {"message", "type", "code", "hint"}}``, so the
``openai`` clients raise it as a typed exception. Server code raises ``RequestError``; errors
from below the server (``DeepSearcherError``) are mapped to a status here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Send

from deepsearcher import errors
from deepsearcher.filters import FilterError
from deepsearcher.options import InvalidOptionError, UnknownOptionError

logger = logging.getLogger(__name__)


def error_body(
    message: str, type_: str, code: str | None = None, hint: str | None = None
) -> dict[str, Any]:
    """The OpenAI error shape; ``hint`` is our extra field saying what to change."""
    err: dict[str, Any] = {"message": message, "type": type_, "code": code}
    if hint:
        err["hint"] = hint
    return {"error": err}


class RequestError(Exception):
    """A client mistake or refusal mapped to an HTTP status and an OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        code: str | None = None,
        hint: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.hint = hint
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.code, self.hint)


class ClientGone(Exception):
    """The client hung up before its answer was ready: the work was cancelled, and nobody is
    left to answer (over HTTP a 499, which uvicorn drops; over MCP a tool error)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"the client disconnected; the {what} was stopped")
        self.what = what


def search_timeout(seconds: float) -> RequestError:
    """The 504 for a search (or the work before it) that outlived ``server.request_timeout_s``."""
    return RequestError(
        504,
        f"the search did not finish within {seconds:g}s",
        type_="server_error",
        code="timeout",
        hint="raise server.request_timeout_s, or ask with a smaller max_iter/top_k",
    )


async def send_error(send: Send, exc: RequestError) -> None:
    """Answer with ``exc`` from plain ASGI: the middlewares in front of the app refuse requests
    before FastAPI's exception handlers could see them."""
    data = json.dumps(exc.body()).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in exc.headers.items()),
    ]
    await send({"type": "http.response.start", "status": exc.status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


def invalid_option(exc: InvalidOptionError) -> RequestError:
    """A request option the library refuses (its range and names are the setting's), worded
    as every other invalid field of a request body: ``invalid request: <field>: <why>``."""
    return RequestError(400, f"invalid request: {exc.option}: {exc.reason}", hint=exc.hint)


# Most specific first: status, OpenAI error type, code.
_ERROR_STATUS: list[tuple[type[errors.DeepSearcherError], int, str, str]] = [
    (errors.CollectionNotFoundError, 404, "not_found_error", "collection_not_found"),
    (errors.IncompatibleCollectionError, 409, "invalid_request_error", "incompatible_collection"),
    (errors.StoreError, 503, "server_error", "store_unavailable"),
    (errors.LoadBusyError, 409, "invalid_request_error", "load_in_progress"),
    (errors.LoadLeaseLostError, 503, "server_error", "load_lease_lost"),
    (errors.ConfigError, 400, "invalid_request_error", "invalid_setting"),
    (FilterError, 400, "invalid_request_error", "invalid_filter"),
    (UnknownOptionError, 400, "invalid_request_error", "unknown_option"),
    (errors.QuestionTooLongError, 400, "invalid_request_error", "question_too_long"),
    (errors.LoaderError, 400, "invalid_request_error", "unloadable_file"),
    (errors.BudgetExceeded, 504, "server_error", "budget_exceeded"),
    (errors.LLMError, 502, "server_error", "llm_unavailable"),
    (errors.WebSearchError, 502, "server_error", "web_search_failed"),
    (errors.EmbeddingError, 503, "server_error", "embedding_failed"),
]


def error_response(exc: Exception, public: Callable[[str], str] = str) -> JSONResponse:
    """Any exception as an OpenAI-shaped error; only non-DeepSearcher errors are 500s.
    ``public`` strips what a client must not see (internal URLs, server paths) from the texts
    of errors raised below the server."""
    if isinstance(exc, InvalidOptionError):
        exc = invalid_option(exc)
    if isinstance(exc, RequestError):
        return JSONResponse(exc.body(), exc.status, headers=exc.headers)
    if isinstance(exc, errors.DeepSearcherError):
        status, type_, code = next(
            ((s, t, c) for cls, s, t, c in _ERROR_STATUS if isinstance(exc, cls)),
            (500, "server_error", "deepsearcher_error"),
        )
        hint = public(exc.hint) if exc.hint else None
        return JSONResponse(error_body(public(exc.message), type_, code, hint), status)
    if isinstance(exc, StarletteHTTPException):
        type_ = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return JSONResponse(
            error_body(str(exc.detail), type_), exc.status_code, headers=exc.headers
        )
    if isinstance(exc, RequestValidationError):
        return JSONResponse(
            error_body(f"invalid request: {exc.errors()[:1]}", "invalid_request_error"), 400
        )
    logger.error("unhandled error in request", exc_info=exc)
    return JSONResponse(error_body("internal server error", "server_error", "internal_error"), 500)
