"""``DeepSearcher``: the library API a chatbot process embeds.

Components are injected (or built lazily from settings on first use, so a process that only
queries never loads parsers, and an unchanged reload never loads the embedding model).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from deepsearcher.config import Settings, load_settings
from deepsearcher.embedding import Embedder, build_embedder
from deepsearcher.ingest import Ingestor, ProgressCallback
from deepsearcher.store import CollectionInfo, VectorStore, build_store, validate_collection_name
from deepsearcher.types import Answer, Event, LoadReport

logger = logging.getLogger(__name__)
T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T], name: str) -> T:
    """Run a coroutine from synchronous code; refuse clearly inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise RuntimeError(f"{name}() was called inside a running event loop; use `await a{name}(...)`")


class DeepSearcher:
    """Load documents and answer questions over them.

    >>> ds = DeepSearcher.from_config()            # config.yaml < env < overrides
    >>> ds.load(["./docs"])                        # incremental
    >>> ds.query("What changed in the Q3 travel policy?").answer
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        store: VectorStore | None = None,
        llm: Any | None = None,
        web_search: Any | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self._embedder = embedder
        self._store = store
        self._llm = llm
        self._web_search = web_search
        self._lock = threading.Lock()

    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str] | None = None, **overrides: Any
    ) -> DeepSearcher:
        """Build from ``config.yaml`` (or ``path``), the environment, and nested overrides such as
        ``llm={"model": "gpt-4o"}``."""
        return cls(load_settings(path, overrides=overrides))

    # -- components (lazy) ------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = build_embedder(self.settings.embedding)
            return self._embedder

    @property
    def store(self) -> VectorStore:
        with self._lock:
            if self._store is None:
                self._store = build_store(self.settings.vector_store)
            return self._store

    @property
    def llm(self) -> Any:
        """The chat model, or None when no LLM is configured (retrieval-only)."""
        with self._lock:
            if self._llm is None and self.settings.llm_configured():
                from deepsearcher.llm import build_chat_model

                self._llm = build_chat_model(self.settings.llm)
            return self._llm

    @property
    def web_search(self) -> Any:
        with self._lock:
            if self._web_search is None and self.settings.web_search.enabled:
                from deepsearcher.tools import build_web_search

                self._web_search = build_web_search(self.settings.web_search)
            return self._web_search

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> DeepSearcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- loading ----------------------------------------------------------------------------

    async def aload(
        self,
        paths: Sequence[str | Path] | str | Path,
        collection: str | None = None,
        *,
        description: str | None = None,
        force: bool = False,
        prune: bool = False,
        rebuild: bool = False,
        on_progress: ProgressCallback | None = None,
    ) -> LoadReport:
        """Load files/folders into ``collection`` incrementally; see ``Ingestor``."""
        if isinstance(paths, (str, Path)):
            paths = [paths]
        name = validate_collection_name(collection or self.settings.vector_store.collection)
        store = await asyncio.to_thread(lambda: self.store)
        ingestor = Ingestor(self.settings, store, lambda: self.embedder, on_progress)
        return await ingestor.aload(
            paths, name, description=description, force=force, prune=prune, rebuild=rebuild
        )

    def load(
        self, paths: Sequence[str | Path] | str | Path, collection: str | None = None, **kw: Any
    ) -> LoadReport:
        return run_sync(self.aload(paths, collection, **kw), "load")

    def collections(self) -> list[CollectionInfo]:
        return self.store.list_collections()

    def drop_collection(self, name: str) -> None:
        self.store.drop_collection(validate_collection_name(name))

    # -- querying ---------------------------------------------------------------------------

    def _agent(self, agent: str | None) -> Any:
        from deepsearcher.agents import build_agent

        return build_agent(self, agent or self.settings.query.agent)

    async def astream(self, question: str, **options: Any) -> AsyncIterator[Event]:
        """Yield progress events; the last is a ``DoneEvent`` carrying the ``Answer``."""
        agent = self._agent(options.pop("agent", None))
        async for event in agent.run(question, **options):
            yield event

    async def aquery(self, question: str, **options: Any) -> Answer:
        answer: Answer | None = None
        async for event in self.astream(question, **options):
            if event.type == "done":
                answer = event.answer  # type: ignore[attr-defined]
        assert answer is not None, "agent ended without a done event"
        return answer

    def query(self, question: str, **options: Any) -> Answer:
        return run_sync(self.aquery(question, **options), "query")
