"""Per-key access on a real server: a keys file gives one key the support collection only,
another (by SHA-256) everything; a legacy ``DEEPSEARCHER_API_KEYS`` key keeps full access. Each
route and MCP tool is driven with the restricted key: it sees only its collection, gets 403 when
naming the other, and a question answered only by the other collection brings back nothing from
it (sources, streamed trace events, MCP results). Real Milvus Lite, embedder and scripted LLM;
one server for the module."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from deepsearcher.config import Settings, load_settings
from deepsearcher.embedding import Embedder
from deepsearcher.errors import ConfigError
from deepsearcher.searcher import DeepSearcher
from deepsearcher.server import create_app
from deepsearcher.server.access import load_keys_file
from deepsearcher.server.app import run_server, server_keys
from tests.llm_server import ScriptedLLMServer
from tests.server_fixtures import _uvicorn, _write
from tests.test_mcp import _data, _error, _http

HR_QUESTION = "What is the daily meal allowance for business travel?"
HR = {
    "travel.md": "# Travel\n\nThe daily meal allowance for business travel is 45 euros.\n",
    "leave.txt": "Parental leave lasts 20 weeks. Salaries are paid on the 25th.\n",
}
SUPPORT = {
    "passwords.md": "# Passwords\n\nPassword resets are handled by the support desk at "
    "extension 4242.\n",
    "vpn.txt": "The VPN client must be updated every month.\n",
}
SUPPORT_KEY, ADMIN_KEY, READER_KEY, LEGACY_KEY = "sup-key-1", "adm-key-2", "rd-key-3", "old-key"
MODELS = ["deepsearcher", "deepsearcher-research"]  # on every server, before the collections
FINANCE_KEY = "fin-key-4"  # may read only a collection that does not exist
KEYS_YAML = f"""
keys:
  - name: support-bot
    key_env: SUPPORT_BOT_KEY
    read: [support]
    load: [support]
  - name: admin
    key_sha256: {hashlib.sha256(ADMIN_KEY.encode()).hexdigest()}
    read: "*"
    load: "*"
  - name: reader
    key_env: READER_KEY
    read: ["supp*"]
  - name: finance-bot
    key_env: FINANCE_KEY
    read: [finance]
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("access")
    root = tmp / "root"
    _write(root / "hr", HR)
    _write(root / "support", SUPPORT)
    _write(root / "incoming", {"printers.md": "Printers are on the second floor.\n"})
    (tmp / "keys.yaml").write_text(KEYS_YAML, encoding="utf-8")
    with ScriptedLLMServer() as llm:
        settings = load_settings(
            overrides={
                "vector_store": {"uri": str(tmp / "milvus.db")},
                "llm": {"base_url": llm.base_url},
                "server": {"load_root": str(root), "keys_file": str(tmp / "keys.yaml")},
            },
            environ={},
        )
        searcher = DeepSearcher(settings, embedder=embedder)
        try:
            searcher.load([root / "hr"], "hr", description="HR policies: pay, travel, leave")
            searcher.load([root / "support"], "support", description="IT support desk")
            env = {
                "SUPPORT_BOT_KEY": SUPPORT_KEY,
                "READER_KEY": READER_KEY,
                "FINANCE_KEY": FINANCE_KEY,
                "DEEPSEARCHER_API_KEYS": LEGACY_KEY,
            }
            keys = server_keys(settings.server, env)
            app = create_app(searcher, settings, api_keys=keys, upload_dir=tmp / "uploads")
            with _uvicorn(app) as url:
                yield {"url": url, "root": root}
        finally:
            searcher.close()


def _h(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _models(url: str, key: str) -> list[str]:
    resp = httpx.get(f"{url}/v1/models", headers=_h(key))
    assert resp.status_code == 200, resp.text
    return [m["id"] for m in resp.json()["data"]]


def _forbidden(resp: httpx.Response, code: str = "collection_forbidden") -> str:
    assert resp.status_code == 403, resp.text
    err = resp.json()["error"]
    assert err["type"] == "permission_error" and err["code"] == code and err["hint"]
    return str(err["message"])


def test_models_list_only_the_readable_collections(site: dict[str, Any]) -> None:
    url = site["url"]
    assert _models(url, SUPPORT_KEY) == [*MODELS, "support"]
    assert _models(url, READER_KEY) == [*MODELS, "support"]  # a glob pattern
    assert _models(url, ADMIN_KEY) == [*MODELS, "hr", "support"]  # by its SHA-256
    assert _models(url, LEGACY_KEY) == [*MODELS, "hr", "support"]  # legacy: everything
    assert httpx.get(f"{url}/v1/models", headers=_h("nope")).status_code == 401


def test_naming_a_forbidden_collection_is_403_on_every_search_route(site: dict[str, Any]) -> None:
    url = site["url"]
    chat = {"model": "hr", "messages": [{"role": "user", "content": HR_QUESTION}]}
    for body in (chat, chat | {"stream": True}):
        resp = httpx.post(f"{url}/v1/chat/completions", json=body, headers=_h(SUPPORT_KEY))
        assert "may not read collection 'hr'" in _forbidden(resp)
    query = {"question": HR_QUESTION, "collections": ["support", "hr"]}
    resp = httpx.post(f"{url}/v1/query", json=query, headers=_h(SUPPORT_KEY))
    assert "'hr'" in _forbidden(resp)
    # A collection that does not exist is refused the same way: no probing for names.
    resp = httpx.post(
        f"{url}/v1/query",
        json={"question": "x", "collections": ["finance"]},
        headers=_h(READER_KEY),
    )
    _forbidden(resp)
    # Nothing readable: refused, not searched across nothing (nor across everything).
    resp = httpx.post(f"{url}/v1/query", json={"question": "x"}, headers=_h(FINANCE_KEY))
    assert "may read none" in _forbidden(resp)


def test_unnamed_search_never_returns_a_forbidden_passage(site: dict[str, Any]) -> None:
    url = site["url"]
    full = httpx.post(
        f"{url}/v1/query", json={"question": HR_QUESTION}, headers=_h(ADMIN_KEY), timeout=120
    ).json()
    # The full key finds the answer in hr: the restricted key's empty-handedness is access.
    assert any(s["collection"] == "hr" for s in full["sources"]) and "45 euros" in full["answer"]

    answer = httpx.post(
        f"{url}/v1/query", json={"question": HR_QUESTION}, headers=_h(SUPPORT_KEY), timeout=120
    ).json()
    assert all(s["collection"] == "support" for s in answer["sources"])
    assert "45 euros" not in json.dumps(answer)

    body = {
        "model": "deepsearcher",
        "stream": True,
        "messages": [{"role": "user", "content": HR_QUESTION}],
        "cache": False,  # a real search, so its trace events can be checked too
    }
    frames: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{url}/v1/chat/completions", json=body, headers=_h(SUPPORT_KEY), timeout=120
    ) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: {"):
                frames.append(json.loads(line[6:]))
    events = [f["deepsearcher_event"] for f in frames if "deepsearcher_event" in f]
    assert any(e["type"] == "search" for e in events)
    final = next(f for f in frames if f.get("sources") is not None)
    assert all(s["collection"] == "support" for s in final["sources"])
    streamed = json.dumps(frames)
    assert "45 euros" not in streamed and "travel.md" not in streamed and "hr/" not in streamed

    plain = httpx.post(
        f"{url}/v1/chat/completions",
        json=body | {"stream": False},
        headers=_h(SUPPORT_KEY),
        timeout=120,
    ).json()
    assert all(s["collection"] == "support" for s in plain["sources"])
    assert "45 euros" not in json.dumps(plain)


def test_load_needs_load_rights_for_the_target_collection(site: dict[str, Any]) -> None:
    url = site["url"]
    files = [("files", ("note.md", b"The hr budget is 1 euro.\n", "text/markdown"))]
    resp = httpx.post(
        f"{url}/v1/load", files=files, data={"collection": "support"}, headers=_h(READER_KEY)
    )
    assert "may not load" in _forbidden(resp, "load_forbidden")
    resp = httpx.post(
        f"{url}/v1/load", files=files, data={"collection": "hr"}, headers=_h(SUPPORT_KEY)
    )
    assert "into collection 'hr'" in _forbidden(resp, "load_forbidden")
    resp = httpx.post(
        f"{url}/v1/load", json={"paths": ["incoming"], "collection": "hr"}, headers=_h(SUPPORT_KEY)
    )
    _forbidden(resp, "load_forbidden")
    hr = next(
        m
        for m in httpx.get(f"{url}/v1/models", headers=_h(ADMIN_KEY)).json()["data"]
        if m["id"] == "hr"
    )
    assert hr["files"] == len(HR)  # nothing reached hr

    ok = httpx.post(
        f"{url}/v1/load",
        files=files,
        data={"collection": "support"},
        headers=_h(SUPPORT_KEY),
        timeout=120,
    )
    assert ok.status_code == 200, ok.text
    assert ok.json()["collection"] == "support" and ok.json()["files"]["new"] == 1


def test_mcp_tools_and_passages_follow_the_key(site: dict[str, Any]) -> None:
    url = site["url"]

    async def calls() -> None:
        async with _http(url, ADMIN_KEY) as admin:
            names = [c["name"] for c in _data(await admin.call_tool("list_collections", {}))]
            assert names == ["hr", "support"]
            found = _data(await admin.call_tool("search", {"query": HR_QUESTION}))
            hr_uri = next(p["uri"] for p in found["passages"] if p["collection"] == "hr")

        async with _http(url, SUPPORT_KEY) as session:
            names = [c["name"] for c in _data(await session.call_tool("list_collections", {}))]
            assert names == ["support"]

            found = _data(await session.call_tool("search", {"query": HR_QUESTION}))
            assert found["passages"]
            assert {p["collection"] for p in found["passages"]} == {"support"}
            refused = _error(
                await session.call_tool("search", {"query": "x", "collections": ["hr"]})
            )
            assert "may not read collection 'hr'" in refused

            with pytest.raises(MCPError, match="may not read collection 'hr'"):
                await session.read_resource(hr_uri)

            steps: list[str] = []

            async def on_progress(_p: float, _t: float | None, message: str | None) -> None:
                steps.append(message or "")

            answer = _data(
                await session.call_tool(
                    "deep_search", {"question": HR_QUESTION}, progress_callback=on_progress
                )
            )
            assert steps and all(s["collection"] == "support" for s in answer["sources"])
            assert "45 euros" not in json.dumps(answer) + "".join(steps)
            assert "travel.md" not in "".join(steps)
            refused = _error(
                await session.call_tool(
                    "deep_search", {"question": HR_QUESTION, "collections": ["hr"]}
                )
            )
            assert "may not read collection 'hr'" in refused

            refused = _error(
                await session.call_tool("load", {"path": "incoming", "collection": "hr"})
            )
            assert "may not load documents into collection 'hr'" in refused
            report = _data(
                await session.call_tool("load", {"path": "incoming", "collection": "support"})
            )
            assert report["collection"] == "support"

    anyio.run(calls)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("- name: a\n  key: plain-secret\n  read: '*'", "unknown field 'key'"),
        ("- name: a\n  key_env: NOT_SET_ANYWHERE\n  read: '*'", "NOT_SET_ANYWHERE is not set"),
        ("- name: a\n  key_sha256: abc\n  read: '*'", "64 hex digits"),
        (f"- name: a\n  key_sha256: {'a' * 64}", "'read' is missing"),
        ("[oops", "is not valid"),
    ],
)
def test_a_malformed_keys_file_stops_the_server_at_startup(
    tmp_path: Path, settings: Settings, entry: str, problem: str
) -> None:
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text(f"keys:\n{entry}\n" if not entry.startswith("[") else entry)
    bad = settings.model_copy(
        update={"server": settings.server.model_copy(update={"keys_file": str(keys_file)})}
    )
    with pytest.raises(ConfigError) as info:
        run_server(bad)  # refused before the store opens or a port is bound
    assert problem in info.value.message and str(keys_file) in info.value.message
    assert info.value.hint and "\n" not in info.value.message
    if entry.startswith("- "):
        assert "entry 1 (a)" in info.value.message


def test_a_json_keys_file_reads_like_yaml(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    entry = {"name": "j", "key_env": "J_KEY", "read": ["a*"], "load": []}
    keys_file.write_text(json.dumps({"keys": [entry]}))
    access = load_keys_file(keys_file, {"J_KEY": "jk"}).resolve(b"jk")
    assert access is not None and access.readable("alpha") and not access.readable("beta")
    assert (
        not access.may_load() and load_keys_file(keys_file, {"J_KEY": "jk"}).resolve(b"j") is None
    )
