"""The answer cache: a repeated question's wall time and LLM calls against the first ask's.

    .venv/bin/python benchmarks/cache.py [--latency 0.2] [--limit 10] [--max-iter 3]
        [--eval-dir DIR] [--db benchmarks/out/cache.db]

The LLM is the scripted OpenAI-compatible server (tests/llm_server.py) answering every call
after ``--latency`` seconds, as in benchmarks/query.py. The HotpotQA corpus (994 passages) is
loaded once into a Milvus Lite file under benchmarks/out (incremental on later runs), the cache
collection is emptied, one unmeasured warm-up question (asked with the cache bypassed) loads the
embedding model, then the first ``--limit`` questions of hotpotqa100/questions.jsonl are asked
one after another, twice: the first pass searches, the second asks the same questions again,
re-cased and re-spaced, and should be answered from the cache. Prints a markdown table and
writes it to benchmarks/out/cache.md.
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

from deepsearcher.config import Settings, load_settings  # noqa: E402
from deepsearcher.options import QueryOptions  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402
from deepsearcher.store.answers import ANSWERS_COLLECTION  # noqa: E402
from tests.llm_server import ScriptedLLMServer  # noqa: E402

COLLECTION = "hotpot"


def _settings(args: argparse.Namespace, llm_url: str) -> Settings:
    return load_settings(
        overrides={
            "vector_store": {"uri": str(args.db), "collection": COLLECTION},
            "llm": {"base_url": llm_url, "model": "scripted"},
            "query": {"max_iter": args.max_iter},
            "cache": {"enabled": True},
        },
        environ={},
    )


def _rephrased(question: str) -> str:
    """The same question as another user types it: other case, doubled spaces, no '?'."""
    return "  " + question.rstrip("?").swapcase().replace(" ", "  ") + " "


async def _pass(
    ds: DeepSearcher, llm: ScriptedLLMServer, questions: list[str]
) -> tuple[float, int, int, list[str]]:
    """Total wall seconds, LLM requests, cached answers, and the answers' texts."""
    before = len(llm.requests)
    cached = 0
    texts = []
    t0 = time.perf_counter()
    for question in questions:
        answer = await ds.aquery(question, QueryOptions(collections=[COLLECTION]))
        cached += answer.cached
        texts.append(answer.answer)
    return time.perf_counter() - t0, len(llm.requests) - before, cached, texts


async def _bench(args: argparse.Namespace) -> str:
    path = args.eval_dir / "hotpotqa100" / "questions.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    questions = [r["question"] for r in rows][: args.limit + 1]
    warmup, measured = questions[-1], questions[:-1]
    with ScriptedLLMServer(latency=args.latency) as llm:
        ds = DeepSearcher(_settings(args, llm.base_url))
        report = await ds.aload(args.eval_dir / "hotpotqa100" / "corpus", COLLECTION)
        print(f"corpus: {report.chunks_total} chunks", file=sys.stderr)
        # A previous run's answers would make the first pass a repeat too.
        client = ds.store._client  # type: ignore[attr-defined]
        if client.has_collection(ANSWERS_COLLECTION):
            client.drop_collection(ANSWERS_COLLECTION)
        await ds.aquery(warmup, use_cache=False)
        first = await _pass(ds, llm, measured)
        repeat = await _pass(ds, llm, [_rephrased(q) for q in measured])
        ds.close()
    assert repeat[3] == first[3], "a cached answer differs from the first"
    n = len(measured)
    table = markdown_table(
        ["pass", "questions", "wall s", "s / question", "LLM calls", "cached"],
        [
            ["first", n, f"{first[0]:.2f}", f"{first[0] / n:.3f}", first[1], first[2]],
            ["repeat", n, f"{repeat[0]:.2f}", f"{repeat[0] / n:.4f}", repeat[1], repeat[2]],
        ],
        "lrrrrr",
    )
    return (
        f"{machine()}; scripted LLM latency {args.latency:g} s per call, query.max_iter "
        f"{args.max_iter}, other settings default\n\n{table}\n\n"
        f"repeat / first wall time: {100 * repeat[0] / first[0]:.2f}%\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per LLM call")
    parser.add_argument("--limit", type=int, default=10, help="questions per pass")
    parser.add_argument("--max-iter", type=int, default=3, help="query.max_iter")
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    parser.add_argument("--db", type=Path, default=OUT / "cache.db")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    text = asyncio.run(_bench(args))
    (OUT / "cache.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
