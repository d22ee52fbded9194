"""The chat page at ``/``: a static page and its script and style, shipped inside the package
(no build step, no CDN). It talks to the same API as any client (``/v1/models``,
``/v1/chat/completions`` streamed, ``/v1/load``) with the key the user types in, so the page
itself holds no data and is served without a key."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

from deepsearcher.config import ServerSettings

_ASSETS = {
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
    "/static/favicon.svg": ("favicon.svg", "image/svg+xml"),
}
PAGE_PATHS = frozenset({"/", *_ASSETS})

# Self only: the page runs no inline script, loads nothing from elsewhere and may not be framed,
# so injected markup (documents are untrusted) could neither run nor call out.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def read_asset(name: str) -> str:
    """A file of the page, read from the installed package."""
    return resources.files("deepsearcher.server").joinpath("static", name).read_text("utf-8")


def page_routes(server: ServerSettings, *, keys_required: bool) -> APIRouter:
    """``GET /`` and its assets. The page learns from ``<body data-…>`` whether to ask for a key
    and whether to offer uploads: always, as ``/v1/load`` accepts uploaded files with or without
    ``server.load_root`` (which only enables loading by server-side path)."""
    router = APIRouter()
    flags = f'<body data-keys="{"on" if keys_required else "off"}" data-upload="on">'
    index = read_asset("index.html").replace("<body>", flags, 1)

    @router.get("/", include_in_schema=False)
    async def page() -> Response:
        return Response(index, media_type="text/html; charset=utf-8", headers=_HEADERS)

    for path, (name, media_type) in _ASSETS.items():
        router.add_api_route(
            path, _asset(read_asset(name), media_type), methods=["GET"], include_in_schema=False
        )
    return router


def _asset(body: str, media_type: str) -> Callable[[], Awaitable[Response]]:
    # A closure, not default arguments: FastAPI would read those as query parameters.
    async def asset() -> Response:
        return Response(body, media_type=media_type, headers=_HEADERS)

    return asset
