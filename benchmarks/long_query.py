"""Retrieval time of a long question against a short one (issue: long questions cost what
short ones do).

    .venv/bin/python benchmarks/long_query.py [--db benchmarks/out/long_query.db] [--runs 3]
        [--lengths 100,2000,8000] [--unbounded] [--eval-dir DIR]

The HotpotQA corpus (994 passages) is loaded once into a Milvus Lite file (incremental: a
second run only hashes the files). Each question is the corpus's questions joined and cut to
the given length, searched through the library's ``Retriever`` (the default embedder, hybrid
dense + BM25 search, top_k 5), exactly as an agent's sub-query or the MCP ``search`` tool is;
the fastest of ``--runs`` searches is reported (on a shared machine the median follows the
neighbours' load more than the search), after one unmeasured warm-up per length. ``--unbounded``
also measures the same searches with the text passed whole to the embedder and BM25, as
before the bound, for the "before" column. Prints a markdown table and writes it to
benchmarks/out/long_query.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EVAL_DIR, OUT, machine, markdown_table, prepare_imports

prepare_imports()

from deepsearcher import retrieval  # noqa: E402
from deepsearcher.config import load_settings  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402


def _question(text: str, length: int) -> str:
    return text[:length]


async def _fastest(ds: DeepSearcher, query: str, names: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await ds.retriever.search([query], names, 5)
        times.append(time.perf_counter() - t0)
    return min(times)


async def _measure(ds: DeepSearcher, text: str, lengths: list[int], runs: int) -> list[float]:
    names = [c.name for c in ds.collections()]
    for n in lengths:  # warm-up: the analyzers' dictionaries and the model load on first use
        await ds.retriever.search([_question(text, n)], names, 5)
    return [await _fastest(ds, _question(text, n), names, runs) for n in lengths]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=str(OUT / "long_query.db"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--lengths", default="100,2000,8000")
    parser.add_argument("--unbounded", action="store_true")
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    corpus = args.eval_dir / "hotpotqa100"
    settings = load_settings(
        overrides={"vector_store": {"uri": args.db}, "cache": {"enabled": False}}, environ={}
    )
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    questions = [
        json.loads(line)["question"]
        for line in (corpus / "questions.jsonl").read_text().splitlines()
    ]
    text = " ".join(questions * 20)
    with DeepSearcher(settings) as ds:
        ds.load([corpus / "corpus"])
        bounded = asyncio.run(_measure(ds, text, lengths, args.runs))
        unbounded: list[float] | None = None
        if args.unbounded:
            saved = retrieval.bm25_text, retrieval.embedder_text
            retrieval.bm25_text = lambda q: q  # type: ignore[assignment]
            retrieval.embedder_text = lambda q, _e: q  # type: ignore[assignment]
            try:
                unbounded = asyncio.run(_measure(ds, text, lengths, args.runs))
            finally:
                retrieval.bm25_text, retrieval.embedder_text = saved
    header = ["question chars", "bounded s", "x 100-char"]
    if unbounded:
        header += ["unbounded s", "x 100-char"]
    rows = []
    for i, n in enumerate(lengths):
        row: list[object] = [f"{n:,}", f"{bounded[i]:.2f}", f"{bounded[i] / bounded[0]:.2f}"]
        if unbounded:
            row += [f"{unbounded[i]:.2f}", f"{unbounded[i] / unbounded[0]:.2f}"]
        rows.append(row)
    table = markdown_table(header, rows, "l" + "r" * (len(header) - 1))
    ratio = bounded[-1] / bounded[0]
    summary = (
        f"{machine()}\n\n{table}\n\n{lengths[-1]:,} vs {lengths[0]:,} characters: "
        f"{ratio:.2f}x (target <= 2x)"
    )
    print(summary)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "long_query.md").write_text(summary + "\n")


if __name__ == "__main__":
    main()
