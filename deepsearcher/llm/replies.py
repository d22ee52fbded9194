"""Reading a chat server's reply (tool calls, log-probabilities, usage) and what it refused:
the optional request parameters a server may not accept, and the forms of a reply schema."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import openai

from deepsearcher.errors import LLMError
from deepsearcher.llm.base import JsonSchema, Message, TokenLogprob, ToolCall, estimate_usage
from deepsearcher.types import Usage


def refused(exc: LLMError) -> bool:
    """A 400/422 (or an error naming an optional parameter): the server does not accept
    something in the request."""
    cause = exc.__cause__
    if not isinstance(cause, openai.APIStatusError):
        return False
    return cause.status_code in (400, 422) or bool(OPTIONAL_PARAMS.search(exc.message))


OPTIONAL_PARAMS = re.compile(r"response_format|json_schema|logprobs|stream_options")


def names_optional_param(message: str, params: dict[str, Any]) -> bool:
    return any(
        m.group(0) in params or (m.group(0) == "json_schema" and "response_format" in params)
        for m in OPTIONAL_PARAMS.finditer(message)
    )


TOP_LOGPROBS = 5
TOO_LONG = re.compile(r"context|too long|maximum .*length|too many tokens")


def json_schema_form(schema: JsonSchema) -> dict[str, Any]:
    # OpenAI, vLLM, llama.cpp's llama-server, Ollama (OpenAI API), LM Studio.
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.name, "schema": schema.schema, "strict": True},
    }


def json_object_form(schema: JsonSchema) -> dict[str, Any]:
    # llama-cpp-python's server (and older llama-server builds): a schema inside json_object.
    return {"type": "json_object", "schema": schema.schema}


SCHEMA_FORMS: tuple[Callable[[JsonSchema], dict[str, Any]], ...] = (
    json_schema_form,
    json_object_form,
)


def schema_of(response_format: dict[str, Any]) -> JsonSchema:
    inner = response_format.get("json_schema") or {}
    return JsonSchema(
        str(inner.get("name", "reply")), inner.get("schema") or response_format.get("schema") or {}
    )


def read_logprobs(raw: Any) -> list[TokenLogprob] | None:
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


def read_tool_calls(calls: Any) -> list[ToolCall]:
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


def read_usage(u: Any, messages: Sequence[Message], reply: str) -> Usage:
    if u is None or not (u.prompt_tokens or u.completion_tokens):
        return estimate_usage(messages, reply)
    return Usage(1, u.prompt_tokens or 0, u.completion_tokens or 0)
