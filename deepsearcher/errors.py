"""Typed errors. Each carries a one-line ``message`` and a ``hint`` telling the user what to change.

The CLI prints ``error: <message>`` and ``hint: <hint>`` and exits 1; the HTTP server maps them to
OpenAI-shaped error bodies. Anything that is not a ``DeepSearcherError`` is a bug and keeps its
traceback.
"""

from __future__ import annotations


class DeepSearcherError(Exception):
    """Base class: a failure the user can act on."""

    default_hint = "run with -v for details"

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or self.default_hint

    def __str__(self) -> str:
        return self.message


class ConfigError(DeepSearcherError):
    default_hint = "check config.yaml and DEEPSEARCHER_* environment variables"


class LoaderError(DeepSearcherError):
    """A single file could not be loaded. The load goes on with the other files."""

    default_hint = "the file is skipped; fix or remove it and load again"


class EmbeddingError(DeepSearcherError):
    default_hint = "check the embedding section of config.yaml"


class StoreError(DeepSearcherError):
    default_hint = "check vector_store.uri in config.yaml"


class StoreLockedError(StoreError):
    """Milvus Lite allows one process per database directory."""


class IncompatibleCollectionError(StoreError):
    """The collection was built with another embedder or chunking."""


class CollectionNotFoundError(StoreError):
    default_hint = "load documents first: deepsearcher load PATH --collection NAME"


class LoadBusyError(DeepSearcherError):
    """Another load holds the collection's load lease and this one would not wait longer."""

    default_hint = "wait for the other load to finish, then run this one again"


class LoadLeaseLostError(DeepSearcherError):
    """A load lost its collection's lease midway (not renewed in time); it stops writing."""

    default_hint = "run the load again: files already recorded are skipped"


class LLMError(DeepSearcherError):
    default_hint = "check llm.base_url, llm.model and the API key variable named by llm.api_key_env"


class LLMUnavailableError(LLMError):
    """Retries are exhausted (timeouts, 429, 5xx, connection errors)."""


class LLMOutputError(LLMError):
    """The model's reply could not be parsed into the expected shape, even after a retry."""

    default_hint = "the model did not follow the output format; try a stronger model"


class BudgetExceeded(DeepSearcherError):
    """A query budget (calls, tokens, time) ran out. The loop answers with what it has."""

    default_hint = "raise query.max_llm_calls, query.max_tokens or query.timeout_s"


class QuestionTooLongError(DeepSearcherError):
    """A question (or search query, or research request) over ``server.max_question_chars``."""

    default_hint = "ask a shorter question, or raise server.max_question_chars"


def check_question_length(text: str, max_chars: int, what: str = "question") -> None:
    """The one length cap every entry point applies (library, CLI, HTTP routes, MCP tools)."""
    if len(text) > max_chars:
        raise QuestionTooLongError(
            f"the {what} is {len(text)} characters long; the limit is {max_chars}"
        )


class WebSearchError(DeepSearcherError):
    default_hint = "check the web_search section of config.yaml"
