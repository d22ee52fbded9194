"""Web search: providers against loopback stubs, the tool's degradation, the SSRF guard, and a
full deep query that cites web results without ever sending document text out."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import sys
import threading
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from deepsearcher.config import Settings
from deepsearcher.errors import WebSearchError
from deepsearcher.run_context import RunContext
from deepsearcher.tools import (
    DuckDuckGoWebSearch,
    PageFetcher,
    SearxngWebSearch,
    TavilyWebSearch,
    WebResult,
    WebSearchTool,
    build_web_search,
    build_web_search_or_unavailable,
)
from deepsearcher.tools import fetch as fetch_module
from deepsearcher.types import NoteEvent
from tests.llm_server import ScriptedLLMServer, task_of

SECRET = "zebra-quartz-4471"
QUESTION = "What is the warranty period for the Falcon drone battery?"
WEB_URL = "https://example.com/falcon-drone-battery-warranty"
WEB_SNIPPET = "The Falcon drone battery warranty period is twelve months from purchase."


# ---------------------------------------------------------------------------------------------
# A loopback stub speaking Tavily (POST /search) and SearXNG (GET /search?format=json), plus
# pages and redirects for the fetcher.
# ---------------------------------------------------------------------------------------------


class WebStub:
    def __init__(self) -> None:
        self.mode = "ok"  # ok | 500 | slow | junk
        self.slow_s = 3.0
        self.results: list[dict[str, str]] = []
        self.pages: dict[str, str] = {}
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        handler = type("_Bound", (_StubHandler,), {"stub": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def paths(self, prefix: str) -> list[str]:
        with self._lock:
            return [r["path"] for r in self.requests if r["path"].startswith(prefix)]

    def everything_received(self) -> str:
        with self._lock:
            return "\n".join(json.dumps(r) for r in self.requests)

    def __enter__(self) -> WebStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class _StubHandler(BaseHTTPRequestHandler):
    stub: WebStub
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self, body: bytes) -> None:
        with self.stub._lock:
            self.stub.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers.items()),
                    "body": body.decode("utf-8", errors="replace"),
                }
            )

    def _send(
        self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client gave up
            self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._record(body)
        if urlsplit(self.path).path == "/search":
            self._search(tavily=True)
        else:
            self._send(404, b"{}", "application/json")

    def do_GET(self) -> None:
        self._record(b"")
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if parts.path == "/search":
            self._search(tavily=False)
        elif parts.path.startswith("/page/"):
            html = self.stub.pages.get(parts.path[len("/page/") :])
            if html is None:
                self._send(404, b"not found", "text/plain")
            else:
                self._send(200, html.encode(), "text/html; charset=utf-8")
        elif parts.path == "/redirect":
            self._send(302, b"", "text/plain", {"Location": query["to"][0]})
        elif parts.path.startswith("/loop/"):
            n = int(parts.path.rsplit("/", 1)[1])
            self._send(302, b"", "text/plain", {"Location": f"/loop/{n + 1}"})
        else:
            self._send(404, b"not found", "text/plain")

    def _search(self, *, tavily: bool) -> None:
        mode = self.stub.mode
        if mode == "500":
            self._send(500, b'{"error": "internal"}', "application/json")
            return
        if mode == "slow":
            self.stub._stop.wait(self.stub.slow_s)
        if mode == "junk":
            self._send(200, b"<html>rate limited, try later</html>", "text/html")
            return
        results = [dict(r) for r in self.stub.results]
        if tavily:
            for i, r in enumerate(results):
                r["score"] = round(0.9 - 0.1 * i, 2)  # type: ignore[assignment]
            payload: dict[str, Any] = {"query": "q", "results": results, "response_time": 0.1}
        else:
            payload = {"query": "q", "number_of_results": len(results), "results": results}
        self._send(200, json.dumps(payload).encode(), "application/json")


@pytest.fixture
def stub() -> Iterator[WebStub]:
    with WebStub() as s:
        yield s


def web_settings(settings: Settings, stub: WebStub, **kw: Any) -> Settings:
    ws = settings.web_search
    ws.enabled = True
    ws.provider = kw.pop("provider", "searxng")
    ws.base_url = stub.url
    for key, value in kw.items():
        setattr(ws, key, value)
    return settings


def run_tool(settings: Settings, queries: list[str], ctx: RunContext | None = None) -> Any:
    ctx = ctx or RunContext.create(settings, None)
    tool = WebSearchTool(build_web_search_or_unavailable(settings.web_search), settings.web_search)
    hits, events = asyncio.run(tool.search_many(queries, ctx))
    return hits, events, ctx


# ---------------------------------------------------------------------------------------------
# Providers
# ---------------------------------------------------------------------------------------------


def test_searxng_sends_the_query_and_parses_results(settings: Settings, stub: WebStub) -> None:
    stub.results = [
        {"title": "One", "url": "https://a.example/1", "content": "first"},
        {"title": "", "url": "https://a.example/2", "content": "second"},
        {"title": "no url", "content": "skipped"},
        {"title": "ftp", "url": "ftp://a.example/x", "content": "skipped"},
    ]
    provider = build_web_search(web_settings(settings, stub).web_search)
    assert isinstance(provider, SearxngWebSearch)
    results = asyncio.run(provider.search("falcon battery", 5))
    assert results == [
        WebResult("One", "https://a.example/1", "first"),
        WebResult("https://a.example/2", "https://a.example/2", "second"),
    ]
    (path,) = stub.paths("/search")
    assert parse_qs(urlsplit(path).query) == {"q": ["falcon battery"], "format": ["json"]}
    assert len(asyncio.run(provider.search("x", 1))) == 1  # max_results is honoured


def test_tavily_posts_the_key_in_the_body(
    settings: Settings, stub: WebStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key")
    stub.results = [{"title": "T", "url": "https://t.example/", "content": "snippet"}]
    provider = build_web_search(web_settings(settings, stub, provider="tavily").web_search)
    assert isinstance(provider, TavilyWebSearch)
    assert "tvly-test-key" not in repr(provider)
    assert asyncio.run(provider.search("falcon battery", 3)) == [
        WebResult("T", "https://t.example/", "snippet")
    ]
    (request,) = stub.requests
    body = json.loads(request["body"])
    assert (request["method"], request["path"]) == ("POST", "/search")
    assert body["api_key"] == "tvly-test-key"
    assert (body["query"], body["max_results"]) == ("falcon battery", 3)


def test_tavily_without_api_key_raises_with_hint(settings: Settings) -> None:
    settings.web_search.provider = "tavily"
    with pytest.raises(WebSearchError) as info:
        build_web_search(settings.web_search)
    assert "TAVILY_API_KEY" in info.value.message
    assert "export TAVILY_API_KEY" in info.value.hint


def test_searxng_without_base_url_raises(settings: Settings) -> None:
    settings.web_search.provider = "searxng"
    with pytest.raises(WebSearchError, match="base_url"):
        build_web_search(settings.web_search)


def test_duckduckgo_needs_ddgs(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.web_search.provider = "duckduckgo"
    monkeypatch.setitem(sys.modules, "ddgs", None)  # import fails as if not installed
    with pytest.raises(WebSearchError) as info:
        build_web_search(settings.web_search)
    assert "ddgs" in info.value.message and "pip install ddgs" in info.value.hint


def test_duckduckgo_adapts_ddgs_results(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, int]] = []

    class FakeDDGS:
        def __init__(self, timeout: int) -> None:
            pass

        def text(self, query: str, max_results: int) -> list[dict[str, str]]:
            seen.append((query, max_results))
            return [{"title": "D", "href": "https://d.example/", "body": "duck snippet"}]

    monkeypatch.setitem(sys.modules, "ddgs", types.SimpleNamespace(DDGS=FakeDDGS))
    settings.web_search.provider = "duckduckgo"
    provider = build_web_search(settings.web_search)
    assert isinstance(provider, DuckDuckGoWebSearch)
    assert asyncio.run(provider.search("q", 4)) == [
        WebResult("D", "https://d.example/", "duck snippet")
    ]
    assert seen == [("q", 4)]


@pytest.mark.parametrize(
    ("mode", "message"),
    [("500", "HTTP 500"), ("slow", "timed out"), ("junk", "not JSON")],
)
def test_provider_failures_raise_web_search_error(
    settings: Settings, stub: WebStub, mode: str, message: str
) -> None:
    stub.mode = mode
    provider = build_web_search(web_settings(settings, stub, timeout_s=0.3).web_search)
    with pytest.raises(WebSearchError, match=message):
        asyncio.run(provider.search("q", 5))


# ---------------------------------------------------------------------------------------------
# The tool
# ---------------------------------------------------------------------------------------------


def test_tool_makes_deduplicated_web_hits(settings: Settings, stub: WebStub) -> None:
    stub.results = [
        {"title": "First", "url": "https://w.example/a", "content": "alpha"},
        {"title": "Again", "url": "https://w.example/a#section", "content": "alpha again"},
        {"title": "Second", "url": "https://w.example/b", "content": "beta"},
    ]
    hits, events, _ = run_tool(web_settings(settings, stub), ["q1", "q2"])
    assert events == []
    assert len(hits) == 2
    for per_query in hits:
        assert [h.source for h in per_query] == ["https://w.example/a", "https://w.example/b"]
        first = per_query[0]
        assert first.kind == "web" and first.collection == "web" and first.title == "First"
        assert first.id == "web:" + hashlib.sha1(b"https://w.example/a").hexdigest()
        assert first.text == "alpha"
        assert per_query[0].score > per_query[1].score
    assert sorted(parse_qs(urlsplit(p).query)["q"][0] for p in stub.paths("/search")) == [
        "q1",
        "q2",
    ]


@pytest.mark.parametrize("mode", ["500", "slow", "junk"])
def test_tool_failure_gives_no_hits_and_one_note_per_run(
    settings: Settings, stub: WebStub, mode: str
) -> None:
    stub.mode = mode
    s = web_settings(settings, stub, timeout_s=0.3)
    hits, events, ctx = run_tool(s, ["q1", "q2", "q3"])
    assert hits == [[], [], []]
    assert len(events) == 1 and isinstance(events[0], NoteEvent)
    assert events[0].message.startswith("web search unavailable: searxng")
    # A second iteration of the same run adds no second note.
    hits, events, ctx = run_tool(s, ["q4"], ctx)
    assert hits == [[]] and events == []
    assert [n for n in ctx.notes if "web search unavailable" in n] == [ctx.notes[0]]


def test_tool_notes_a_misconfigured_provider(settings: Settings) -> None:
    settings.web_search.enabled = True  # tavily without TAVILY_API_KEY
    hits, events, ctx = run_tool(settings, ["q"])
    assert hits == [[]]
    assert "TAVILY_API_KEY" in events[0].message and ctx.notes == [events[0].message]


# ---------------------------------------------------------------------------------------------
# Page fetching and the SSRF guard
# ---------------------------------------------------------------------------------------------

ARTICLE = (
    "<html><head><title>Falcon battery care</title></head><body>"
    "<nav><a href='/'>Home</a> <a href='/shop'>Shop</a> <a href='/login'>Login</a></nav>"
    "<article><h1>Falcon battery care</h1>"
    "<p>The Falcon drone battery keeps its full warranty when it is stored at half charge "
    "in a cool and dry place. Owners who ship a swollen battery back within the warranty "
    "period receive a replacement pack within ten working days.</p>"
    "<p>Calibration should be repeated every fifty cycles, and firmware updates are applied "
    "from the companion app before the first flight of the season.</p></article>"
    "<footer>Copyright 2024 Example Drone Shop. All rights reserved.</footer></body></html>"
)


def test_guard_refuses_private_hosts_before_connecting(
    settings: Settings, stub: WebStub, caplog: pytest.LogCaptureFixture
) -> None:
    stub.pages["a"] = ARTICLE
    stub.results = [
        {"title": "loop", "url": f"{stub.url}/page/a", "content": "snippet loopback"},
        {"title": "lan", "url": "http://10.0.0.1/admin", "content": "snippet lan"},
        {
            "title": "meta",
            "url": "http://169.254.169.254/latest/meta-data/",
            "content": "snippet meta",
        },
        {"title": "v6", "url": "http://[::ffff:10.0.0.1]/", "content": "snippet mapped"},
        {"title": "zero", "url": "http://0.0.0.0:1/", "content": "snippet zero"},
    ]
    caplog.set_level(logging.INFO, logger="deepsearcher.tools")
    s = web_settings(settings, stub, fetch_pages=True, allow_private_hosts=False)
    hits, events, _ = run_tool(s, ["falcon battery"])
    assert events == []
    assert [h.text for h in hits[0]] == [r["content"] for r in stub.results]  # snippets kept
    assert stub.paths("/page/") == []  # nothing was fetched
    refused = caplog.text
    for reason in ("loopback address 127.0.0.1", "private address 10.0.0.1", "link-local"):
        assert reason in refused
    assert refused.count("not fetching") == 5


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("2002:7f00:1::", "loopback via 6to4 (127.0.0.1)"),
        ("2002:a9fe:a9fe::", "link-local via 6to4 (169.254.169.254)"),
        ("2002:a00:1::", "private via 6to4 (10.0.0.1)"),
        ("fec0::1", "site-local"),
        ("2001:0:808:808:8000:63bf:80ff:fffe", "loopback via Teredo (127.0.0.1)"),
        ("64:ff9b::7f00:1", "loopback via NAT64 (127.0.0.1)"),
        ("64:ff9b::a9fe:a9fe", "link-local via NAT64 (169.254.169.254)"),
        ("64:ff9b:1:a00:0:100::", "unspecified via NAT64 (0.0.0.0)"),  # 10.0.0.1 in /48
        ("64:ff9b:1::a00:1", "private via NAT64 (10.0.0.1)"),  # /96 layout
        ("::ffff:169.254.169.254", "link-local via IPv4-mapped (169.254.169.254)"),
    ],
)
def test_guard_refuses_ipv4_hidden_in_ipv6(address: str, reason: str) -> None:
    import ipaddress

    assert fetch_module.refusal_reason(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    "address", ["2002:808:808::", "64:ff9b::808:808", "::ffff:8.8.8.8", "2606:4700::1111"]
)
def test_guard_lets_public_addresses_through(address: str) -> None:
    import ipaddress

    assert fetch_module.refusal_reason(ipaddress.ip_address(address)) is None


def test_guard_refuses_a_6to4_url_to_the_metadata_service(settings: Settings) -> None:
    fetcher = PageFetcher(settings.web_search)
    with pytest.raises(fetch_module.FetchRefused, match="link-local via 6to4"):
        asyncio.run(fetcher.check_url("http://[2002:a9fe:a9fe::]/latest/meta-data/"))
    with pytest.raises(fetch_module.FetchRefused, match="loopback via 6to4"):
        asyncio.run(fetcher.check_url("http://[2002:7f00:1::]/"))


def test_allow_private_hosts_fetches_main_text(settings: Settings, stub: WebStub) -> None:
    stub.pages["a"] = ARTICLE
    stub.results = [{"title": "care", "url": f"{stub.url}/page/a", "content": "short snippet"}]
    s = web_settings(settings, stub, fetch_pages=True, allow_private_hosts=True)
    hits, _, _ = run_tool(s, ["falcon battery"])
    (hit,) = hits[0]
    assert stub.paths("/page/") == ["/page/a"]
    assert "replacement pack within ten working days" in hit.text
    assert "Copyright" not in hit.text and "short snippet" not in hit.text


def test_redirects_are_checked_on_every_hop(
    settings: Settings, stub: WebStub, caplog: pytest.LogCaptureFixture
) -> None:
    # The stub listens on loopback, so private hosts are allowed for the first hop; the guard
    # is the real one, and each redirect target goes through it again: a scheme that is not
    # http(s) is refused, and so is a chain longer than MAX_REDIRECTS. (That check_url refuses
    # private addresses is shown above, on the real resolver.)
    caplog.set_level(logging.INFO, logger="deepsearcher.tools")
    to_file = "/redirect?to=file:///etc/passwd"
    stub.results = [
        {"title": "r", "url": stub.url + to_file, "content": "snippet redirect"},
        {"title": "l", "url": f"{stub.url}/loop/0", "content": "snippet loop"},
    ]
    s = web_settings(settings, stub, fetch_pages=True, allow_private_hosts=True)
    hits, _, _ = run_tool(s, ["q"])
    assert [h.text for h in hits[0]] == ["snippet redirect", "snippet loop"]
    assert stub.paths("/redirect") == [to_file]
    assert "scheme 'file' is not http(s)" in caplog.text
    assert stub.paths("/loop/") == ["/loop/0", "/loop/1", "/loop/2", "/loop/3"]
    assert "more than 3 redirects" in caplog.text


def test_fetch_stops_at_the_size_cap(settings: Settings, stub: WebStub) -> None:
    stub.pages["big"] = "<html><body><p>" + "word " * 50_000 + "</p></body></html>"
    s = web_settings(settings, stub, allow_private_hosts=True, max_page_bytes=4096)
    fetcher = PageFetcher(s.web_search)

    async def go() -> Any:
        import httpx

        async with httpx.AsyncClient() as client:
            return await fetcher.fetch(f"{stub.url}/page/big", client)

    page = asyncio.run(go())
    assert page.truncated and len(page.text) == 4096


# ---------------------------------------------------------------------------------------------
# End to end: a real deep query with web search on
# ---------------------------------------------------------------------------------------------


def _cite_every_passage(req: dict[str, Any]) -> str:
    """One sentence per passage, in the passage's own words, so every citation holds: the
    longest whole sentence of its first 30 words (a sentence cut mid-way would leave its start
    uncited, and a heading such as "Falcon drone battery policy." states nothing the lookup
    found, which the answer must state)."""
    bodies = re.findall(
        r"<document[^>]*>\n(.*?)\n</document>", req["messages"][-1]["content"], re.S
    )
    picked = []
    for body in bodies:
        whole = re.split(r"(?<=[.!?])\s", " ".join(body.split()[:30]))
        whole = [t for t in whole if t.endswith((".", "!", "?"))] or whole
        picked.append(max(whole, key=lambda t: len(t.split())))
    return " ".join(f"{t.rstrip('.')} [{n}]." for n, t in enumerate(picked, 1))


@pytest.fixture
def loaded(
    settings: Settings,
    stub: WebStub,
    llm_server: ScriptedLLMServer,
    make_searcher: Any,
    tmp_path: Path,
) -> Any:
    settings.llm.base_url = llm_server.base_url
    web_settings(settings, stub)
    doc = tmp_path / "docs" / "falcon.txt"
    doc.parent.mkdir()
    doc.write_text(
        "Falcon drone battery policy. The Falcon drone battery warranty period is twenty-four "
        f"months for business customers. Internal project codename {SECRET}.\n",
        encoding="utf-8",
    )
    ds = make_searcher(settings)
    ds.load([doc.parent])
    llm_server.add_rule(lambda r: task_of(r) == "answer", _cite_every_passage)
    return ds


@pytest.mark.slow
def test_deep_query_cites_web_results_and_keeps_documents_private(
    loaded: Any, stub: WebStub, llm_server: ScriptedLLMServer
) -> None:
    stub.results = [{"title": "Falcon warranty", "url": WEB_URL, "content": WEB_SNIPPET}]
    answer = loaded.query(QUESTION)

    web = [s for s in answer.sources if s.kind == "web"]
    assert [(s.source, s.title) for s in web] == [(WEB_URL, "Falcon warranty")]
    assert web[0].to_dict()["kind"] == "web"
    assert any(s.kind == "doc" for s in answer.sources)
    assert not answer.notes
    judged = [
        r
        for r in llm_server.requests
        if task_of(r) in ("judge", "judge-batch", "extract") and WEB_SNIPPET in json.dumps(r)
    ]
    assert judged and f"(web) {WEB_URL}" in json.dumps(judged[0])
    # The stub saw the search query ... and never the document's text.
    queries = [parse_qs(urlsplit(p).query)["q"][0] for p in stub.paths("/search")]
    assert QUESTION in queries
    received = stub.everything_received()
    assert SECRET not in received and "twenty-four" not in received


@pytest.mark.slow
def test_web_failure_still_answers_from_private_documents(
    loaded: Any, stub: WebStub, settings: Settings
) -> None:
    # Read when the provider is built (first query). 1.5 s: a 0.3 s budget expired before the
    # request reached the stub on a loaded machine; the slow stub (3 s) still times out.
    settings.web_search.timeout_s = 1.5
    question = "What is the Falcon drone battery warranty and who gets twenty-four months?"
    for mode in ("500", "slow", "junk"):
        stub.mode = mode
        stub.requests.clear()
        answer = loaded.query(question)
        assert len(stub.paths("/search")) >= 2, mode  # several sub-queries reached the stub
        assert answer.answer and answer.sources, mode
        assert all(s.kind == "doc" for s in answer.sources), mode
        unavailable = [n for n in answer.notes if n.startswith("web search unavailable")]
        assert len(unavailable) == 1, (mode, answer.notes)


@pytest.mark.slow
def test_web_false_overrides_config(loaded: Any, stub: WebStub) -> None:
    stub.results = [{"title": "Falcon warranty", "url": WEB_URL, "content": WEB_SNIPPET}]
    answer = loaded.query(QUESTION, web=False)
    assert stub.paths("/search") == []
    assert answer.sources and all(s.kind == "doc" for s in answer.sources)
