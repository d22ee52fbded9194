"""What a chat model is to the rest of the library: the ``ChatModel`` protocol and the values
it takes and returns (messages, tool calls, reply schemas, completions, stream pieces)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from deepsearcher.errors import LLMUnavailableError
from deepsearcher.types import Usage

Message = dict[str, str]
# An OpenAI function schema: {"type": "function", "function": {"name", "description",
# "parameters"}}.
ToolSchema = dict[str, Any]


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


def unreachable_hint(endpoint: str) -> str:
    return (
        f"check DEEPSEARCHER_LLM__BASE_URL (llm.base_url, now {endpoint}) and that the LLM "
        "server is running; without an LLM, queries show the best passages only"
    )


CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text with BPE tokenizers


def estimate_tokens(text: str) -> int:
    """A local token count for servers that report none: characters / 4, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_usage(messages: Sequence[Message], reply: str) -> Usage:
    """One call's usage counted locally, marked ``estimated``."""
    # A few tokens per message for the chat template's role markers.
    prompt = sum(estimate_tokens(str(m.get("content") or "")) + 4 for m in messages)
    return Usage(1, prompt, estimate_tokens(reply), estimated=True)
