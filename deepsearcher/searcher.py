"""``DeepSearcher``: the library API a chatbot process embeds.

Components are injected (or built lazily from settings on first use, so a process that only
queries never loads parsers, and an unchanged reload never loads the embedding model). This is
where they are wired: each question gets an agent built from the chat model, a ``Retriever``
over the store and embedder, and the web tool when web search is on for it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from deepsearcher.cache import AnswerCache
from deepsearcher.config import Settings, load_settings
from deepsearcher.embedding import Embedder, build_embedder
from deepsearcher.errors import LLMError, StoreError, WebSearchError, check_question_length
from deepsearcher.ingest import Ingestor, LoadProgress, ProgressCallback, require_loaded
from deepsearcher.options import LoadOptions, QueryOptions, or_configured
from deepsearcher.retrieval import Passages, Retriever
from deepsearcher.store import (
    AsyncStore,
    CollectionInfo,
    VectorStore,
    build_store,
    validate_collection_name,
)
from deepsearcher.types import Answer, AnswerDeltaEvent, DoneEvent, Event, LoadReport, Usage

if TYPE_CHECKING:
    # Type-only: the modules below import the openai SDK (seconds), which a process that
    # only loads or lists collections never needs. They are imported where first used.
    from deepsearcher.agents import Agent
    from deepsearcher.llm import ChatModel
    from deepsearcher.research import Report, ResearchEvent, ResearchRequest
    from deepsearcher.tools.web import WebSearch, WebSearchTool

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
        llm: ChatModel | None = None,
        web_search: WebSearch | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self._embedder = embedder
        self._store = store
        self._llm = llm
        self._web_search = web_search
        self._retriever: Retriever | None = None
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
    def astore(self) -> AsyncStore:
        """The store for async code: each call in a worker thread, which also opens the store
        on first use."""
        return AsyncStore(lambda: self.store)

    @property
    def llm(self) -> ChatModel | None:
        """The chat model, or None when no LLM is configured (retrieval-only)."""
        with self._lock:
            if self._llm is None and self.settings.llm_configured():
                from deepsearcher.llm import build_chat_model

                self._llm = build_chat_model(self.settings.llm)
            return self._llm

    @property
    def web_search(self) -> WebSearch | None:
        """The web search provider: the injected one, else the configured one when
        ``web_search.enabled``. Raises WebSearchError when it is misconfigured."""
        with self._lock:
            if self._web_search is None and self.settings.web_search.enabled:
                from deepsearcher.tools.web import build_web_search

                self._web_search = build_web_search(self.settings.web_search)
            return self._web_search

    @property
    def retriever(self) -> Retriever:
        """Search over the store with the embedder (both built on first use)."""
        store, embedder = self.store, self.embedder
        with self._lock:
            if self._retriever is None:
                self._retriever = Retriever(embedder, store, self.settings)
            return self._retriever

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
        options: LoadOptions | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        **overrides: object,
    ) -> LoadReport:
        """Load files/folders into ``collection`` incrementally; see ``Ingestor``. ``options``
        (or keyword ``overrides`` of its fields, e.g. ``prune=True``) say how."""
        if isinstance(paths, (str, Path)):
            paths = [paths]
        opts = (options or LoadOptions()).with_values(overrides)
        name = validate_collection_name(collection or self.settings.vector_store.collection)
        store = await self.astore.opened()
        ingestor = Ingestor(self.settings, store, lambda: self.embedder, on_progress)
        return await ingestor.aload(paths, name, opts)

    def load(
        self,
        paths: Sequence[str | Path] | str | Path,
        collection: str | None = None,
        options: LoadOptions | None = None,
        **kw: Any,
    ) -> LoadReport:
        return run_sync(self.aload(paths, collection, options, **kw), "load")

    def collections(self) -> list[CollectionInfo]:
        return self.store.list_collections()

    async def acollections(self) -> list[CollectionInfo]:
        return await self.astore.list_collections()

    def drop_collection(self, name: str) -> None:
        self.store.drop_collection(validate_collection_name(name))

    # -- querying ---------------------------------------------------------------------------

    def _web_tool(self, web: bool | None) -> WebSearchTool | None:
        """The web tool when web search is on for this question (the option, else config).
        A provider that cannot be built becomes one that says why, in the run's notes."""
        from deepsearcher.tools.web import (
            UnavailableWebSearch,
            WebSearchTool,
            build_web_search_or_unavailable,
        )

        settings = self.settings.web_search
        if not (settings.enabled if web is None else web):
            return None
        try:
            provider = self.web_search  # injected, or the configured one
        except WebSearchError as exc:
            provider = UnavailableWebSearch(exc)
        if provider is None:  # off in config, on for this question: built for it
            provider = build_web_search_or_unavailable(settings)
        return WebSearchTool(provider, settings)

    def build_agent(self, options: QueryOptions) -> Agent:
        """The agent for one question, with its components handed in."""
        from deepsearcher.agents import build_agent

        return build_agent(
            or_configured(options.agent, self.settings.query.agent),
            self.settings,
            self.llm,
            self.retriever.within(options.allowed_collections).filtered(options.filter),
            self._web_tool(options.web),
        )

    async def asearch(
        self, query: str, options: QueryOptions | None = None, **overrides: object
    ) -> Passages:
        """The passages most similar to ``query``, with no LLM: ``top_k`` of them (default
        ``query.top_k``) from ``collections`` (default: all) within ``allowed_collections``,
        each meeting ``filter``; the other options do not apply to a passage search."""
        check_question_length(query, self.settings.server.max_question_chars, "query")
        opts = (options or QueryOptions()).with_values(overrides)
        retriever = await asyncio.to_thread(lambda: self.retriever)
        scoped = retriever.within(opts.allowed_collections).filtered(opts.filter)
        top_k = or_configured(opts.top_k, self.settings.query.top_k)
        return await scoped.passages(query, opts.collections, top_k)

    async def acheck_collections(self, names: Sequence[str]) -> None:
        """Refuse, as a search would, a collection of ``names`` that does not exist or cannot
        be opened (``CollectionNotFoundError`` or its own error), or an empty store."""
        retriever = await asyncio.to_thread(lambda: self.retriever)
        retriever.check_requested(names, await retriever.available_collections())

    def _answer_cache(self, options: QueryOptions, use_cache: bool) -> AnswerCache | None:
        """The cache for this question, or None: off in config or for this call, or the web
        is searched (its results change without any load telling us)."""
        web = self.settings.web_search.enabled if options.web is None else options.web
        if not (use_cache and self.settings.cache.enabled) or web:
            return None
        return AnswerCache(self.store, self.settings)

    async def astream(
        self,
        question: str,
        options: QueryOptions | None = None,
        *,
        use_cache: bool = True,
        **overrides: object,
    ) -> AsyncIterator[Event]:
        """Yield progress events; the last is a ``DoneEvent`` carrying the ``Answer``.

        ``options`` (or keyword ``overrides`` of its fields, e.g. ``top_k=3``) tune this
        question; an unknown name raises ``UnknownOptionError`` listing the valid ones.
        A question answered before (``cache.enabled``, unless ``use_cache=False``) is answered
        from the cache: one ``AnswerDeltaEvent`` with the whole text, then the ``DoneEvent``
        whose answer has ``cached=True`` and zero usage."""
        t0 = time.perf_counter()
        # The one cap for every front end (server.max_question_chars): QuestionTooLongError.
        check_question_length(question, self.settings.server.max_question_chars)
        opts = (options or QueryOptions()).with_values(overrides)
        cache = await asyncio.to_thread(self._answer_cache, opts, use_cache)
        key: str | None = None
        if cache is not None:
            try:
                key = await asyncio.to_thread(cache.key, question, opts)
                hit = await asyncio.to_thread(cache.get, key)
            except StoreError as exc:  # a cache that fails must not fail the question
                logger.warning("answer cache unavailable, answering afresh: %s", exc)
                cache = key = hit = None
            if hit is not None:
                hit.question = question
                hit.usage = Usage()  # this reply cost no LLM call
                hit.seconds = time.perf_counter() - t0
                yield AnswerDeltaEvent(text=hit.answer)
                yield DoneEvent(answer=hit)
                return
        # Building the agent opens the store and loads the embedding model: not on the loop.
        agent = await asyncio.to_thread(self.build_agent, opts)
        async for event in agent.run(question, opts):
            if event.type == "done" and cache is not None and key is not None:
                try:
                    await asyncio.to_thread(cache.put, key, event.answer)
                except StoreError as exc:
                    logger.warning("answer not cached: %s", exc)
            yield event

    async def aquery(
        self,
        question: str,
        options: QueryOptions | None = None,
        *,
        use_cache: bool = True,
        **overrides: object,
    ) -> Answer:
        answer: Answer | None = None
        async for event in self.astream(question, options, use_cache=use_cache, **overrides):
            if event.type == "done":
                answer = event.answer
        assert answer is not None, "agent ended without a done event"
        return answer

    def query(
        self,
        question: str,
        options: QueryOptions | None = None,
        *,
        use_cache: bool = True,
        **overrides: object,
    ) -> Answer:
        return run_sync(self.aquery(question, options, use_cache=use_cache, **overrides), "query")

    async def arewrite_followup(
        self, question: str, turns: Sequence[tuple[str, str]], usage: Usage
    ) -> tuple[str, str | None]:
        """``(standalone question, note)`` for a follow-up in a conversation of ``(role,
        text)`` turns; without an LLM the question stays as asked, with a note saying so."""
        if not turns:
            return question, None
        llm = self.llm
        if llm is None:
            return question, "no LLM configured: the follow-up was searched as asked"
        from deepsearcher.agents.followup import rewrite_followup

        return await rewrite_followup(llm, question, turns, usage)

    # -- research reports -------------------------------------------------------------------

    async def astream_research(
        self, request: ResearchRequest | str
    ) -> AsyncIterator[ResearchEvent]:
        """A research run's events as they happen (brief, plan, researchers, draft, quality
        check, revisions); the last is a ``ResearchDoneEvent`` carrying the ``Report``.
        ``request.web`` (None: ``web_search.enabled``) lets the researchers search the web."""
        # Imported on use, like the agents it runs: openai is slow to import.
        from deepsearcher.research import ResearchRequest, stream_research

        req = ResearchRequest(request) if isinstance(request, str) else request
        check_question_length(
            req.request, self.settings.server.max_question_chars, "research request"
        )
        llm = self.llm
        if llm is None:
            raise LLMError(
                "research needs an LLM: none is configured",
                "set llm.base_url and llm.model in config.yaml",
            )
        retriever = await asyncio.to_thread(lambda: self.retriever)
        tool = await asyncio.to_thread(self._web_tool, req.web)
        async for event in stream_research(self.settings, llm, retriever, req, web=tool):
            yield event

    async def aresearch(
        self,
        request: ResearchRequest | str,
        *,
        on_event: Callable[[ResearchEvent], None] | None = None,
    ) -> Report:
        """A cited research ``Report``: ``astream_research`` collected; ``on_event`` sees
        every event as it happens."""
        report: Report | None = None
        async for event in self.astream_research(request):
            if on_event is not None:
                on_event(event)
            if event.type == "done":
                report = event.report
        assert report is not None, "the research run ended without a report"
        return report

    def research(
        self,
        request: ResearchRequest | str,
        *,
        on_event: Callable[[ResearchEvent], None] | None = None,
    ) -> Report:
        return run_sync(self.aresearch(request, on_event=on_event), "research")


# The front ends (server, CLI) reach the layers below through this module; these are the
# names they need from there.
__all__ = [
    "CollectionInfo",
    "DeepSearcher",
    "LoadProgress",
    "Passages",
    "require_loaded",
    "run_sync",
    "validate_collection_name",
]
