"""Chat models: the ``ChatModel`` protocol and an OpenAI-compatible client.

The client does its own retries (the SDK's are disabled; one tenacity loop serves ``complete``
and ``stream``) so that every failure ends in one of our typed errors with a one-line message,
and so that backoff sleeps happen outside the concurrency semaphore instead of holding a slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import random
import re
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

import httpx
import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from deepsearcher.config import LLMSettings, registry
from deepsearcher.errors import LLMError, LLMUnavailableError
from deepsearcher.retry_after import retry_after_s
from deepsearcher.types import Usage

logger = logging.getLogger(__name__)

Message = dict[str, str]
# An OpenAI function schema: {"type": "function", "function": {"name", "description",
# "parameters"}}.
ToolSchema = dict[str, Any]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_NO_KEY = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) ignore the key, the SDK wants one


@dataclass(frozen=True)
class ToolCall:
    """A tool the model asked for: natively (``tool_calls`` in the reply) or as JSON text.
    ``args`` holds ``{"_invalid": raw}`` when the arguments were not a JSON object, so the
    tool can say so to the model instead of the call failing."""

    name: str
    args: dict[str, Any]
    id: str = ""


@dataclass(frozen=True)
class JsonSchema:
    """A reply shape for servers that constrain output (``response_format``): ``schema`` is a
    JSON schema whose root is an object (OpenAI's strict mode wants that)."""

    name: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the ``top`` alternatives there."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


@dataclass
class Completion:
    text: str
    usage: Usage
    finish_reason: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    # The reply's tokens with their log-probabilities, when asked for and the server gave them.
    logprobs: list[TokenLogprob] | None = None


@dataclass
class StreamPiece:
    """A text delta; the last piece of a stream carries the call's usage instead. A piece with
    ``replace`` holds the whole reply again (a broken stream was answered without streaming):
    the caller drops the text received before it."""

    text: str = ""
    usage: Usage | None = None
    replace: bool = False


class ChatModel(Protocol):
    name: str

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[ToolSchema] | None = None,
        schema: JsonSchema | None = None,
        logprobs: bool = False,
    ) -> Completion:
        """One chat completion. Raises LLMError (LLMUnavailableError once retries are spent).

        ``tools`` offers functions the model may call; a model (or server) without native tool
        calls ignores them and replies with text, which callers parse for a JSON tool call.
        ``schema`` asks for a reply constrained to it and ``logprobs`` for the tokens'
        log-probabilities; a server that refuses either is asked without it (the prompt must
        describe the format too), and ``Completion.logprobs`` stays None."""
        ...

    def stream(
        self, messages: Sequence[Message], *, max_tokens: int | None = None
    ) -> AsyncIterator[StreamPiece]:
        """Yield text deltas, then a final piece with the usage (``llm_calls=1``)."""
        ...


class LLMUnreachableError(LLMUnavailableError):
    """No connection could be made (refused, unknown host, no route). Not retried: the next
    attempt would be refused the same way, so a run stops calling the LLM after the first."""


class _StreamAborted(Exception):
    """A stream the server broke off (dropped connection, no finish_reason): answered once
    more without streaming instead of being retried as a stream."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Retryable(Exception):
    """A transient failure: worth another attempt after ``delay`` (None: use backoff)."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


def _transport_errors(name: str = "HTTPError") -> tuple[type[Exception], ...]:
    # openai 1.x streams over httpx, 3.x over httpx2; a cut stream raises the library's own
    # error, which the SDK does not wrap.
    errors: list[type[Exception]] = [getattr(httpx, name)]
    with contextlib.suppress(ImportError):
        errors.append(getattr(importlib.import_module("httpx2"), name))
    return tuple(errors)


_TRANSPORT_ERRORS = _transport_errors()
# Refused, unknown host, no route, failed TLS handshake: nothing answered at all. (A connect
# timeout is a TimeoutException, not a ConnectError: a slow server is worth a retry.)
_CONNECT_ERRORS = _transport_errors("ConnectError")
_STREAM_ERRORS: tuple[type[Exception], ...] = (openai.APIError, _Retryable, *_TRANSPORT_ERRORS)
# Raised while reading a stream that had begun: the server or a proxy cut it.
_ABORTS = _TRANSPORT_ERRORS
# A reply that is late or unusable (5xx, 429, timeout, no choices) is worth another attempt.
_CALL_RETRYABLE: tuple[type[Exception], ...] = (_Retryable, asyncio.TimeoutError)
_STREAM_RETRYABLE: tuple[type[Exception], ...] = (
    _Retryable,
    openai.APIConnectionError,
    *_TRANSPORT_ERRORS,
)


@dataclass
class _LoopState:
    client: openai.AsyncOpenAI
    semaphore: asyncio.Semaphore


class OpenAIChatModel:
    """Any OpenAI-compatible chat endpoint: OpenAI, DeepSeek, vLLM, Ollama, llama.cpp, ...

    ``backoff_base_s`` is the first retry's delay scale (tests make it tiny); delays double per
    retry up to ``backoff_cap_s``. A server's Retry-After is honoured up to ``retry_after_cap_s``.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 8.0,
        retry_after_cap_s: float = 30.0,
    ) -> None:
        key = os.environ.get(settings.api_key_env)
        if not key and not settings.base_url:
            raise LLMError(
                f"no API key: environment variable {settings.api_key_env} is not set",
                f"export {settings.api_key_env}=..., or set llm.base_url to a local "
                "OpenAI-compatible server (which needs no key)",
            )
        self.name = settings.model
        self.settings = settings
        self.endpoint = settings.base_url or OPENAI_BASE_URL
        self._api_key = key or _NO_KEY
        self._backoff_base_s = backoff_base_s
        self._backoff_cap_s = backoff_cap_s
        self._retry_after_cap_s = retry_after_cap_s
        self._tools_rejected = False  # llm.tool_calls=auto: the server said no to "tools" once
        # What else the server refused (400/422) or ignored once, remembered like "tools".
        self._logprobs_ok = True
        self._schema_form = 0  # index into _SCHEMA_FORMS; past its end: no response_format
        self._stream_usage_ok = True
        # httpx connection pools and asyncio semaphores belong to one event loop; one state per
        # loop lets an instance be built outside a loop and serve several asyncio.run() in turn.
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIChatModel(model={self.name!r}, endpoint={self.endpoint!r})"

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            client = openai.AsyncOpenAI(
                # Explicit, so the endpoint in our errors is the one called (the SDK would
                # otherwise fall back to $OPENAI_BASE_URL).
                base_url=self.endpoint,
                api_key=self._api_key,
                timeout=self.settings.timeout_s,
                max_retries=0,
            )
            state = _LoopState(client, asyncio.Semaphore(self.settings.max_concurrency))
            self._states[loop] = state
        return state

    async def aclose(self) -> None:
        """Close the running loop's HTTP client (optional: it is dropped with its loop)."""
        state = self._states.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state.client.close()

    def _params(self, messages: Sequence[Message], max_tokens: int | None) -> dict[str, Any]:
        return {
            "model": self.settings.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens or self.settings.max_tokens,
        }

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[ToolSchema] | None = None,
        schema: JsonSchema | None = None,
        logprobs: bool = False,
    ) -> Completion:
        params = self._params(messages, max_tokens)
        params["temperature"] = self.settings.temperature if temperature is None else temperature
        mode = self.settings.tool_calls
        native = bool(tools) and mode != "json" and not self._tools_rejected
        if native:
            params["tools"] = [dict(t) for t in tools or ()]
        asked_logprobs = logprobs and self._logprobs_ok
        if asked_logprobs:
            params["logprobs"] = True
            params["top_logprobs"] = TOP_LOGPROBS
        if schema is not None and self._schema_form < len(_SCHEMA_FORMS):
            params["response_format"] = _SCHEMA_FORMS[self._schema_form](schema)
        while True:
            try:
                completion = await self._complete(params)
            except LLMError as exc:
                if not _refused(exc) or not self._drop_refused(params, exc, mode):
                    raise
                continue
            if asked_logprobs and completion.logprobs is None and "logprobs" in params:
                # The server ignores the parameter: stop asking for what never comes.
                logger.info("LLM at %s returns no log-probabilities", self.endpoint)
                self._logprobs_ok = False
            return completion

    def _drop_refused(self, params: dict[str, Any], exc: LLMError, tool_mode: str) -> bool:
        """After a 400/422: drop (and remember) the optional parameter the server refused, so
        the call can be made again. False when there is nothing left to drop."""
        said = exc.message.lower()
        blamed = [k for k in ("response_format", "logprobs", "tools") if k in params]
        named = [
            k
            for k in blamed
            if k.split("_")[0] in said or (k == "response_format" and "schema" in said)
        ]
        if not named and _TOO_LONG.search(said):
            return False  # a prompt over the context: no parameter is to blame
        # The server's message usually names the field; otherwise step down in this order: a
        # schema form, then log-probabilities, then native tools.
        if not (named or blamed):
            return False
        key = (named or blamed)[0]
        if key == "tools":
            if tool_mode != "auto":
                return False
            # Many local servers (llama.cpp without --jinja, vLLM without a tool parser) answer
            # 400 to "tools"; the caller's prompt also describes the JSON form.
            self._tools_rejected = True
            del params["tools"]
            what = "native tool calls; using JSON tool calls in text"
        elif key == "logprobs":
            self._logprobs_ok = False
            del params["logprobs"], params["top_logprobs"]
            what = "log-probabilities; judging by the verdict word alone"
        else:
            # Concurrent calls refused the same form: the first moves on, the others follow.
            used = 0 if params["response_format"].get("type") == "json_schema" else 1
            self._schema_form = max(self._schema_form, used + 1)
            if self._schema_form < len(_SCHEMA_FORMS):
                schema = _schema_of(params["response_format"])
                params["response_format"] = _SCHEMA_FORMS[self._schema_form](schema)
                what = "one response_format form; trying another"
            else:
                del params["response_format"]
                what = "structured output (response_format); parsing plain replies"
        logger.warning("LLM at %s rejected %s (%s)", self.endpoint, what, exc.message)
        return True

    async def _complete(self, params: dict[str, Any]) -> Completion:
        async def call(client: openai.AsyncOpenAI) -> Completion:
            # httpx's timeout applies per read; wait_for makes timeout_s bound the whole call
            # against servers that drip bytes.
            resp = await asyncio.wait_for(self._create(client, params), self.settings.timeout_s)
            if not resp.choices:
                raise _Retryable("reply had no choices")
            choice = resp.choices[0]
            text = choice.message.content or ""
            return Completion(
                text,
                _usage(resp.usage, params["messages"], text),
                choice.finish_reason,
                _tool_calls(getattr(choice.message, "tool_calls", None)),
                _logprobs(getattr(choice, "logprobs", None)),
            )

        async for attempt in self._retrying("call", _CALL_RETRYABLE):
            with attempt:
                state = self._state()
                async with state.semaphore:
                    return await call(state.client)
        raise AssertionError("unreachable")  # the retrying loop returns or raises

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int | None = None
    ) -> AsyncIterator[StreamPiece]:
        params = self._params(messages, max_tokens)
        params["temperature"] = self.settings.temperature
        params["stream"] = True
        if self._stream_usage_ok:
            params["stream_options"] = {"include_usage": True}
        sent: list[str] = []
        try:
            async for piece in self._stream(params, sent):
                yield piece
            return
        except _StreamAborted as exc:
            # llama.cpp's server (without --interrupt_requests false) aborts a stream when
            # another request arrives, and proxies drop long streams; one reply without
            # streaming is not interrupted that way.
            logger.warning(
                "LLM at %s broke off a streamed reply (%s); asking again without streaming",
                self.endpoint,
                exc.reason,
            )
            aborted = exc
        try:
            completion = await self.complete(messages, max_tokens=max_tokens)
        except LLMError as exc:
            raise LLMUnavailableError(
                f"LLM at {self.endpoint} broke off a streamed reply ({aborted.reason}) and "
                f"failed without streaming: {exc.message}",
                self._hint(),
            ) from exc
        yield StreamPiece(text=completion.text, replace=bool(sent))
        yield StreamPiece(usage=completion.usage)

    async def _stream(self, params: dict[str, Any], sent: list[str]) -> AsyncIterator[StreamPiece]:
        """The streamed attempts; a stream that breaks off raises ``_StreamAborted``."""
        async for attempt in self._retrying("stream", _STREAM_RETRYABLE):
            with attempt:
                state = self._state()
                async with state.semaphore:
                    try:
                        usage: Usage | None = None
                        finished = False
                        try:
                            chunks = await self._create(state.client, params)
                        except LLMError as exc:
                            if "stream_options" not in params or not _refused(exc):
                                raise
                            logger.warning(
                                "LLM at %s rejected stream_options (%s); counting tokens locally",
                                self.endpoint,
                                exc.message,
                            )
                            self._stream_usage_ok = False
                            del params["stream_options"]
                            chunks = await self._create(state.client, params)
                        async for chunk in chunks:
                            if chunk.usage:  # servers that ignore include_usage never send it
                                usage = _usage(chunk.usage, (), "")
                            for choice in chunk.choices:
                                finished = finished or choice.finish_reason is not None
                                if choice.delta and choice.delta.content:
                                    sent.append(choice.delta.content)
                                    yield StreamPiece(text=choice.delta.content)
                        if not finished:
                            # A connection closed mid-reply ends the SSE body like a normal end
                            # would; only the missing finish_reason tells a truncated answer
                            # apart.
                            raise _StreamAborted("stream ended before the reply was finished")
                        if usage is None:
                            usage = estimate_usage(params["messages"], "".join(sent))
                        yield StreamPiece(usage=usage)
                        return
                    except _STREAM_ERRORS as exc:
                        reason, _ = _reason(exc, self.settings.timeout_s)
                        if sent or isinstance(exc, _ABORTS):
                            raise _StreamAborted(reason) from exc
                        if not isinstance(exc, _STREAM_RETRYABLE):
                            raise LLMError(f"LLM at {self.endpoint} failed: {reason}") from exc
                        raise

    async def _create(self, client: openai.AsyncOpenAI, params: dict[str, Any]) -> Any:
        """Start a request; transient failures become _Retryable, the rest LLMError."""
        try:
            return await client.chat.completions.create(**params)
        except openai.APIStatusError as exc:
            status = exc.status_code
            # llama-cpp-python answers 500 to a request its validation refuses (an unknown
            # response_format type): that is a refusal to drop the parameter for, not an outage.
            refusal = status >= 500 and _names_optional_param(_describe(exc), params)
            if (status == 429 or status >= 500) and not refusal:
                raise _Retryable(_describe(exc), retry_after_s(exc.response.headers)) from exc
            raise LLMError(
                f"LLM at {self.endpoint} rejected the request: {_describe(exc)}",
                self._status_hint(status),
            ) from exc
        except openai.APITimeoutError as exc:
            raise _Retryable(f"timed out after {self.settings.timeout_s:g}s") from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__
            if isinstance(cause, _CONNECT_ERRORS):
                raise LLMUnreachableError(
                    f"cannot connect to the LLM at {self.endpoint} ({_connect_reason(cause)})",
                    unreachable_hint(self.endpoint),
                ) from exc
            raise _Retryable(_describe(exc)) from exc
        except (openai.APIResponseValidationError, ValueError) as exc:
            # A 200 whose body is not the expected JSON: a proxy or an overloaded server.
            raise _Retryable(f"unreadable response ({exc.__class__.__name__})") from exc

    # -- retry policy -----------------------------------------------------------------------

    def _retrying(self, what: str, retry_on: tuple[type[BaseException], ...]) -> AsyncRetrying:
        """The one retry loop of ``complete`` and ``stream``: up to ``max_retries`` more
        attempts for ``retry_on`` failures, other errors raised at once. Each attempt takes the
        concurrency slot inside its ``with attempt:`` block and tenacity sleeps between
        attempts, so a waiting retry holds no slot. Retry-After wins over the backoff."""
        timeout_s = self.settings.timeout_s

        def wait(state: RetryCallState) -> float:
            _, hinted = _reason(_failure(state), timeout_s)
            return self._delay(state.attempt_number, hinted)

        def log_retry(state: RetryCallState) -> None:
            reason, _ = _reason(_failure(state), timeout_s)
            logger.warning(
                "LLM %s failed (%s); retry %d in %.2fs",
                what,
                reason,
                state.attempt_number,
                state.upcoming_sleep,
            )

        def give_up(state: RetryCallState) -> NoReturn:
            exc = _failure(state)
            reason, _ = _reason(exc, timeout_s)
            raise self._exhausted(state.attempt_number, reason) from exc

        return AsyncRetrying(
            retry=retry_if_exception_type(retry_on),
            stop=stop_after_attempt(self.settings.max_retries + 1),
            wait=wait,
            before_sleep=log_retry,
            retry_error_callback=give_up,
        )

    def _delay(self, attempt: int, hinted: float | None) -> float:
        if hinted is not None:
            return min(hinted, self._retry_after_cap_s)
        # "Equal jitter": at least half the exponential step, so retries of concurrent calls
        # spread out without collapsing to zero.
        step = min(self._backoff_cap_s, self._backoff_base_s * 2 ** (attempt - 1))
        return step / 2 + random.uniform(0, step / 2)

    def _exhausted(self, attempts: int, reason: str) -> LLMUnavailableError:
        return LLMUnavailableError(
            f"LLM at {self.endpoint} failed after {attempts} attempts: {reason}", self._hint()
        )

    def _hint(self) -> str:
        return (
            f"check that the server at {self.endpoint} is up and not overloaded, "
            "or raise llm.timeout_s / llm.max_retries"
        )

    def _status_hint(self, status: int) -> str | None:
        if status in (401, 403):
            return f"check the API key in ${self.settings.api_key_env} and llm.base_url"
        if status == 404:
            return f"check llm.model ({self.settings.model!r}) and llm.base_url ({self.endpoint})"
        return None


def _connect_reason(exc: BaseException) -> str:
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


def unreachable_hint(endpoint: str) -> str:
    return (
        f"check DEEPSEARCHER_LLM__BASE_URL (llm.base_url, now {endpoint}) and that the LLM "
        "server is running; without an LLM, queries show the best passages only"
    )


def _failure(state: RetryCallState) -> BaseException:
    exc = state.outcome.exception() if state.outcome is not None else None
    if exc is None:  # tenacity asks for waits and stops only after a failed attempt
        raise AssertionError("retry policy consulted after a successful attempt")
    return exc


def _refused(exc: LLMError) -> bool:
    """A 400/422 (or an error naming an optional parameter): the server does not accept
    something in the request."""
    cause = exc.__cause__
    if not isinstance(cause, openai.APIStatusError):
        return False
    return cause.status_code in (400, 422) or bool(_OPTIONAL_PARAMS.search(exc.message))


_OPTIONAL_PARAMS = re.compile(r"response_format|json_schema|logprobs|stream_options")


def _names_optional_param(message: str, params: dict[str, Any]) -> bool:
    return any(
        m.group(0) in params or (m.group(0) == "json_schema" and "response_format" in params)
        for m in _OPTIONAL_PARAMS.finditer(message)
    )


TOP_LOGPROBS = 5
_TOO_LONG = re.compile(r"context|too long|maximum .*length|too many tokens")


def _json_schema_form(schema: JsonSchema) -> dict[str, Any]:
    # OpenAI, vLLM, llama.cpp's llama-server, Ollama (OpenAI API), LM Studio.
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.name, "schema": schema.schema, "strict": True},
    }


def _json_object_form(schema: JsonSchema) -> dict[str, Any]:
    # llama-cpp-python's server (and older llama-server builds): a schema inside json_object.
    return {"type": "json_object", "schema": schema.schema}


_SCHEMA_FORMS: tuple[Callable[[JsonSchema], dict[str, Any]], ...] = (
    _json_schema_form,
    _json_object_form,
)


def _schema_of(response_format: dict[str, Any]) -> JsonSchema:
    inner = response_format.get("json_schema") or {}
    return JsonSchema(
        str(inner.get("name", "reply")), inner.get("schema") or response_format.get("schema") or {}
    )


def _logprobs(raw: Any) -> list[TokenLogprob] | None:
    content = getattr(raw, "content", None) if raw is not None else None
    if not content:
        return None
    out = []
    for item in content:
        top = {
            t.token: float(t.logprob)
            for t in (getattr(item, "top_logprobs", None) or [])
            if getattr(t, "token", None) is not None and getattr(t, "logprob", None) is not None
        }
        out.append(TokenLogprob(str(item.token), float(item.logprob), top))
    return out


CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text with BPE tokenizers


def estimate_tokens(text: str) -> int:
    """A local token count for servers that report none: characters / 4, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_usage(messages: Sequence[Message], reply: str) -> Usage:
    """One call's usage counted locally, marked ``estimated``."""
    # A few tokens per message for the chat template's role markers.
    prompt = sum(estimate_tokens(str(m.get("content") or "")) + 4 for m in messages)
    return Usage(1, prompt, estimate_tokens(reply), estimated=True)


def _tool_calls(calls: Any) -> list[ToolCall]:
    out: list[ToolCall] = []
    for call in calls or []:
        function = getattr(call, "function", None)
        if function is None or not getattr(function, "name", None):
            continue
        raw = getattr(function, "arguments", None) or "{}"
        try:
            args = json.loads(raw)
        except (TypeError, ValueError):
            args = {"_invalid": raw}
        if not isinstance(args, dict):
            args = {"_invalid": raw}
        out.append(ToolCall(function.name, args, getattr(call, "id", "") or ""))
    return out


def _usage(u: Any, messages: Sequence[Message], reply: str) -> Usage:
    if u is None or not (u.prompt_tokens or u.completion_tokens):
        return estimate_usage(messages, reply)
    return Usage(1, u.prompt_tokens or 0, u.completion_tokens or 0)


def _reason(exc: BaseException, timeout_s: float) -> tuple[str, float | None]:
    if isinstance(exc, _Retryable):
        return exc.reason, exc.delay
    if isinstance(exc, asyncio.TimeoutError):
        return f"timed out after {timeout_s:g}s", None
    return _describe(exc), None


def _describe(exc: BaseException) -> str:
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


# Registered in deepsearcher.config.registry, where the settings read the names too.
_PROVIDERS: Mapping[str, Callable[[LLMSettings], ChatModel]] = registry.CHAT_MODELS


def build_chat_model(settings: LLMSettings) -> ChatModel:
    """The chat model named by ``settings.provider``."""
    try:
        factory = _PROVIDERS[settings.provider]
    except KeyError:
        known = ", ".join(sorted(_PROVIDERS))
        raise LLMError(
            f"unknown llm.provider {settings.provider!r}", f"use one of: {known}"
        ) from None
    return factory(settings)
