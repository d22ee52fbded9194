"""Optional web search: providers behind the ``WebSearch`` protocol, and the tool the
deep-search loop calls. Only query text is sent out; document text never leaves the machine."""

from deepsearcher.tools.fetch import FetchRefused, PageFetcher
from deepsearcher.tools.web import (
    WEB_SEARCH_PROVIDERS,
    DuckDuckGoWebSearch,
    SearxngWebSearch,
    TavilyWebSearch,
    UnavailableWebSearch,
    WebResult,
    WebSearch,
    WebSearchTool,
    build_web_search,
    build_web_search_or_unavailable,
)

__all__ = [
    "WEB_SEARCH_PROVIDERS",
    "DuckDuckGoWebSearch",
    "FetchRefused",
    "PageFetcher",
    "SearxngWebSearch",
    "TavilyWebSearch",
    "UnavailableWebSearch",
    "WebResult",
    "WebSearch",
    "WebSearchTool",
    "build_web_search",
    "build_web_search_or_unavailable",
]
