"""Agents turn a question into events and a cited ``Answer``. Chosen by name; each receives
its components (settings, chat model, retriever, web tool) from whoever builds it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Protocol

from deepsearcher.agents.deep_search import DeepSearchAgent
from deepsearcher.agents.naive_rag import NaiveRAGAgent
from deepsearcher.config import Settings, registry
from deepsearcher.errors import ConfigError
from deepsearcher.llm import ChatModel
from deepsearcher.options import QueryOptions
from deepsearcher.retrieval import Retriever
from deepsearcher.tools.web import WebSearchTool
from deepsearcher.types import Event


class Agent(Protocol):
    """``run(question, options)`` yields events; the last is a DoneEvent with the Answer."""

    name: str

    def run(self, question: str, options: QueryOptions) -> AsyncIterator[Event]: ...


AgentFactory = Callable[[Settings, "ChatModel | None", Retriever, "WebSearchTool | None"], Agent]


def build_naive(
    settings: Settings, llm: ChatModel | None, retriever: Retriever, web: WebSearchTool | None
) -> Agent:
    return NaiveRAGAgent(settings, llm, retriever)  # searches the private collections only


# Registered in deepsearcher.config.registry, where the settings read the names too.
AGENTS: Mapping[str, AgentFactory] = registry.AGENTS


def build_agent(
    name: str,
    settings: Settings,
    llm: ChatModel | None,
    retriever: Retriever,
    web: WebSearchTool | None = None,
) -> Agent:
    try:
        factory = AGENTS[name]
    except KeyError:
        raise ConfigError(f"unknown agent '{name}'", f"use one of: {', '.join(AGENTS)}") from None
    return factory(settings, llm, retriever, web)


__all__ = ["AGENTS", "Agent", "DeepSearchAgent", "NaiveRAGAgent", "build_agent"]
