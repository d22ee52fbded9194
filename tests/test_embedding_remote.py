"""The OpenAI-compatible embedder against a real local embeddings server (tests/embed_server.py):
batching, bounded concurrency, retries, order, the dimension guard, and a whole load and query
through it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from deepsearcher.cli import app
from deepsearcher.config import EmbeddingSettings
from deepsearcher.embedding import OpenAIEmbedder, build_embedder
from deepsearcher.errors import EmbeddingError
from tests.embed_server import ScriptedEmbeddingServer, hashed_vector
from tests.llm_server import ScriptedLLMServer

TEXTS = [f"passage number {i} about topic {i % 7}" for i in range(23)]


@pytest.fixture
def embed_server() -> Iterator[ScriptedEmbeddingServer]:
    with ScriptedEmbeddingServer(dim=32) as server:
        yield server


def _embedder(server: ScriptedEmbeddingServer, **settings: Any) -> OpenAIEmbedder:
    values = {"provider": "openai", "model": "scripted-embed", "base_url": server.base_url}
    embedder = build_embedder(EmbeddingSettings(**{**values, **settings}))
    assert isinstance(embedder, OpenAIEmbedder)
    # Backoff of milliseconds: the tests count retries, they do not wait for them.
    embedder._backoff_base_s = 0.001
    return embedder


def _expected(texts: list[str], dim: int) -> np.ndarray:
    return np.asarray([hashed_vector(t, dim) for t in texts], dtype=np.float32)


def test_batches_of_batch_size_and_vectors_in_text_order(
    embed_server: ScriptedEmbeddingServer,
) -> None:
    # Later batches answer first, and each reply lists its items in reverse: the vectors must
    # still come back in the order of the texts.
    embed_server.reverse_items = True
    embed_server.latency = lambda inputs: 0.3 if inputs[0] == TEXTS[0] else 0.0
    embedder = _embedder(embed_server, batch_size=5, max_concurrency=5)

    vectors = embedder.embed(TEXTS)

    assert sorted(len(r.inputs) for r in embed_server.requests) == [3, 5, 5, 5, 5]
    assert sorted(t for r in embed_server.requests for t in r.inputs) == sorted(TEXTS)
    np.testing.assert_allclose(vectors, _expected(TEXTS, 32), atol=1e-6)
    assert embedder.dimension == 32


def test_requests_in_flight_never_exceed_max_concurrency(
    embed_server: ScriptedEmbeddingServer,
) -> None:
    # The server holds requests until 3 are in flight: a client that sent one at a time would
    # never open the gate and stay at 1; one without a bound would go past 3.
    embed_server.gate = 3
    embed_server.slow_s = 30  # how long the gate holds: ample on a loaded machine
    embed_server.latency = 0.05
    embedder = _embedder(embed_server, batch_size=2, max_concurrency=3)

    vectors = embedder.embed(TEXTS)

    assert len(embed_server.requests) == 12
    assert embed_server.max_in_flight == 3
    np.testing.assert_allclose(vectors, _expected(TEXTS, 32), atol=1e-6)


def test_bound_is_shared_by_concurrent_callers(embed_server: ScriptedEmbeddingServer) -> None:
    # A load's batches and a server's queries embed from several threads at once: together
    # they stay within the one bound.
    from concurrent.futures import ThreadPoolExecutor

    embed_server.gate = 2
    embed_server.slow_s = 30
    embed_server.latency = 0.05
    embedder = _embedder(embed_server, batch_size=1, max_concurrency=2)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(embedder.embed, [TEXTS[i : i + 4] for i in range(0, 16, 4)]))

    assert embed_server.max_in_flight == 2
    for i, vectors in enumerate(results):
        np.testing.assert_allclose(vectors, _expected(TEXTS[i * 4 : i * 4 + 4], 32), atol=1e-6)


def test_429_waits_for_retry_after_then_succeeds(embed_server: ScriptedEmbeddingServer) -> None:
    embed_server.add_fault("429", retry_after="1")
    embedder = _embedder(embed_server, batch_size=50, max_retries=2)

    vectors = embedder.embed(TEXTS[:3])

    assert len(embed_server.requests) == 2
    refused, retried = embed_server.requests
    # Retry-After says when to come back; the backoff alone would have retried in ~1 ms.
    assert retried.at - refused.answered_at >= 0.95
    np.testing.assert_allclose(vectors, _expected(TEXTS[:3], 32), atol=1e-6)


def test_5xx_and_timeouts_are_retried(embed_server: ScriptedEmbeddingServer) -> None:
    embed_server.slow_s = 3
    embed_server.add_fault("500")
    embed_server.add_fault("slow")
    embed_server.add_fault("503")
    embedder = _embedder(embed_server, batch_size=50, max_retries=3, timeout_s=0.5)

    vectors = embedder.embed(TEXTS[:4])

    assert len(embed_server.requests) == 4  # three failures, then the answer
    np.testing.assert_allclose(vectors, _expected(TEXTS[:4], 32), atol=1e-6)


def test_retries_spent_is_one_clear_error(embed_server: ScriptedEmbeddingServer) -> None:
    embed_server.add_fault("500", times=10)
    embedder = _embedder(embed_server, batch_size=50, max_retries=2)

    with pytest.raises(EmbeddingError) as err:
        embedder.embed(TEXTS[:4])

    assert len(embed_server.requests) == 3  # the first attempt and two retries
    assert "failed after 3 attempts: 500 scripted error 500" in err.value.message
    assert "embedding.max_retries" in err.value.hint
    assert "\n" not in err.value.message


def test_client_errors_are_not_retried(embed_server: ScriptedEmbeddingServer) -> None:
    embed_server.add_fault("413")
    embedder = _embedder(embed_server, batch_size=50)

    with pytest.raises(EmbeddingError) as err:
        embedder.embed(TEXTS[:4])

    assert len(embed_server.requests) == 1
    assert "rejected the request: 413" in err.value.message
    assert "embedding.batch_size" in err.value.hint


def test_a_vector_of_another_dimension_is_refused(embed_server: ScriptedEmbeddingServer) -> None:
    embedder = _embedder(embed_server, batch_size=4)
    assert embedder.dimension == 32  # the first reply fixes it
    embed_server.add_fault("wrong_dim")  # the model behind the URL changed

    with pytest.raises(EmbeddingError) as err:
        embedder.embed(TEXTS[:4])

    assert "returned 33-dimensional vectors" in err.value.message
    assert "expected 32" in err.value.message
    assert "--rebuild" in err.value.hint


def test_declared_dimension_is_checked_and_sent(embed_server: ScriptedEmbeddingServer) -> None:
    embedder = _embedder(embed_server, dimensions=16)
    assert embedder.dimension == 16  # declared: no request needed to know it
    assert embed_server.requests == []

    with pytest.raises(EmbeddingError) as err:
        embedder.embed(TEXTS[:2])

    assert embed_server.requests[0].dimensions == 16
    assert "returned 32-dimensional vectors" in err.value.message
    assert "expected 16 (embedding.dimensions)" in err.value.message


def test_unreachable_server_fails_at_once() -> None:
    from tests.milvus_server import free_port

    settings = EmbeddingSettings(
        provider="openai", model="m", base_url=f"http://127.0.0.1:{free_port()}/v1"
    )
    embedder = OpenAIEmbedder(settings)
    with pytest.raises(EmbeddingError) as err:
        embedder.embed(["x"])
    assert "cannot connect to the embedding server" in err.value.message


def test_load_and_query_through_a_remote_embedding_server(
    tmp_path: Path, embed_server: ScriptedEmbeddingServer, llm_server: ScriptedLLMServer
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "travel.md").write_text(
        "# Travel\n\nThe daily meal allowance for business travel is 45 euros.\n", encoding="utf-8"
    )
    (docs / "offices.md").write_text(
        "# Offices\n\nThe Lisbon office is managed by Ana Ferreira.\n", encoding="utf-8"
    )
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "milvus.db"),
        "DEEPSEARCHER_EMBEDDING__PROVIDER": "openai",
        "DEEPSEARCHER_EMBEDDING__MODEL": "scripted-embed",
        "DEEPSEARCHER_EMBEDDING__BASE_URL": embed_server.base_url,
        "DEEPSEARCHER_EMBEDDING__BATCH_SIZE": "1",
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
        "DEEPSEARCHER_CACHE__ENABLED": "false",
    }
    runner = CliRunner()

    loaded = runner.invoke(app, ["load", str(docs), "--collection", "handbook", "--json"], env=env)
    assert loaded.exit_code == 0, loaded.output
    report = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert report["files"]["new"] == 2
    assert embed_server.texts_embedded >= report["chunks"]["added"] >= 2
    assert {r.model for r in embed_server.requests} == {"scripted-embed"}

    answered = runner.invoke(
        app,
        ["query", "What is the daily meal allowance for business travel?", "--json"],
        env=env,
    )
    assert answered.exit_code == 0, answered.output
    answer = json.loads(answered.stdout.strip().splitlines()[-1])
    assert "45 euros" in answer["answer"]
    assert any(s["source"].endswith("travel.md") for s in answer["sources"])
    # The question itself was embedded by the server too.
    assert any("meal allowance" in t for r in embed_server.requests for t in r.inputs[:1])

    # The server swaps its model for one of another size: the next load says so in one line.
    embed_server.dim = 48
    (docs / "benefits.md").write_text("Employees receive 25 days of vacation.\n", encoding="utf-8")
    refused = runner.invoke(app, ["load", str(docs), "--collection", "handbook"], env=env)
    assert refused.exit_code == 1
    assert "error: collection 'handbook' was built with other settings" in refused.output
    assert "dimension" in refused.output
    asked = runner.invoke(app, ["query", "What is the daily meal allowance?"], env=env)
    assert asked.exit_code == 1
    assert (
        "error: collection 'handbook' holds 32-dimensional vectors; the embedder "
        "(scripted-embed) now returns 48" in asked.output
    )
    assert "--rebuild" in asked.output
