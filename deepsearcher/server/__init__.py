"""HTTP API: OpenAI-compatible chat plus a small REST surface for queries, loads and health.

``service`` is the request pipeline the front ends share (``app``'s chat and REST routes,
``research``, ``mcp``); ``app`` builds and serves the FastAPI app; ``openai_api`` holds the
wire formats; ``errors`` the one error shape; ``guard`` the keys, browser checks, body limit and
search queue; ``stream`` the SSE plumbing; ``load`` loading over HTTP; ``public`` what clients
may see of the server's machine.
"""

from deepsearcher.server.app import create_app, run_server
from deepsearcher.server.service import SearchRequest, SearchService

__all__ = ["SearchRequest", "SearchService", "create_app", "run_server"]
