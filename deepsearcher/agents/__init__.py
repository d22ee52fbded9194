"""Agents turn a question into events and a cited ``Answer``. Chosen by name."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Protocol

from deepsearcher.errors import ConfigError
from deepsearcher.types import Event

if TYPE_CHECKING:
    from deepsearcher.searcher import DeepSearcher


class Agent(Protocol):
    """``run(question, **options)`` yields events; the last is a DoneEvent with the Answer.
    Typed loosely because each agent takes its own keyword options."""

    name: str

    @property
    def run(self) -> Callable[..., AsyncIterator[Event]]: ...


def _deep(searcher: DeepSearcher) -> Agent:
    from deepsearcher.agents.deep_search import DeepSearchAgent

    return DeepSearchAgent(searcher)


def _naive(searcher: DeepSearcher) -> Agent:
    from deepsearcher.agents.naive_rag import NaiveRAGAgent

    return NaiveRAGAgent(searcher)


AGENTS: dict[str, Callable[[DeepSearcher], Agent]] = {"deep": _deep, "naive": _naive}


def build_agent(searcher: DeepSearcher, name: str) -> Agent:
    try:
        return AGENTS[name](searcher)
    except KeyError:
        raise ConfigError(f"unknown agent '{name}'", f"use one of: {', '.join(AGENTS)}") from None
