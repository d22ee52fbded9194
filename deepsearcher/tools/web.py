"""Web search providers and the tool the deep-search loop calls.

Only the search query text is sent to the provider; document text never leaves the machine.
Results become ``Hit(kind="web")`` and go through the same YES/NO judgement as private chunks.
A provider that fails degrades the run visibly (one note), it never stops it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urldefrag

import httpx

from deepsearcher.config import WebSearchSettings, registry
from deepsearcher.errors import WebSearchError
from deepsearcher.run_context import RunContext
from deepsearcher.tools.fetch import (
    FetchRefused,
    PageFetcher,
    extract_main_text,
    trafilatura_available,
)
from deepsearcher.types import Event, Hit

logger = logging.getLogger(__name__)

TAVILY_URL = "https://api.tavily.com"
UNAVAILABLE = "web search unavailable"
MAX_CONCURRENT_FETCHES = 8
MAX_PAGE_CHARS = 4000  # page text handed to the judge; a whole page would blow the token budget


@dataclass(frozen=True)
class WebResult:
    title: str
    url: str
    snippet: str


@runtime_checkable
class WebSearch(Protocol):
    """A web search provider: query text in, ranked results out."""

    async def search(self, query: str, max_results: int) -> list[WebResult]: ...


# ---------------------------------------------------------------------------------------------
# Providers
# ---------------------------------------------------------------------------------------------


def _parse_results(data: Any, provider: str, *, snippet_key: str, url_key: str) -> list[WebResult]:
    """Results from a provider's JSON, skipping entries without an http(s) URL."""
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise WebSearchError(f"{provider} returned JSON without a 'results' list")
    out: list[WebResult] = []
    for item in results:
        if not isinstance(item, dict):
            continue
        url = item.get(url_key)
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            continue
        title = item.get("title")
        snippet = item.get(snippet_key)
        out.append(
            WebResult(
                title=title.strip() if isinstance(title, str) and title.strip() else url,
                url=url.strip(),
                snippet=snippet.strip() if isinstance(snippet, str) else "",
            )
        )
    return out


async def _request_json(
    provider: str, timeout_s: float, send: Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]
) -> Any:
    """Run one provider request and decode its JSON; every failure becomes WebSearchError."""

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await send(client)
            await response.aread()
            return response

    try:
        # httpx's timeout is per read; the total bound stops a server trickling bytes.
        response = await asyncio.wait_for(call(), timeout_s)
    except (asyncio.TimeoutError, httpx.TimeoutException):
        raise WebSearchError(f"{provider} timed out after {timeout_s:g}s") from None
    except httpx.HTTPError as exc:
        raise WebSearchError(f"{provider} could not be reached ({type(exc).__name__})") from None
    if response.status_code != 200:
        hint = None
        if response.status_code in (401, 403):
            hint = (
                "check the API key"
                if provider == "tavily"
                else "enable the json format in the SearXNG settings.yml (search.formats)"
            )
        raise WebSearchError(f"{provider} returned HTTP {response.status_code}", hint)
    try:
        return response.json()
    except ValueError:
        raise WebSearchError(f"{provider} returned a response that is not JSON") from None


class TavilyWebSearch:
    """Tavily's search API (``POST /search``); the key comes from ``api_key_env``."""

    def __init__(self, settings: WebSearchSettings) -> None:
        key = os.environ.get(settings.api_key_env, "").strip()
        if not key:
            raise WebSearchError(
                f"web search provider tavily needs an API key: {settings.api_key_env} is not set",
                f"export {settings.api_key_env}=tvly-... (from app.tavily.com), or set "
                "web_search.provider to searxng with web_search.base_url",
            )
        self._key = key
        self.base_url = (settings.base_url or TAVILY_URL).rstrip("/")
        self.timeout_s = settings.timeout_s

    def __repr__(self) -> str:  # never show the key
        return f"TavilyWebSearch(base_url={self.base_url!r})"

    async def search(self, query: str, max_results: int) -> list[WebResult]:
        body = {
            "api_key": self._key,  # Tavily's documented body field; the header is the newer form
            "query": query,
            "max_results": max_results,
            "search_depth": "basic",
            "include_answer": False,
            "include_raw_content": False,
        }
        data = await _request_json(
            "tavily",
            self.timeout_s,
            lambda c: c.post(
                f"{self.base_url}/search",
                json=body,
                headers={"Authorization": f"Bearer {self._key}"},
            ),
        )
        return _parse_results(data, "tavily", snippet_key="content", url_key="url")[:max_results]


class SearxngWebSearch:
    """A SearXNG instance (``GET /search?format=json``); needs ``base_url``."""

    def __init__(self, settings: WebSearchSettings) -> None:
        if not settings.base_url:
            raise WebSearchError(
                "web search provider searxng needs web_search.base_url",
                "set web_search.base_url to your SearXNG instance, e.g. http://localhost:8888",
            )
        self.base_url = settings.base_url.rstrip("/")
        self.timeout_s = settings.timeout_s

    def __repr__(self) -> str:
        return f"SearxngWebSearch(base_url={self.base_url!r})"

    async def search(self, query: str, max_results: int) -> list[WebResult]:
        data = await _request_json(
            "searxng",
            self.timeout_s,
            lambda c: c.get(f"{self.base_url}/search", params={"q": query, "format": "json"}),
        )
        return _parse_results(data, "searxng", snippet_key="content", url_key="url")[:max_results]


class DuckDuckGoWebSearch:
    """DuckDuckGo through the ``ddgs`` package (imported lazily; not a default dependency)."""

    def __init__(self, settings: WebSearchSettings) -> None:
        try:
            import ddgs
        except ImportError:
            raise WebSearchError(
                "web search provider duckduckgo needs the ddgs package, which is not installed",
                "pip install ddgs, or use provider tavily or searxng",
            ) from None
        self._ddgs = ddgs
        self.timeout_s = settings.timeout_s

    async def search(self, query: str, max_results: int) -> list[WebResult]:
        def run() -> Any:
            return self._ddgs.DDGS(timeout=int(max(self.timeout_s, 1))).text(
                query, max_results=max_results
            )

        try:
            rows = await asyncio.wait_for(asyncio.to_thread(run), self.timeout_s)
        except asyncio.TimeoutError:
            raise WebSearchError(f"duckduckgo timed out after {self.timeout_s:g}s") from None
        except Exception as exc:  # ddgs raises its own hierarchy (rate limits, timeouts, ...)
            raise WebSearchError(f"duckduckgo failed ({type(exc).__name__}: {exc})") from None
        data = {"results": list(rows) if isinstance(rows, (list, tuple)) else rows}
        return _parse_results(data, "duckduckgo", snippet_key="body", url_key="href")[:max_results]


# Registered in deepsearcher.config.registry, where the settings read the names too.
WEB_SEARCH_PROVIDERS: Mapping[str, Callable[[WebSearchSettings], WebSearch]] = (
    registry.WEB_SEARCH_PROVIDERS
)


def build_web_search(settings: WebSearchSettings) -> WebSearch:
    """The provider named by ``settings.provider``; raises WebSearchError when misconfigured."""
    factory = WEB_SEARCH_PROVIDERS.get(settings.provider)
    if factory is None:
        raise WebSearchError(
            f"unknown web search provider {settings.provider!r}",
            f"use one of: {', '.join(WEB_SEARCH_PROVIDERS)}",
        )
    return factory(settings)


class UnavailableWebSearch:
    """A provider that could not be built (no API key, no base_url): every search raises the
    error that stopped it, so a question with web search on says why in a note instead of
    failing."""

    def __init__(self, error: WebSearchError) -> None:
        self.error = error

    async def search(self, query: str, max_results: int) -> list[WebResult]:
        raise self.error


def build_web_search_or_unavailable(settings: WebSearchSettings) -> WebSearch:
    try:
        return build_web_search(settings)
    except WebSearchError as exc:
        return UnavailableWebSearch(exc)


# ---------------------------------------------------------------------------------------------
# The tool used by the deep-search loop
# ---------------------------------------------------------------------------------------------


def normalize_url(url: str) -> str:
    return urldefrag(url.strip())[0]


def web_hit_id(url: str) -> str:
    return "web:" + hashlib.sha1(normalize_url(url).encode("utf-8")).hexdigest()


class WebSearchTool:
    """Send the loop's queries to the web provider and turn the results into web ``Hit``s."""

    def __init__(self, provider: WebSearch, settings: WebSearchSettings) -> None:
        self.provider = provider
        self.settings = settings
        self.fetcher = PageFetcher(settings)

    async def search_many(
        self, queries: Sequence[str], ctx: RunContext
    ) -> tuple[list[list[Hit]], list[Event]]:
        """Web hits per query (aligned with ``queries``) and the events to show. The searches
        and page fetches together end with the run's search phase."""
        events: list[Event] = []
        empty: list[list[Hit]] = [[] for _ in queries]
        left = ctx.search_remaining_s()
        if not queries or left <= 0:  # out of time: the loop stops and says so itself
            return empty, events
        try:
            hits = await asyncio.wait_for(self._search_many(queries, ctx, events), left)
        except asyncio.TimeoutError:
            events.append(ctx.note(f"web search cut short: {ctx.time_reason()}"))
            return empty, events
        return hits, events

    async def _search_many(
        self, queries: Sequence[str], ctx: RunContext, events: list[Event]
    ) -> list[list[Hit]]:
        if isinstance(self.provider, UnavailableWebSearch):  # one note, no failure per query
            self._note_unavailable(ctx, self.provider.error, events)
            return [[] for _ in queries]
        outcomes = await asyncio.gather(*(self._search_one(self.provider, q) for q in queries))
        failures = [o for o in outcomes if isinstance(o, WebSearchError)]
        if failures:
            self._note_unavailable(ctx, failures[0], events)
        per_query = [o if isinstance(o, list) else [] for o in outcomes]

        texts: dict[str, str] = {}
        if self.settings.fetch_pages:
            texts = await self._fetch_pages(per_query, ctx, events)
        return [self._to_hits(results, texts) for results in per_query]

    async def _search_one(
        self, provider: WebSearch, query: str
    ) -> list[WebResult] | WebSearchError:
        try:
            results = await provider.search(query, self.settings.max_results)
        except WebSearchError as exc:
            logger.warning("web search failed for %r: %s", query, exc.message)
            return exc
        except (httpx.HTTPError, OSError, ValueError, asyncio.TimeoutError) as exc:
            # An injected provider that does not translate its transport errors.
            logger.warning("web search failed for %r: %r", query, exc)
            return WebSearchError(f"{type(exc).__name__}: {exc}")
        if not isinstance(results, list) or not all(isinstance(r, WebResult) for r in results):
            return WebSearchError(f"provider {type(provider).__name__} returned no result list")
        return results

    def _note_unavailable(self, ctx: RunContext, exc: WebSearchError, events: list[Event]) -> None:
        # Once per run: ctx.notes is the run's record and becomes the answer's notes.
        if any(n.startswith(UNAVAILABLE) for n in ctx.notes):
            return
        reason = exc.message
        if exc.hint and exc.hint != WebSearchError.default_hint:
            reason += f" ({exc.hint})"
        events.append(ctx.note(f"{UNAVAILABLE}: {reason}; answering from private documents"))

    def _to_hits(self, results: Sequence[WebResult], texts: dict[str, str]) -> list[Hit]:
        hits: list[Hit] = []
        seen: set[str] = set()
        for result in results:
            url = normalize_url(result.url)
            if url in seen:
                continue
            seen.add(url)
            text = texts.get(url) or result.snippet or result.title
            if not text.strip():
                continue
            hits.append(
                Hit(
                    id=web_hit_id(url),
                    text=text,
                    source=url,
                    score=1.0 / (1 + len(hits)),  # rank order; providers' scores do not compare
                    collection="web",
                    kind="web",
                    title=result.title,
                )
            )
        return hits

    async def _fetch_pages(
        self, per_query: list[list[WebResult]], ctx: RunContext, events: list[Event]
    ) -> dict[str, str]:
        """Main text of each distinct result page; missing entries fall back to the snippet."""
        if not trafilatura_available():
            message = "page fetch off: install the web extra (pip install 'deepsearcher[web]')"
            if message not in ctx.notes:
                events.append(ctx.note(message))
            return {}
        urls = list(dict.fromkeys(normalize_url(r.url) for results in per_query for r in results))
        if not urls:
            return {}
        limit = asyncio.Semaphore(MAX_CONCURRENT_FETCHES)
        async with httpx.AsyncClient(timeout=self.settings.timeout_s) as client:

            async def one(url: str) -> str | None:
                async with limit:
                    try:
                        page = await self.fetcher.fetch(url, client)
                    except FetchRefused as exc:
                        logger.info("not fetching %s: %s; using the snippet", url, exc)
                        return None
                text = await asyncio.to_thread(extract_main_text, page)
                if text is None:
                    logger.info("no main text in %s; using the snippet", url)
                    return None
                return text[:MAX_PAGE_CHARS]

            texts = await asyncio.gather(*(one(u) for u in urls))
        return {u: t for u, t in zip(urls, texts, strict=True) if t}
