# ruff: noqa: F811 (the shared server fixtures are imported, then named as parameters)
"""MCP sessions on a real uvicorn server are bounded per API key (per client address without
keys) and in all, end after server.mcp_session_idle_s, and every refusal of the /mcp transport
comes in the server's one error shape. Plain HTTP, as a probe would send it."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx

from tests.mcp_wire import open_session, session_headers
from tests.server_fixtures import (  # noqa: F401 (fixtures are used as parameters)
    Serve,
    root,
    searcher,
    serve,
)
from tests.test_mcp import _data, _http


def _session(url: str, key: str | None = None) -> str:
    resp = open_session(url, key)
    assert resp.status_code == 200, resp.text
    return resp.headers["mcp-session-id"]


def _error(resp: httpx.Response, status: int) -> dict[str, Any]:
    """The server's one error shape: {"error": {message, type, code, hint}} as JSON."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"] == "application/json"
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "code", "hint"}, error
    assert "\n" not in error["message"] and error["hint"]
    return error


def test_one_key_cannot_take_every_mcp_session(serve: Serve) -> None:
    """A key at its cap gets 429 with a Retry-After; other keys, and a full key's colleague,
    still open sessions; ending one makes room again."""
    url = serve(api_keys=["k1", "k2"], mcp_sessions_per_client=3, mcp_session_idle_s=60)
    mine = [_session(url, "k1") for _ in range(3)]
    refused = open_session(url, "k1")
    error = _error(refused, 429)
    assert error["code"] == "mcp_sessions_exceeded" and error["type"] == "rate_limit_error"
    assert "holds 3 (server.mcp_sessions_per_client=3)" in error["message"]
    assert "k1" not in refused.text  # the key is never echoed
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert _session(url, "k2")  # the other key is not locked out

    ended = httpx.delete(
        f"{url}/mcp",
        headers={"Authorization": "Bearer k1", "Mcp-Session-Id": mine[0]},
    )
    assert ended.status_code == 200, ended.text
    assert _session(url, "k1")  # room again

    # A session answers only the key that opened it, as if it did not exist.
    other = httpx.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers=session_headers(mine[1]) | {"Authorization": "Bearer k2"},
    )
    assert _error(other, 404)["code"] == "mcp_session_not_found"


def test_idle_sessions_end_and_make_room(serve: Serve) -> None:
    """Without keys the bound is per client address. An idle session ends after
    server.mcp_session_idle_s; its id is then a 404 saying to initialize again."""
    url = serve(mcp_sessions_per_client=1, mcp_session_idle_s=1.0)
    first = _session(url)
    refused = open_session(url)
    _error(refused, 429)
    assert int(refused.headers["retry-after"]) == 1
    time.sleep(1.5)
    assert _session(url)
    gone = httpx.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers=session_headers(first),
    )
    error = _error(gone, 404)
    assert "initialize a new one" in error["hint"]


def test_the_server_wide_bound_is_a_503_with_retry_after(serve: Serve) -> None:
    url = serve(mcp_sessions_per_client=10, mcp_max_sessions=2, mcp_session_idle_s=30)
    _session(url)
    _session(url)
    full = open_session(url)
    assert _error(full, 503)["code"] == "mcp_sessions_full"
    assert 1 <= int(full.headers["retry-after"]) <= 30


def test_an_sdk_client_works_within_the_bounds(serve: Serve) -> None:
    url = serve(api_keys=["k1"], mcp_sessions_per_client=1)

    async def twice() -> list[Any]:
        found = []
        for _ in range(2):  # the client ends its session on leaving: the next one fits
            async with _http(url, "k1") as session:
                found.append(_data(await session.call_tool("list_collections", {})))
        return found

    first, second = anyio.run(twice)
    assert [c["name"] for c in first] == [c["name"] for c in second] == ["handbook"]


def test_every_refusal_of_the_mcp_transport_has_the_one_error_shape(serve: Serve) -> None:
    url = serve()
    session = _session(url)
    headers = session_headers(session)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}

    big = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"x": "a" * 5_000_000}}
    too_large = _error(httpx.post(f"{url}/mcp", json=big, headers=headers), 413)
    assert too_large["code"] == "request_too_large"
    assert too_large["message"] == "request body is larger than 4 MiB (the MCP limit)"

    unknown = headers | {"Mcp-Session-Id": "0" * 32}
    assert _error(httpx.post(f"{url}/mcp", json=call, headers=unknown), 404)["code"] == (
        "mcp_session_not_found"
    )
    plain = {k: v for k, v in headers.items() if k != "Accept"} | {"Accept": "text/plain"}
    assert _error(httpx.post(f"{url}/mcp", json=call, headers=plain), 406)["code"] == (
        "not_acceptable"
    )
    not_json = httpx.post(
        f"{url}/mcp", content=b"{not json", headers=headers | {"Content-Type": "application/json"}
    )
    assert _error(not_json, 400)["code"] == "invalid_mcp_request"
    missing = {k: v for k, v in headers.items() if k != "Mcp-Session-Id"}
    assert _error(httpx.get(f"{url}/mcp", headers=missing), 400)
    put = httpx.put(f"{url}/mcp", json=call, headers=headers)
    assert _error(put, 405)["code"] == "method_not_allowed"
