"""Chat models: the ``ChatModel`` protocol (``base``), the OpenAI-compatible client
(``client``), how its calls fail (``failures``) and how its replies are read (``replies``).
The names the rest of the library uses are importable from here."""

from __future__ import annotations

from deepsearcher.llm.base import (
    CHARS_PER_TOKEN,
    ChatModel,
    Completion,
    JsonSchema,
    LLMUnreachableError,
    Message,
    StreamPiece,
    TokenLogprob,
    ToolCall,
    ToolSchema,
    estimate_tokens,
    estimate_usage,
    unreachable_hint,
)
from deepsearcher.llm.client import OPENAI_BASE_URL, OpenAIChatModel, build_chat_model
from deepsearcher.llm.replies import TOP_LOGPROBS

__all__ = [
    "CHARS_PER_TOKEN",
    "OPENAI_BASE_URL",
    "TOP_LOGPROBS",
    "ChatModel",
    "Completion",
    "JsonSchema",
    "LLMUnreachableError",
    "Message",
    "OpenAIChatModel",
    "StreamPiece",
    "TokenLogprob",
    "ToolCall",
    "ToolSchema",
    "build_chat_model",
    "estimate_tokens",
    "estimate_usage",
    "unreachable_hint",
]
