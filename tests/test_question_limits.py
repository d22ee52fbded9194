# ruff: noqa: F811 (the shared server fixtures are imported, then named as parameters)
"""One question-length cap and one deadline under every front end, and retrieval whose cost
does not follow the question's length: the MCP tools, the HTTP routes, the CLI and the library
all refuse an over-long question at once, and the text that reaches the embedder and BM25 is
bounded whatever the query."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from deepsearcher.cli import app
from deepsearcher.embedding import Embedder
from deepsearcher.errors import QuestionTooLongError
from deepsearcher.retrieval import MAX_QUERY_TERMS, MAX_QUERY_TOKENS, bm25_text
from tests.llm_server import ScriptedLLMServer
from tests.server_fixtures import (  # noqa: F401 (fixtures are used as parameters)
    QUESTION,
    Serve,
    root,
    searcher,
    serve,
)
from tests.test_mcp import _data, _error, _http

HUGE = "Which meal allowance applies on a trip abroad? " * 6000  # 282,000 characters


def test_a_huge_mcp_query_is_refused_at_once_while_another_client_is_served(
    serve: Serve, llm_server: ScriptedLLMServer
) -> None:
    # Before, one such `search` kept two worker threads at 100% CPU for many minutes and a
    # /v1/query from another client got no answer meanwhile.
    url = serve()

    async def huge_calls() -> tuple[list[str], float]:
        async with _http(url, None) as session:
            t0 = time.monotonic()
            refused = [
                _error(await session.call_tool("search", {"query": HUGE})),
                _error(await session.call_tool("deep_search", {"question": HUGE})),
            ]
            return refused, time.monotonic() - t0

    async def normal_search() -> dict[str, Any]:
        async with _http(url, None) as session:
            return _data(await session.call_tool("search", {"query": QUESTION}))

    with ThreadPoolExecutor(3) as pool:
        huge = pool.submit(anyio.run, huge_calls)
        other = pool.submit(httpx.post, f"{url}/v1/query", json={"question": QUESTION}, timeout=60)
        found = pool.submit(anyio.run, normal_search)
        refused, seconds = huge.result(timeout=120)
        assert other.result().status_code == 200
        assert found.result()["passages"]
    assert seconds < 10, f"refusing took {seconds:.1f}s"
    for text in refused:
        assert f"is {len(HUGE)} characters long; the limit is 8000" in text
        assert "server.max_question_chars" in text
    # Only the normal question reached the LLM (its lookup's call; a one-lookup question asks
    # no plan).
    assert llm_server.count("extract") == 1


def test_http_routes_refuse_with_the_same_error(serve: Serve) -> None:
    url = serve(max_question_chars=100)
    long = "why " * 100
    for path, body in [
        ("/v1/query", {"question": long}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": long}]}),
        ("/v1/research", {"request": long}),
    ]:
        resp = httpx.post(f"{url}{path}", json=body, timeout=30)
        assert resp.status_code == 400, (path, resp.text)
        assert resp.json()["error"]["code"] == "question_too_long"


def test_the_library_and_the_cli_apply_the_same_cap(
    make_searcher: Any, settings: Any, tmp_path: Any
) -> None:
    ds = make_searcher()
    long = "x" * (settings.server.max_question_chars + 1)
    with pytest.raises(QuestionTooLongError) as err:
        ds.query(long)
    assert "server.max_question_chars" in (err.value.hint or "")
    with pytest.raises(QuestionTooLongError):
        ds.research(long)
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "milvus.db")}
    limited = {**env, "DEEPSEARCHER_SERVER__MAX_QUESTION_CHARS": "30"}
    res = CliRunner().invoke(app, ["query", "y" * 40], env=limited)
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "the question is 40 characters long; the limit is 30" in res.output


class _Recording:
    """The real embedder, recording what it was asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.queries: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_query(self, texts: Any) -> np.ndarray:
        self.queries += list(texts)
        return self.inner.embed_query(texts)


def test_the_text_reaching_the_embedder_and_bm25_is_bounded(
    make_searcher: Any, embedder: Embedder, tmp_path: Any
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "travel.md").write_text("# Travel\n\nThe meal allowance abroad is 60 euros a day.\n")
    recording = _Recording(embedder)
    ds = make_searcher(embedder=recording)
    ds.load([docs], "travel")
    question = ("What is the meal allowance abroad for staff on a trip? " * 140)[:7900]
    hits = anyio.run(lambda: ds.retriever.search([question, "meal allowance"], ["travel"], 3))
    assert hits[0] and hits[1]
    cut, short = recording.queries
    assert short == "meal allowance"  # a short query is left alone
    assert question.startswith(cut) and len(cut) < len(question)
    assert MAX_QUERY_TOKENS - 8 <= embedder.count_tokens(cut) <= MAX_QUERY_TOKENS
    terms = bm25_text(question).split()
    assert len(terms) == len({t.lower() for t in terms}) <= MAX_QUERY_TERMS
    assert bm25_text("meal allowance") == "meal allowance"
