"""The chat page at ``/`` in a real browser: Debian's chromium, driven headless by Playwright for
Python, against uvicorn on 127.0.0.1 with a Milvus Lite collection of two small PDFs and the
scripted LLM. Ask -> the answer streams in with its search trace -> a citation opens the passage
with its source and page; with API keys the page asks for the key and works once it is given."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from deepsearcher.config import Settings
from deepsearcher.searcher import DeepSearcher
from deepsearcher.server import create_app
from tests.fixture_files import make_pdf
from tests.llm_server import ScriptedLLMServer
from tests.server_fixtures import _uvicorn

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="Debian's chromium is not installed (apt-get install chromium; .ci/run does)",
    ),
]
QUESTION = "What is the daily meal allowance for business travel?"
# Where the run's screenshot goes; docs/chat-page.png in the README comes from such a run.
SCREENSHOT_DIR_ENV = "CHAT_PAGE_SCREENSHOT_DIR"
Serve = Callable[..., str]
# Documents are untrusted: markup in a passage must be shown as text, never become elements.
MARKUP = '<img src="/x" class="planted" onerror="document.title=1">'


@pytest.fixture
def docs_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "policies").mkdir(parents=True)
    make_pdf(
        root / "policies" / "travel-policy.pdf",
        [
            "# Allowances\n\nThe daily meal allowance for business travel is 45 euros.\n"
            "Hotel costs are reimbursed up to 140 euros per night.\n"
            f"Claims go through the portal {MARKUP}",
            "# Approvals\n\nTravel requests are approved by the department head before "
            "booking.\nTrains are preferred over flights for trips under four hours.",
        ],
    )
    make_pdf(
        root / "policies" / "offices.pdf",
        ["# Offices\n\nThe Lisbon office is managed by Ana Ferreira. It opens at 8 am."],
    )
    return root


@pytest.fixture
def serve(
    settings: Settings,
    make_searcher: Callable[..., DeepSearcher],
    llm_server: ScriptedLLMServer,
    docs_root: Path,
    tmp_path: Path,
) -> Iterator[Serve]:
    """serve(api_keys=None, **server_settings) -> the URL of a started server."""
    settings.llm.base_url = llm_server.base_url
    searcher = make_searcher(settings)
    searcher.load([docs_root / "policies"], "policies", description="company policies")
    with ExitStack() as stack:

        def start(api_keys: list[str] | None = None, **server: Any) -> str:
            s = settings.model_copy(update={"server": settings.server.model_copy(update=server)})
            app = create_app(searcher, s, api_keys=api_keys, upload_dir=tmp_path / "uploads")
            return stack.enter_context(_uvicorn(app))

        yield start


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def _screenshot_path(tmp_path: Path) -> Path:
    folder = Path(os.environ.get(SCREENSHOT_DIR_ENV) or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "chat-page.png"


# Records every text the answer shows while it streams (the page's own script cannot be
# changed by the test; an observer only watches).
_WATCH_ANSWER = """() => {
  window.__answerTexts = [];
  new MutationObserver(() => {
    const a = document.querySelector('.msg.assistant .answer');
    if (a) window.__answerTexts.push(a.textContent);
  }).observe(document.getElementById('conversation'),
             {childList: true, subtree: true, characterData: true});
}"""


def test_ask_stream_trace_and_open_a_citation(
    serve: Serve, browser: Any, docs_root: Path, tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    # The answer's stream pauses after its first words, so the page must show a partial answer
    # however fast the machine delivers the rest (a loaded CI box can batch all deltas at once).
    llm_server.stream_stall_after = 3
    llm_server.stream_stall_s = 1.0
    url = serve(load_root=str(docs_root))
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(url + "/")
    # Collections come from /v1/models; uploads are offered.
    page.wait_for_selector("#collection option[value=policies]", state="attached")
    page.select_option("#collection", "policies")
    assert page.is_visible("#upload")
    assert not page.is_visible("#key-form")  # no keys on this server: no key to ask for

    page.evaluate(_WATCH_ANSWER)
    page.fill("#question", QUESTION)
    page.click("#send")
    page.wait_for_selector("#sources li button")

    answer = page.inner_text(".msg.assistant .answer")
    assert "45 euros" in answer and "Sources:" not in answer
    shown = [t for t in page.evaluate("window.__answerTexts") if t]
    # Streamed: the answer grew through partial texts before it was complete.
    partial = [t for t in shown if t.strip() and len(t) < len(answer.strip())]
    assert partial, shown
    # The live trace: the sub-queries, the searches and what was kept.
    trace = page.inner_text("#trace")
    assert page.locator("#trace li[data-type=sub_queries]").count() >= 1
    assert "sub-queries" in trace and "searched" in trace
    assert "kept policies/travel-policy.pdf" in trace

    # A citation in the answer opens the cited passage, with its file and page.
    assert not page.is_visible("#passage")
    page.click(".msg.assistant .cite >> nth=0")
    assert page.is_visible("#passage")
    assert page.inner_text("#passage-n") == "[1]"
    # Shown relative to load_root, never as the server's absolute path.
    assert page.inner_text("#passage-source") == "policies/travel-policy.pdf"
    assert re.fullmatch(r"p\. [12](–2)?", page.inner_text("#passage-page"))
    passage = page.inner_text("#passage-text")
    assert "meal allowance for business travel is 45 euros" in passage
    assert MARKUP in passage and page.locator("img.planted").count() == 0
    assert str(docs_root) not in page.content()  # no server path reaches the browser

    page.screenshot(path=str(_screenshot_path(tmp_path)), full_page=True)

    # A follow-up goes out with the chat history and gets its own answer.
    page.fill("#question", "And who approves the travel requests?")
    page.click("#send")
    page.locator(".msg.assistant .details").nth(1).wait_for()
    assert page.locator(".msg.user").count() == 2
    assert "standalone question" in page.inner_text("#trace")

    # Uploading a file loads it into a new collection, which the picker then offers.
    page.set_input_files(
        "#upload-files",
        files=[
            {
                "name": "parking.txt",
                "mimeType": "text/plain",
                "buffer": b"Visitors park in bay 7 of the Lisbon office garage.\n",
            }
        ],
    )
    page.fill("#upload-collection", "notes")
    page.click("#upload button")
    page.locator("#upload-status", has_text="loaded into notes").wait_for()
    page.wait_for_selector("#collection option[value=notes]", state="attached")
    assert (tmp_path / "uploads" / "notes" / "parking.txt").is_file()
    assert not errors, errors


def test_page_needs_the_key_and_works_with_it(serve: Serve, browser: Any) -> None:
    url = serve(api_keys=["team-key"])
    # The page is served without a key (it holds no data), with a self-only CSP.
    resp = httpx.get(url + "/")
    assert resp.status_code == 200
    assert "default-src 'none'" in resp.headers["content-security-policy"]
    assert httpx.get(url + "/v1/models").status_code == 401

    page = browser.new_page()
    page.goto(url + "/")
    page.wait_for_selector("#error:not([hidden])")
    assert "this server needs an API key" in page.inner_text("#error")
    assert page.is_visible("#key-form")
    assert page.is_visible("#upload")  # uploads need no load_root: /v1/load takes files
    page.fill("#question", QUESTION)
    page.click("#send")
    page.wait_for_selector("#send:enabled")
    assert "this server needs an API key" in page.inner_text("#error")
    assert page.locator(".msg.assistant").count() == 0

    page.fill("#api-key", "wrong-key")
    page.click("#key-form button")
    page.locator("#error", has_text="was refused").wait_for()

    page.fill("#api-key", "team-key")
    page.click("#key-form button")
    page.wait_for_selector("#collection option[value=policies]", state="attached")
    assert not page.is_visible("#error")
    page.fill("#question", QUESTION)
    page.click("#send")
    page.wait_for_selector("#sources li button")
    assert "45 euros" in page.inner_text(".msg.assistant .answer")
    # Kept for the tab's session only.
    assert page.evaluate("sessionStorage.getItem('deepsearcher.apiKey')") == "team-key"
    assert page.evaluate("localStorage.length") == 0
