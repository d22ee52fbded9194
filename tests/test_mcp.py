# ruff: noqa: F811 (the shared server fixtures are imported, then named as parameters)
"""The MCP server driven by the official SDK's own client, the way an agent or IDE assistant
uses it: ``deepsearcher mcp`` spawned over stdio, and ``/mcp`` on a real uvicorn server over
streamable HTTP with and without the API key. Real Milvus Lite, the real embedder and the
scripted LLM."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests import mcp_wire
from tests.llm_server import ScriptedLLMServer
from tests.server_fixtures import (  # noqa: F401 (fixtures are used as parameters)
    QUESTION,
    Serve,
    _write,
    root,
    searcher,
    serve,
)

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"search", "deep_search", "list_collections", "load"}


def _data(result: Any) -> Any:
    """A tool result's JSON value (a list comes wrapped as {"result": [...]})."""
    assert not result.is_error, result.content
    data = result.structured_content
    return data["result"] if set(data) == {"result"} else data


def _error(result: Any) -> str:
    assert result.is_error
    return "\n".join(c.text for c in result.content)


async def _read_passage(session: ClientSession, uri: str) -> dict[str, Any]:
    resource = await session.read_resource(uri)
    return json.loads(resource.contents[0].text)  # type: ignore[union-attr]


@asynccontextmanager
async def _stdio(env: dict[str, str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "deepsearcher.cli", "mcp"], env=env, cwd=str(REPO)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def _http(url: str, key: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"} if key else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as client,
        streamable_http_client(f"{url}/mcp", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _server_env(db: str, llm_url: str, **extra: str) -> dict[str, str]:
    """What the spawned server sees: the test's database and LLM, offline, our code first."""
    keep = ("PATH", "HOME", "TMPDIR", "HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    return env | {
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "GRPC_VERBOSITY": "NONE",
        "DEEPSEARCHER_VECTOR_STORE__URI": db,
        "DEEPSEARCHER_LLM__BASE_URL": llm_url,
        **extra,
    }


def test_stdio_session_loads_searches_and_answers(
    root: Path, llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """One spawned `deepsearcher mcp` serves every tool; stdout carries only the protocol (any
    stray print would break the client's parsing). It loads the handbook itself: Milvus Lite
    keeps a database locked by the process that opened it until that process exits."""
    _write(tmp_path / "outside", {"secret.md": "The vault code is 1234.\n"})
    env = _server_env(
        str(tmp_path / "milvus.db"), llm_server.base_url, DEEPSEARCHER_SERVER__LOAD_ROOT=str(root)
    )

    async def session_calls() -> None:
        async with _stdio(env) as session:
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS

            loaded = _data(
                await session.call_tool(
                    "load",
                    {
                        "path": "handbook",
                        "collection": "handbook",
                        "description": "company handbook",
                    },
                )
            )
            assert loaded["files"]["new"] == 4 and loaded["chunks"]["total"] >= 4
            outside = _error(await session.call_tool("load", {"path": str(tmp_path / "outside")}))
            assert "outside server.load_root" in outside and "Traceback" not in outside

            collections = _data(await session.call_tool("list_collections", {}))
            assert [c["name"] for c in collections] == ["handbook"]
            assert collections[0]["description"] == "company handbook"
            assert collections[0]["chunks"] >= 4 and collections[0]["files"] == 4

            found = _data(await session.call_tool("search", {"query": QUESTION, "top_k": 3}))
            assert len(found["passages"]) == 3
            top = found["passages"][0]
            assert Path(top["source"]).name == "travel.md" and "45 euros" in top["text"]
            assert top["collection"] == "handbook" and top["label"] == top["source"]
            assert llm_server.requests == []  # search is retrieval only

            # The passage resource gives back the same chunk by its id.
            passage = await _read_passage(session, top["uri"])
            assert passage["id"] == top["id"] and passage["text"] == top["text"]
            assert passage["source"] == top["source"]

            steps: list[str] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                steps.append(message or "")

            answer = _data(
                await session.call_tool(
                    "deep_search", {"question": QUESTION}, progress_callback=on_progress
                )
            )
            assert "45 euros" in answer["answer"] and "[1]" in answer["answer"]
            assert Path(answer["sources"][0]["source"]).name == "travel.md"
            assert answer["usage"]["llm_calls"] == len(llm_server.requests) > 0
            assert answer["evidence"] in ("verified", "attributed") and "retrieved" not in answer
            # The hop chain reaches an MCP client twice: as progress, and in the answer.
            assert steps[0].startswith("plan: 1. ") and steps[1].startswith("sub-queries: ")
            assert any(m.startswith("lookup 1: ") for m in steps) and steps[-1] == "done"
            assert [h["status"] for h in answer["hops"]] == ["answered"]
            assert any(m.startswith("searched ") for m in steps)
            assert any(m.startswith("kept ") and "travel.md" in m for m in steps)

            missing = _error(
                await session.call_tool("search", {"query": "x", "collections": ["nope"]})
            )
            assert "collection 'nope' does not exist" in missing

    anyio.run(session_calls)


def test_http_mcp_behind_api_keys_loads_under_root_only(
    serve: Serve, root: Path, tmp_path: Path
) -> None:
    _write(root / "team", {"faq.md": "The coffee machine is on the third floor.\n"})
    _write(tmp_path / "outside", {"secret.md": "The vault code is 1234.\n"})
    url = serve(api_keys=["k1"], load_root=str(root))

    # The app's API key middleware covers /mcp: no key, no session.
    refused = mcp_wire.open_session(url)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_api_key"
    assert mcp_wire.open_session(url, "no").status_code == 401

    async def session_calls() -> None:
        async with _http(url, "k1") as session:
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS

            report = _data(await session.call_tool("load", {"path": "team", "collection": "team"}))
            assert report["collection"] == "team" and report["files"]["new"] == 1

            outside = _error(await session.call_tool("load", {"path": str(tmp_path / "outside")}))
            assert "outside server.load_root" in outside
            assert str(tmp_path) not in outside  # no server paths to a remote client
            escape = _error(await session.call_tool("load", {"path": "../outside"}))
            assert "outside server.load_root" in escape

            names = [c["name"] for c in _data(await session.call_tool("list_collections", {}))]
            assert names == ["handbook", "team"]

            found = _data(
                await session.call_tool(
                    "search", {"query": "where is the coffee machine", "collections": ["team"]}
                )
            )
            top = found["passages"][0]
            # Shown relative to load_root, as the REST routes do: never the absolute path.
            assert top["source"] == "team/faq.md" and "third floor" in top["text"]
            passage = await _read_passage(session, top["uri"])
            assert passage["text"] == top["text"] and passage["source"] == "team/faq.md"
            with pytest.raises(MCPError, match="no passage"):
                await session.read_resource(f"passage://team/{'0' * 40}")

            steps: list[str] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                steps.append(message or "")

            answer = _data(
                await session.call_tool(
                    "deep_search",
                    {"question": QUESTION, "collections": ["handbook"]},
                    progress_callback=on_progress,
                )
            )
            assert "45 euros" in answer["answer"]
            assert answer["sources"][0]["source"] == "handbook/travel.md"
            assert "kept handbook/travel.md" in steps
            assert str(root) not in json.dumps(answer) + "".join(steps)

    anyio.run(session_calls)


def test_http_mcp_without_keys_keeps_the_host_guard(serve: Serve) -> None:
    """Without keys the browser guard stands in front of /mcp too: a page on a rebinding name
    cannot reach the tools. Without server.load_root the load tool refuses, saying why."""
    url = serve()
    resp = httpx.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Host": "evil.example", "Accept": "application/json, text/event-stream"},
    )
    assert resp.status_code == 403 and resp.json()["error"]["code"] == "host_not_allowed"

    async def calls() -> tuple[set[str], str]:
        async with _http(url, None) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            return tools, _error(await session.call_tool("load", {"path": "handbook"}))

    tools, refused = anyio.run(calls)
    assert tools == TOOLS
    assert "server.load_root is not set" in refused and "\nhint: set server.load_root" in refused
    assert "Traceback" not in refused


def test_http_tools_refuse_option_values_as_the_settings_do(
    serve: Serve, llm_server: ScriptedLLMServer
) -> None:
    """The tools' top_k and max_iter have the query.* settings' ranges, shown in the tools'
    schema and refused as one line naming the option with a hint, before any search or LLM
    call."""
    url = serve()

    async def calls() -> list[Any]:
        async with _http(url, None) as session:
            tools = {t.name: t.input_schema for t in (await session.list_tools()).tools}
            return [
                tools["search"]["properties"]["top_k"]["anyOf"][0],
                tools["deep_search"]["properties"]["max_iter"]["anyOf"][0],
                _error(await session.call_tool("search", {"query": QUESTION, "top_k": 0})),
                _error(await session.call_tool("search", {"query": QUESTION, "top_k": 101})),
                _error(
                    await session.call_tool("deep_search", {"question": QUESTION, "max_iter": 11})
                ),
            ]

    top_k, max_iter, low, high, iterations = anyio.run(calls)
    assert top_k == {"type": "integer", "minimum": 1, "maximum": 100}
    assert max_iter == {"type": "integer", "minimum": 1, "maximum": 10}
    assert "invalid option top_k=0: input should be greater than or equal to 1" in low
    assert "invalid option top_k=101: input should be less than or equal to 100" in high
    assert "invalid option max_iter=11: input should be less than or equal to 10" in iterations
    for refused in (low, high, iterations):
        message, hint = refused.split("\nhint: ")
        assert "\n" not in message and hint.startswith("leave ")
    assert llm_server.requests == []


def test_http_deep_search_shares_the_server_search_slots(
    serve: Serve, llm_server: ScriptedLLMServer
) -> None:
    """MCP deep searches count against server.max_concurrent_searches like chat requests: with
    the one slot taken and no queue, the tool says the server is busy instead of piling on."""
    url = serve(max_concurrent_searches=1, max_queued_searches=0)
    llm_server.add_rule("TASK: extract", '{"answer": "", "document": 0}', latency=4.0)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            httpx.post, f"{url}/v1/query", json={"question": QUESTION}, timeout=60
        )
        # The REST search holds the slot once its first LLM call has arrived.
        deadline = time.monotonic() + 30
        while llm_server.count("extract") == 0:
            assert time.monotonic() < deadline and not running.done()
            time.sleep(0.05)

        async def busy() -> str:
            async with _http(url, None) as session:
                return _error(await session.call_tool("deep_search", {"question": QUESTION}))

        refused = anyio.run(busy)
        assert running.result().status_code == 200
    assert "server busy: 1 searches running and 0 waiting" in refused and "hint: " in refused


def test_http_deep_search_keeps_the_server_time_budget(
    serve: Serve, llm_server: ScriptedLLMServer
) -> None:
    """A deep search over /mcp ends within the server's request timeout like the chat routes:
    a slow step gives an answer marked cut short, naming the limit that applied."""
    url = serve(request_timeout_s=0.5)
    llm_server.add_rule("TASK: extract", '{"answer": "", "document": 0}', latency=3.0)

    async def answer() -> dict[str, Any]:
        async with _http(url, None) as session:
            return _data(await session.call_tool("deep_search", {"question": QUESTION}))

    assert "server.request_timeout_s=0.5s" in anyio.run(answer)["cut_short"]
