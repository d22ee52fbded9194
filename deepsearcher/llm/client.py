"""``OpenAIChatModel``: any OpenAI-compatible chat endpoint, and ``build_chat_model``.

The client does its own retries (the SDK's are disabled; one retry loop, ``deepsearcher.retry``,
serves ``complete`` and ``stream``) so that every failure ends in one of our typed errors with a
one-line message, and so that backoff sleeps happen outside the concurrency semaphore instead
of holding a slot.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from tenacity import AsyncRetrying

from deepsearcher.config import LLMSettings, registry
from deepsearcher.errors import LLMError, LLMUnavailableError
from deepsearcher.llm.base import (
    ChatModel,
    Completion,
    JsonSchema,
    LLMUnreachableError,
    Message,
    StreamPiece,
    ToolSchema,
    estimate_usage,
    unreachable_hint,
)
from deepsearcher.llm.failures import (
    ABORTS,
    CALL_RETRYABLE,
    CONNECT_ERRORS,
    STREAM_ERRORS,
    STREAM_RETRYABLE,
    StreamAborted,
    connect_reason,
    describe,
    failure_reason,
)
from deepsearcher.llm.replies import (
    SCHEMA_FORMS,
    TOO_LONG,
    TOP_LOGPROBS,
    names_optional_param,
    read_logprobs,
    read_tool_calls,
    read_usage,
    refused,
    schema_of,
)
from deepsearcher.retry import Backoff, Retryable, RetryPolicy, retry_log
from deepsearcher.retry_after import retry_after_s
from deepsearcher.types import Usage

logger = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
_NO_KEY = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) ignore the key, the SDK wants one


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
        self._schema_form = 0  # index into SCHEMA_FORMS; past its end: no response_format
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
        if schema is not None and self._schema_form < len(SCHEMA_FORMS):
            params["response_format"] = SCHEMA_FORMS[self._schema_form](schema)
        while True:
            try:
                completion = await self._complete(params)
            except LLMError as exc:
                if not refused(exc) or not self._drop_refused(params, exc, mode):
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
        if not named and TOO_LONG.search(said):
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
            if self._schema_form < len(SCHEMA_FORMS):
                schema = schema_of(params["response_format"])
                params["response_format"] = SCHEMA_FORMS[self._schema_form](schema)
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
                raise Retryable("reply had no choices")
            choice = resp.choices[0]
            text = choice.message.content or ""
            return Completion(
                text,
                read_usage(resp.usage, params["messages"], text),
                choice.finish_reason,
                read_tool_calls(getattr(choice.message, "tool_calls", None)),
                read_logprobs(getattr(choice, "logprobs", None)),
            )

        async for attempt in self._retrying("call", CALL_RETRYABLE):
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
        except StreamAborted as exc:
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
        """The streamed attempts; a stream that breaks off raises ``StreamAborted``."""
        async for attempt in self._retrying("stream", STREAM_RETRYABLE):
            with attempt:
                state = self._state()
                async with state.semaphore:
                    try:
                        usage: Usage | None = None
                        finished = False
                        try:
                            chunks = await self._create(state.client, params)
                        except LLMError as exc:
                            if "stream_options" not in params or not refused(exc):
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
                                usage = read_usage(chunk.usage, (), "")
                            for choice in chunk.choices:
                                finished = finished or choice.finish_reason is not None
                                if choice.delta and choice.delta.content:
                                    sent.append(choice.delta.content)
                                    yield StreamPiece(text=choice.delta.content)
                        if not finished:
                            # A connection closed mid-reply ends the SSE body like a normal end
                            # would; only the missing finish_reason tells a truncated answer
                            # apart.
                            raise StreamAborted("stream ended before the reply was finished")
                        if usage is None:
                            usage = estimate_usage(params["messages"], "".join(sent))
                        yield StreamPiece(usage=usage)
                        return
                    except STREAM_ERRORS as exc:
                        reason, _ = failure_reason(exc, self.settings.timeout_s)
                        if sent or isinstance(exc, ABORTS):
                            raise StreamAborted(reason) from exc
                        if not isinstance(exc, STREAM_RETRYABLE):
                            raise LLMError(f"LLM at {self.endpoint} failed: {reason}") from exc
                        raise

    async def _create(self, client: openai.AsyncOpenAI, params: dict[str, Any]) -> Any:
        """Start a request; transient failures become Retryable, the rest LLMError."""
        try:
            return await client.chat.completions.create(**params)
        except openai.APIStatusError as exc:
            status = exc.status_code
            # llama-cpp-python answers 500 to a request its validation refuses (an unknown
            # response_format type): that is a refusal to drop the parameter for, not an outage.
            refusal = status >= 500 and names_optional_param(describe(exc), params)
            if (status == 429 or status >= 500) and not refusal:
                raise Retryable(describe(exc), retry_after_s(exc.response.headers)) from exc
            raise LLMError(
                f"LLM at {self.endpoint} rejected the request: {describe(exc)}",
                self._status_hint(status),
            ) from exc
        except openai.APITimeoutError as exc:
            raise Retryable(f"timed out after {self.settings.timeout_s:g}s") from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__
            if isinstance(cause, CONNECT_ERRORS):
                raise LLMUnreachableError(
                    f"cannot connect to the LLM at {self.endpoint} ({connect_reason(cause)})",
                    unreachable_hint(self.endpoint),
                ) from exc
            raise Retryable(describe(exc)) from exc
        except (openai.APIResponseValidationError, ValueError) as exc:
            # A 200 whose body is not the expected JSON: a proxy or an overloaded server.
            raise Retryable(f"unreadable response ({exc.__class__.__name__})") from exc

    # -- retry policy -----------------------------------------------------------------------

    def _retrying(self, what: str, retry_on: tuple[type[BaseException], ...]) -> AsyncRetrying:
        """The one retry loop of ``complete`` and ``stream``: up to ``max_retries`` more
        attempts for ``retry_on`` failures, other errors raised at once. Each attempt takes the
        concurrency slot inside its ``with attempt:`` block and the loop sleeps between
        attempts, so a waiting retry holds no slot. Retry-After wins over the backoff."""
        timeout_s = self.settings.timeout_s
        return RetryPolicy(
            attempts=self.settings.max_retries + 1,
            backoff=Backoff(self._backoff_base_s, self._backoff_cap_s, self._retry_after_cap_s),
            retry_on=retry_on,
            reason=lambda exc: failure_reason(exc, timeout_s),
            exhausted=self._exhausted,
            log=retry_log(logger, f"LLM {what}"),
        ).async_attempts()

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
