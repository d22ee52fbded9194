# ruff: noqa: F811 (the shared server fixtures are imported, then named as parameters)
"""HTTP clients see source paths relative to a root they know of, never the server's absolute
paths or its internal LLM address; the server log keeps the originals."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest

from deepsearcher.config import Settings
from tests.llm_server import ScriptedLLMServer
from tests.server_fixtures import (  # noqa: F401 (fixtures are used as parameters)
    QUESTION,
    Serve,
    _client,
    root,
    searcher,
    serve,
)


def test_sources_are_relative_to_load_root(serve: Serve, root: Path, tmp_path: Path) -> None:
    url = serve(load_root=str(root))
    report = httpx.post(
        f"{url}/v1/load", json={"paths": ["handbook"], "collection": "loaded"}, timeout=60
    )
    assert report.status_code == 200, report.text
    out = httpx.post(
        f"{url}/v1/query", json={"question": QUESTION, "collections": ["loaded"]}, timeout=60
    ).json()
    assert out["sources"][0]["source"] == "handbook/travel.md"

    # The whole stream (progress events with verdict sources, final frame) holds no server path.
    with httpx.stream(
        "POST",
        f"{url}/v1/chat/completions",
        json={
            "model": "loaded",
            "messages": [{"role": "user", "content": QUESTION}],
            "stream": True,
        },
        timeout=60,
    ) as resp:
        stream = resp.read().decode()
    assert '"source": "handbook/travel.md"' in stream
    assert str(tmp_path) not in stream

    # Refusals name no server folder either.
    resp = httpx.post(f"{url}/v1/load", json={"paths": ["../elsewhere"]})
    assert resp.status_code == 403
    assert str(root) not in resp.text and "server.load_root" in resp.json()["error"]["hint"]


def test_llm_address_stays_in_the_server_log(
    serve: Serve,
    settings: Settings,
    llm_server: ScriptedLLMServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.llm.max_retries = 0
    url = serve()
    llm_server.add_fault("500", times=None, match="TASK: answer")
    address = llm_server.base_url.split("://", 1)[1].rstrip("/")
    with caplog.at_level(logging.INFO, logger="deepsearcher.server.public"):
        resp = _client(url).chat.completions.create(
            model="deepsearcher", messages=[{"role": "user", "content": QUESTION}]
        )
        notes = resp.model_extra["deepsearcher"]["notes"]
        assert any(n.startswith("answer step failed: LLM at the LLM server") for n in notes), notes
        assert address not in json.dumps(resp.model_dump())
        streamed = "".join(
            json.dumps(c.model_dump())
            for c in _client(url).chat.completions.create(
                model="deepsearcher",
                messages=[{"role": "user", "content": QUESTION}],
                stream=True,
            )
        )
        assert "answer step failed" in streamed and address not in streamed
    assert address in caplog.text  # the operator still sees where the LLM failed
