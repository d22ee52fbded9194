# ruff: noqa: F811 (the shared server fixtures are imported, then named as parameters)
"""Malformed input is a 400 in the OpenAI error shape, never a 500 or a search on garbage;
rejected uploads leave nothing on disk; a client that hangs up stops its search."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests import mcp_wire
from tests.llm_server import ScriptedLLMServer
from tests.server_fixtures import (  # noqa: F401 (fixtures are used as parameters)
    QUESTION,
    Serve,
    root,
    searcher,
    serve,
)

JSON = {"Content-Type": "application/json"}


def _bad_request(resp: httpx.Response) -> dict[str, str]:
    assert resp.status_code == 400, resp.text
    body = resp.json()["error"]
    assert body["type"] == "invalid_request_error" and body["message"]
    return body


def test_option_ranges_are_the_settings_on_every_route(
    serve: Serve, llm_server: ScriptedLLMServer
) -> None:
    """The routes refuse a value out of the setting's range (or an unknown agent) with one
    line naming the field and a hint, before any search: the research model's chat and
    /v1/research too, whose ranges are research.*'s."""
    url = serve()
    cases = [
        ("/v1/query", {"question": QUESTION, "top_k": 0}, "top_k", "query.top_k"),
        ("/v1/query", {"question": QUESTION, "agent": "deeper"}, "agent", "deep, naive"),
        (
            "/v1/chat/completions",
            {"model": "deepsearcher-research", "max_iter": 11, "messages": [
                {"role": "user", "content": QUESTION}
            ]},
            "max_iter",
            "less than or equal to 10",
        ),
        ("/v1/research", {"request": QUESTION, "max_sections": 13}, "max_sections", "12"),
        ("/v1/research", {"request": QUESTION, "max_llm_calls": 4}, "max_llm_calls", "5"),
    ]  # fmt: skip
    with httpx.Client(base_url=url, timeout=30) as http:
        for path, body, field, said in cases:
            error = _bad_request(http.post(path, json=body))
            message = error["message"]
            assert message.startswith(f"invalid request: {field}: "), message
            assert said in message + error["hint"] and "\n" not in message
            assert error["hint"].startswith(f"leave {field} unset")
    assert llm_server.requests == []


def test_malformed_bodies_are_400s(serve: Serve, root: Path, llm_server: ScriptedLLMServer) -> None:
    url = serve(load_root=str(root), max_question_chars=200)
    with httpx.Client(base_url=url, timeout=30) as http:
        # A path no file system accepts (ENAMETOOLONG); the message does not echo it whole.
        body = _bad_request(http.post("/v1/load", json={"paths": ["a" * 5000]}))
        assert len(body["message"]) < 400 and str(root) not in body["message"]
        _bad_request(http.post("/v1/load", json={"paths": ["handbook/" + "b" * 300 + ".md"]}))

        # JSON nested deeper than the parser's recursion limit; the connection stays usable.
        deep = b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        assert (
            "nested" in _bad_request(http.post("/v1/query", content=deep, headers=JSON))["message"]
        )
        assert http.get("/v1/models").status_code == 200

        # A lone surrogate escape cannot be sent on to the LLM.
        lone = b'{"messages": [{"role": "user", "content": "What is \\ud800 the allowance?"}]}'
        body = _bad_request(http.post("/v1/chat/completions", content=lone, headers=JSON))
        assert body["code"] == "invalid_unicode"
        # A content part without text is not the question "None".
        parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]}
        assert "text" in _bad_request(http.post("/v1/chat/completions", json=parts))["message"]
        # Questions are capped.
        body = _bad_request(http.post("/v1/query", json={"question": "why " * 100}))
        assert body["code"] == "question_too_long" and "server.max_question_chars" in body["hint"]
        long_chat = {"messages": [{"role": "user", "content": "why " * 100}]}
        _bad_request(http.post("/v1/chat/completions", json=long_chat))
    assert llm_server.requests == []  # none of them reached the LLM


def test_rejected_uploads_leave_nothing_on_disk(serve: Serve, tmp_path: Path) -> None:
    uploads = tmp_path / "uploads"
    url = serve()
    good = ("files", ("notes.md", b"# Notes\n\nThe retro is on Fridays.\n", "text/markdown"))
    assert (
        httpx.post(
            f"{url}/v1/load", files=[good], data={"collection": "team"}, timeout=60
        ).status_code
        == 200
    )

    # An unsupported type refuses the whole upload before anything is written.
    resp = httpx.post(
        f"{url}/v1/load",
        files=[("files", ("tool.exe", b"MZ\x90\x00binary", "application/octet-stream"))],
        data={"collection": "team"},
    )
    assert resp.status_code == 415 and resp.json()["error"]["code"] == "unsupported_file_type"

    # A file the load rejects is removed again; the earlier upload of the same name comes back.
    broken = ("files", ("notes.md", b"\x00\x01\x02\xff" * 64, "text/markdown"))
    other = ("files", ("broken.pdf", b"%PDF-1.4 this is not a pdf", "application/pdf"))
    resp = httpx.post(
        f"{url}/v1/load", files=[broken, other], data={"collection": "team"}, timeout=60
    )
    assert resp.status_code == 200, resp.text
    report = resp.json()
    assert sorted(f["path"] for f in report["failures"]) == ["team/broken.pdf", "team/notes.md"]
    assert sorted(p.name for p in (uploads / "team").iterdir()) == ["notes.md"]
    assert (uploads / "team" / "notes.md").read_bytes().startswith(b"# Notes")
    assert not any((uploads / ".staging").iterdir())

    # A load that fails as a whole (bad collection name) keeps nothing either.
    resp = httpx.post(
        f"{url}/v1/load",
        files=[("files", ("x.md", b"x", "text/markdown"))],
        data={"collection": "no way!"},
    )
    assert resp.status_code == 400
    assert sorted(p.name for p in uploads.iterdir()) == [".staging", "team"]


def _mcp_session(url: str) -> dict[str, str]:
    """An initialized MCP session's headers, opened over plain HTTP."""
    resp = mcp_wire.open_session(url)
    assert resp.status_code == 200, resp.text
    headers = mcp_wire.session_headers(resp.headers["mcp-session-id"])
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(f"{url}/mcp", json=done, headers=headers).status_code == 202
    return headers


def _raw_post(url: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.mark.parametrize("transport", ["chat", "chat-stream", "mcp"])
def test_a_client_whose_socket_closes_stops_its_work_and_frees_its_slot(
    serve: Serve, llm_server: ScriptedLLMServer, transport: str
) -> None:
    """A client that goes away without cancelling (its socket simply closes) stops its
    search within seconds on every transport: no LLM call starts after it left, and its
    search slot is free again (with one slot and no queue, a held slot is a 429)."""
    llm_server.latency = 1.0  # every LLM call takes a second: a deep search takes many
    url = serve(max_concurrent_searches=1, max_queued_searches=0)
    if transport == "mcp":
        arguments = {"name": "deep_search", "arguments": {"question": QUESTION}}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": arguments}
        request = _raw_post(url, "/mcp", json.dumps(call).encode(), _mcp_session(url))
    else:
        message = {"role": "user", "content": QUESTION}
        chat = {"stream": transport == "chat-stream", "messages": [message]}
        request = _raw_post(url, "/v1/chat/completions", json.dumps(chat).encode(), {})
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(request)
        deadline = time.monotonic() + 30
        while not llm_server.requests:  # the search has started
            assert time.monotonic() < deadline, "the search never called the LLM"
            time.sleep(0.05)
    # The socket is closed. Calls already sent finish; no new one may start.
    time.sleep(1.5)
    after_hangup = len(llm_server.requests)
    time.sleep(4)
    assert len(llm_server.requests) == after_hangup, [
        r["messages"][-1]["content"][:30] for r in llm_server.requests
    ]
    llm_server.latency = 0.0
    body = {"question": QUESTION, "agent": "naive"}
    resp = httpx.post(f"{url}/v1/query", json=body, timeout=60)
    assert resp.status_code == 200 and "45 euros" in resp.json()["answer"], resp.text


def test_a_long_upload_name_is_cut_inside_its_stem(serve: Serve, tmp_path: Path) -> None:
    url = serve()
    long_latin = "quarterly-report-" * 15 + ".md"  # 257 characters
    long_cjk = "季度报告" * 30 + ".txt"  # 124 characters, 364 UTF-8 bytes
    files = [
        ("files", (long_latin, b"# Q3\n\nRevenue was 12 million euros.\n", "text/markdown")),
        ("files", (long_cjk, "第三季度收入为一千二百万欧元。\n".encode(), "text/plain")),
    ]
    resp = httpx.post(f"{url}/v1/load", files=files, data={"collection": "team"}, timeout=60)
    assert resp.status_code == 200, resp.text  # was 415: the cut name had lost ".md"
    assert resp.json()["files"]["new"] == 2
    saved = sorted(p.name for p in (tmp_path / "uploads" / "team").iterdir())
    assert [Path(n).suffix for n in saved] == [".md", ".txt"]
    assert all(len(n) <= 200 and len(n.encode()) <= 200 for n in saved)
    assert saved[0].startswith("quarterly-report-") and saved[1].startswith("季度报告")


def test_an_upload_onto_a_full_disk_is_refused_with_a_free_space_hint(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os
    import shutil

    url = serve()
    real_copy = shutil.copyfileobj

    def disk_full(src: Any, dst: Any, length: int = 0) -> None:
        real_copy(src, dst, length)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as write() says on a full disk

    monkeypatch.setattr(shutil, "copyfileobj", disk_full)
    files = [("files", ("notes.md", b"# Notes\n\nThe retro is on Fridays.\n", "text/markdown"))]
    resp = httpx.post(f"{url}/v1/load", files=files, data={"collection": "team"}, timeout=60)
    assert resp.status_code == 507, resp.text
    error = resp.json()["error"]
    assert error["code"] == "insufficient_storage" and "free space" in error["hint"]
    staging = tmp_path / "uploads" / ".staging"
    assert not staging.exists() or not any(staging.iterdir())  # nothing half-written is left
