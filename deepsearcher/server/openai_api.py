"""The OpenAI wire format of the server: request models, follow-up rewriting, and the
``chat.completion`` / ``chat.completion.chunk`` bodies built from our ``Answer`` and events."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from deepsearcher.errors import check_question_length
from deepsearcher.filters import Filter
from deepsearcher.options import QueryOptions
from deepsearcher.server.errors import RequestError
from deepsearcher.types import Answer, Source, Usage

DEFAULT_MODEL = "deepsearcher"  # the model name that searches every collection
SOURCES_HEADING = "\n\nSources:\n"


# ---------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------


class SearchOptions(BaseModel):
    # Types only: the agent names and the ranges are QueryOptions' (the settings'), refused
    # when the options are made, as a 400 naming the field (server/errors.py).
    agent: str | None = None
    max_iter: int | None = None
    top_k: int | None = None
    cache: bool = True  # false: search afresh even when the answer is cached
    # Metadata filter: a list of "KEY OP VALUE" strings or an object (deepsearcher.filters).
    # Any JSON here: Filter.from_json refuses another shape as invalid_filter with the forms
    # it accepts, where a typed field would give a bare validation error.
    filter: Any = None

    @model_validator(mode="after")
    def _check_options(self) -> SearchOptions:
        # Refused when the body is read, whichever route it goes to (the research model's
        # chat ignores them, but a bad value is still a mistake). InvalidOptionError is not
        # a ValueError, so pydantic lets it through to the server's error handler.
        QueryOptions(agent=self.agent, top_k=self.top_k, max_iter=self.max_iter)
        return self

    def query_options(self, collections: Sequence[str] | None = None) -> QueryOptions:
        """The search options set in the request, over ``collections`` (None: all, or
        routed); a bad filter raises ``FilterError``, a value out of range or an unknown agent
        ``InvalidOptionError`` (both 400). ``cache`` is not one of them: the service reads it
        from the request."""
        return QueryOptions(
            agent=self.agent,
            collections=collections,
            top_k=self.top_k,
            max_iter=self.max_iter,
            filter=Filter.from_json(self.filter),
        )


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_calls, ...: accepted, not used
    role: str
    content: str | list[dict[str, Any]] | None = None

    @field_validator("content")
    @classmethod
    def _text_parts_hold_text(
        cls, content: str | list[dict[str, Any]] | None
    ) -> str | list[dict[str, Any]] | None:
        for part in content if isinstance(content, list) else []:
            if part.get("type", "text") == "text" and not isinstance(part.get("text"), str):
                raise ValueError("a text content part needs a string 'text'")
        return content

    def text(self) -> str:
        if isinstance(self.content, list):  # content parts: keep the text ones
            return "".join(p["text"] for p in self.content if p.get("type", "text") == "text")
        return self.content or ""


class ChatRequest(SearchOptions):
    # Standard clients send temperature, max_tokens, user, ...; they do not apply to a search.
    model_config = ConfigDict(extra="allow")
    model: str = DEFAULT_MODEL
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None

    def question_and_history(self, max_chars: int) -> tuple[str, list[ChatMessage]]:
        last = self.messages[-1]
        question = last.text().strip()
        if last.role != "user" or not question:
            raise RequestError(400, "the last message must be a user message holding the question")
        check_question(question, max_chars)
        history = [
            m for m in self.messages[:-1] if m.role in ("user", "assistant") and m.text().strip()
        ]
        return question, history

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))


class QueryRequest(SearchOptions):
    model_config = ConfigDict(extra="forbid")  # our own API: a misspelt field should be loud
    question: str = Field(min_length=1)
    collections: list[str] | None = None


class LoadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    paths: list[str] = Field(min_length=1)
    collection: str | None = None
    description: str | None = None
    force: bool = False
    prune: bool = False


def check_question(question: str, max_chars: int) -> None:
    """The library's cap (``QuestionTooLongError``, 400 ``question_too_long``), checked by the
    routes too so a long question is refused before it waits for a search slot."""
    check_question_length(question, max_chars)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(data: Any) -> bool:
    """Whether any string (key or value) holds a UTF-16 surrogate, which JSON's \\u escapes
    allow but UTF-8, and so the LLM request, cannot carry."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_body(raw: bytes, model: type[BaseModel]) -> Any:
    """Validate a JSON body; every problem is a 400 naming the field, never a 500 or 422."""
    try:
        data = json.loads(raw) if raw.strip() else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise RequestError(
            400, "request body is nested too deeply", hint="send a flat JSON object"
        ) from None
    if not isinstance(data, dict):
        raise RequestError(
            400, "request body must be a JSON object" + (" (it was empty)" if data is None else "")
        )
    if _lone_surrogate(data):
        raise RequestError(
            400,
            "request body holds an unpaired UTF-16 surrogate escape (such as \\ud800)",
            code="invalid_unicode",
            hint="send text as valid Unicode; escape characters outside the BMP as a pair",
        )
    try:
        return model.model_validate(data)
    except RecursionError:
        raise RequestError(400, "request body is nested too deeply") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise RequestError(400, f"invalid request: {where}: {err['msg']}{more}") from None


# ---------------------------------------------------------------------------------------------
# Follow-ups
# ---------------------------------------------------------------------------------------------


def history_turns(history: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    """Chat turns as ``(role, text)`` for the follow-up rewrite."""
    # Our own answers end with the source list: noise for the rewrite, and tokens.
    return [(m.role, m.text().split(SOURCES_HEADING, 1)[0].strip()) for m in history]


# ---------------------------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------------------------


def source_line(s: Source) -> str:
    # "attributed": the model wrote no [n] for this passage; the sentence was matched to it.
    return f"[{s.n}] {s.label}" + (" (attributed)" if s.attributed else "")


def sources_markdown(sources: Sequence[Source]) -> str:
    if not sources:
        return ""
    return SOURCES_HEADING + "\n".join(source_line(s) for s in sources)


def usage_body(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def answer_details(answer: Answer) -> dict[str, Any]:
    """What a chat client does not show but a UI may: the standalone question, the sub-queries,
    degradations."""
    d = answer.to_dict()
    # The passages it did not cite stay out of a chat reply (REST /v1/query has them).
    return {k: v for k, v in d.items() if k not in ("answer", "sources", "retrieved")}


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def completion_body(
    model: str, content: str, usage: Usage, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``chat.completion`` with one assistant message, plus our own top-level keys."""
    return {
        "id": new_completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": usage_body(usage),
        **(extra or {}),
    }


def chat_completion(answer: Answer, model: str) -> dict[str, Any]:
    return completion_body(
        model,
        answer.answer + sources_markdown(answer.sources),
        answer.usage,
        {
            "sources": [s.to_dict() for s in answer.sources],
            "evidence": answer.evidence,
            "deepsearcher": answer_details(answer),
        },
    )


class ChunkWriter:
    """``chat.completion.chunk`` SSE frames sharing one id, creation time and model."""

    def __init__(self, model: str) -> None:
        self.base = {
            "id": new_completion_id(),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

    def frame(self, delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return sse({**self.base, "choices": [choice], **extra})

    def usage(self, usage: Usage) -> str:
        return sse({**self.base, "choices": [], "usage": usage_body(usage)})


def sse(payload: dict[str, Any] | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n"
