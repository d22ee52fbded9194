"""Stateless servers on a shared Milvus: several ``deepsearcher serve`` processes (real
subprocesses, started by the CLI) on one ``milvus-lite server`` give the same answers, see each
other's loads without a restart, share the answer cache, and say on ``/readyz`` whether the
store answers, following it down and back up.

The servers embed through the scripted embeddings server (tests/embed_server.py), so each
process starts in a second instead of loading a model, and ask the scripted LLM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.embed_server import ScriptedEmbeddingServer
from tests.llm_server import ScriptedLLMServer
from tests.milvus_server import free_port, stop_process

MEALS = "What is the daily meal allowance for business travel?"
VACATION = "How many days of paid vacation do employees receive per year?"
TRAVEL = (
    "# Travel policy\n\nThe daily meal allowance for business travel is 45 euros. Travel "
    "requests are approved by the department head before booking.\n"
)
OFFICES = "# Offices\n\nThe Lisbon office is managed by Ana Ferreira. It opens at 8 am.\n"
PARKING_QUESTION = "Where do visitors park their cars?"
PARKING = "# Parking\n\nVisitors park their cars on level -2 of the garage.\n"
BENEFITS = "Employees receive 25 days of paid vacation per year. Parental leave lasts 20 weeks.\n"


def _env(
    milvus_uri: str, llm: ScriptedLLMServer, embed: ScriptedEmbeddingServer, **settings: str
) -> dict[str, str]:
    extra = {f"DEEPSEARCHER_SERVER__{k.upper()}": v for k, v in settings.items()}
    return {
        **os.environ,
        "DEEPSEARCHER_VECTOR_STORE__URI": milvus_uri,
        "DEEPSEARCHER_LLM__BASE_URL": llm.base_url,
        "DEEPSEARCHER_EMBEDDING__PROVIDER": "openai",
        "DEEPSEARCHER_EMBEDDING__MODEL": "scripted-embed",
        "DEEPSEARCHER_EMBEDDING__BASE_URL": embed.base_url,
        "DEEPSEARCHER_CACHE__ENABLED": "true",
        **extra,
    }


def _load(env: dict[str, str], cwd: Path, folder: Path, *args: str) -> None:
    """``deepsearcher load`` in its own process, as a user would run it beside the servers."""
    done = subprocess.run(
        _cli("load", str(folder), "--collection", "handbook", *args),
        env=env, cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "deepsearcher.cli", *args]


@contextmanager
def _serve(env: dict[str, str], cwd: Path, name: str) -> Iterator[str]:
    """``deepsearcher serve`` in its own process; yields its base URL once /healthz answers."""
    port = free_port()
    log = (cwd / f"{name}.log").open("wb")
    proc = subprocess.Popen(
        _cli("serve", "--port", str(port)), env=env, cwd=cwd, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{name} exited: {(cwd / f'{name}.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{name} did not start"
            time.sleep(0.2)
        yield url
    finally:
        stop_process(proc, timeout_s=20)
        log.close()


def _query(url: str, question: str, *, cache: bool = False) -> dict[str, Any]:
    resp = httpx.post(f"{url}/v1/query", json={"question": question, "cache": cache}, timeout=120)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def _sources(answer: dict[str, Any]) -> list[str]:
    return [s["source"] for s in answer["sources"]]


@pytest.fixture
def embed_server() -> Iterator[ScriptedEmbeddingServer]:
    with ScriptedEmbeddingServer(dim=64) as server:
        yield server


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """server.load_root: handbook/a is loaded first, handbook/b later."""
    a = tmp_path / "root" / "handbook" / "a"
    a.mkdir(parents=True)
    (a / "travel.md").write_text(TRAVEL, encoding="utf-8")
    (a / "offices.md").write_text(OFFICES, encoding="utf-8")
    b = tmp_path / "root" / "handbook" / "b"
    b.mkdir()
    (b / "benefits.txt").write_text(BENEFITS, encoding="utf-8")
    return tmp_path / "root"


def test_two_servers_on_one_store_answer_alike_and_see_each_others_loads(
    tmp_path: Path,
    milvus_server: str,
    llm_server: ScriptedLLMServer,
    embed_server: ScriptedEmbeddingServer,
    root: Path,
) -> None:
    # One upload folder for both, as a shared volume would be across machines.
    env = _env(milvus_server, llm_server, embed_server, upload_dir=str(tmp_path / "uploads"))
    _load(env, tmp_path, root / "handbook" / "a", "--description", "company handbook")

    with ExitStack() as stack:
        one = stack.enter_context(_serve(env, tmp_path, "one"))
        two = stack.enter_context(_serve(env, tmp_path, "two"))

        # The collection, its description and its counts live in Milvus: both list them alike.
        models = [httpx.get(f"{u}/v1/models", timeout=30).json()["data"] for u in (one, two)]
        assert models[0] == models[1]
        handbook = next(m for m in models[0] if m["id"] == "handbook")
        assert handbook["description"] == "company handbook"
        assert handbook["files"] == 2

        # The same question gets the same answer from either server.
        first, second = _query(one, MEALS), _query(two, MEALS)
        assert "45 euros" in first["answer"]
        assert second["answer"] == first["answer"]
        assert _sources(second) == _sources(first) == ["travel.md"]

        # The answer cache is in Milvus: an answer one server gave, the other repeats.
        assert _query(one, MEALS, cache=True)["cached"] is False
        repeated = _query(two, MEALS, cache=True)
        assert repeated["cached"] is True
        assert repeated["answer"] == first["answer"]

        # A CLI load into the same store while both serve...
        _load(env, tmp_path, root / "handbook" / "b")

        # ...is searchable through either at once, with no restart; and sources are shown
        # relative to the collection's folder, which that load moved up (both servers showed
        # "travel.md" and "benefits.txt" before: each kept the old folder in memory).
        vacation = [_query(u, VACATION) for u in (one, two)]
        assert "25 days" in vacation[0]["answer"]
        assert _sources(vacation[0]) == _sources(vacation[1]) == ["b/benefits.txt"]
        again = [_query(u, MEALS) for u in (one, two)]
        assert _sources(again[0]) == _sources(again[1]) == ["a/travel.md"]

        # The load changed the collection: the answer cached before it is served by neither.
        assert _query(two, MEALS, cache=True)["cached"] is False
        assert _query(one, MEALS, cache=True)["cached"] is True

        # An upload through one server's API, with a new description, is searchable through
        # the other, which lists the new description and file count.
        resp = httpx.post(
            f"{one}/v1/load",
            files={"files": ("parking.md", PARKING.encode(), "text/markdown")},
            data={"collection": "handbook", "description": "company handbook with parking"},
            timeout=300,
        )
        assert resp.status_code == 200, resp.text
        assert resp.json()["files"]["new"] == 1
        parking = _query(two, PARKING_QUESTION)
        assert "level -2" in parking["answer"]
        assert _sources(parking) == ["handbook/parking.md"]  # in the shared upload folder
        listed = httpx.get(f"{two}/v1/models", timeout=30).json()["data"]
        handbook = next(m for m in listed if m["id"] == "handbook")
        assert handbook["description"] == "company handbook with parking"
        assert handbook["files"] == 4


class _MilvusProcess:
    """``milvus-lite server`` on a fixed port and data folder, so it can be killed and started
    again where the servers expect it."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        exe = Path(sys.executable).with_name("milvus-lite")
        self.proc = subprocess.Popen(
            [str(exe), "server", "--data-dir", str(self.data_dir),
             "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            assert self.proc.poll() is None, "milvus-lite server exited"
            assert time.monotonic() < deadline, "milvus-lite server did not start"
            time.sleep(0.1)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def _wait_ready(url: str, status: int, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        resp = httpx.get(f"{url}/readyz", timeout=15)
        if resp.status_code == status:
            return dict(resp.json())
        assert time.monotonic() < deadline, f"/readyz stayed {resp.status_code}: {resp.text}"
        time.sleep(0.3)


def test_readyz_follows_the_store_down_and_back_up(
    tmp_path: Path,
    llm_server: ScriptedLLMServer,
    embed_server: ScriptedEmbeddingServer,
    root: Path,
) -> None:
    milvus = _MilvusProcess(tmp_path / "milvus")
    milvus.start()
    try:
        env = _env(milvus.uri, llm_server, embed_server, load_root=str(root))
        with _serve(env, tmp_path, "server") as url:
            resp = httpx.post(
                f"{url}/v1/load",
                json={"paths": [str(root / "handbook" / "a")], "collection": "handbook"},
                timeout=300,
            )
            assert resp.status_code == 200, resp.text
            ready = httpx.get(f"{url}/readyz", timeout=15)
            assert ready.status_code == 200
            assert ready.json()["store"] == {"ok": True, "reachable": True, "collections": 1}

            milvus.kill()
            down = _wait_ready(url, 503)
            assert down["status"] == "unavailable"
            assert down["store"]["reachable"] is False
            assert "unreachable" in down["store"]["error"]
            assert str(milvus.port) not in down["store"]["error"]  # no internal address
            assert httpx.get(f"{url}/healthz", timeout=15).status_code == 200  # alive, not ready

            # The store comes back (its collections released, as after any restart): the
            # server is ready again and searches without being restarted itself.
            milvus.start()
            up = _wait_ready(url, 200)
            assert up["store"]["reachable"] is True
            answer = _query(url, MEALS)
            assert "45 euros" in answer["answer"]
            assert _sources(answer) == ["handbook/a/travel.md"]
    finally:
        milvus.kill()
