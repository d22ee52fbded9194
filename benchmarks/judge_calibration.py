"""Calibrate the relevance judge for a model: its YES/NO margins on gold and non-gold passages.

    .venv/bin/python benchmarks/judge_calibration.py --base-url http://127.0.0.1:PORT/v1
        [--model local] [--sets mixed,data,hotpot] [--limit 30] [--top-k 10] [--each]
        [--db benchmarks/out/real_model.db] [--json-out FILE]

For each question (``real_model_sets.py``; ``--limit`` per set), the passages the question
retrieves are judged the way deep search judges a round: one batched call over the round's
documents (``judge_batch``) and, with ``--each``, one call per passage (``judge_one``), both
with log-probabilities. A passage is gold when it holds the question's evidence strings. The
margin is log P(YES) - log P(NO) at each verdict word.

Prints, per way of judging: how well the margin tells gold from other passages (AUC: the
chance a gold passage's margin is above a non-gold one's), the gold and non-gold margins at a
few quantiles, and for candidate thresholds the share of gold passages kept and of non-gold
dropped. The threshold to set (``llm.judge_threshold`` for this model) is the highest that
still keeps 95 % of the gold passages: the judge may drop only what it is sure of.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EVAL_DIR, OUT, markdown_table, prepare_imports

prepare_imports()

import real_model_sets as qsets  # noqa: E402

from deepsearcher.agents.answer import passages_block  # noqa: E402
from deepsearcher.agents.judge import judge_batch, judge_one  # noqa: E402
from deepsearcher.config import load_settings  # noqa: E402
from deepsearcher.run_context import RunContext  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402

KEEP_GOLD = 0.95


def auc(gold: list[float], other: list[float]) -> float:
    if not gold or not other:
        return float("nan")
    wins = sum((g > o) + 0.5 * (g == o) for g in gold for o in other)
    return wins / (len(gold) * len(other))


def threshold_for(gold: list[float], keep: float = KEEP_GOLD) -> float:
    """The highest threshold that keeps ``keep`` of the gold margins."""
    ranked = sorted(gold)
    return ranked[int((1 - keep) * len(ranked))] if ranked else 0.0


async def collect(args: argparse.Namespace) -> list[dict[str, Any]]:
    settings = load_settings(
        overrides={
            "vector_store": {"uri": str(args.db)},
            "llm": {
                "base_url": args.base_url,
                "model": args.model,
                "timeout_s": 300,
                "max_concurrency": 1,  # one at a time: each call reads the round's prefix
                "api_key_env": args.api_key_env,
            },
            "cache": {"enabled": False},
            "query": {"timeout_s": 3600, "max_llm_calls": 10_000},
        },
        environ={},
    )
    ns = argparse.Namespace(
        sets=args.sets, all=False, limit=args.limit, eval_dir=EVAL_DIR, subset="both"
    )
    rows: list[dict[str, Any]] = []
    with DeepSearcher(settings) as ds:
        for name, qs in qsets.load_sets(ns).items():
            await ds.aload(qs[0].root, name)
        assert ds.llm is not None
        for qs in qsets.load_sets(ns).values():
            for q in qs:
                hits = (await ds.retriever.search([q.question], [q.set], args.top_k))[0]
                if not hits:
                    continue
                gold = qsets.gold_keys(q, {h.id: h for h in hits})
                docs = passages_block(hits)
                ctx = RunContext.create(settings, ds.llm)
                batch = await judge_batch(ctx, docs, q.question, [q.question], hits)
                row: dict[str, Any] = {
                    "id": f"{q.set}/{q.id}",
                    "gold": [h.id in gold for h in hits],
                    "batch": [v.margin for v in batch],
                    "batch_said": [v.relevant for v in batch],
                }
                if args.each:
                    each = [
                        (await judge_one(ctx, docs, q.question, q.question, n, h))[0]
                        for n, h in enumerate(hits, start=1)
                    ]
                    row["each"] = [v.margin for v in each]
                rows.append(row)
                print(f"{row['id']}: {sum(row['gold'])} gold of {len(hits)}", file=sys.stderr)
                if args.json_out:
                    # Off the event loop: the next question's calls keep running meanwhile.
                    await asyncio.to_thread(
                        Path(args.json_out).write_text, json.dumps(rows), encoding="utf-8"
                    )
    return rows


def report(rows: list[dict[str, Any]], key: str) -> str:
    gold = [m for r in rows for m, g in zip(r[key], r["gold"], strict=True) if g and m is not None]
    other = [
        m for r in rows for m, g in zip(r[key], r["gold"], strict=True) if not g and m is not None
    ]
    if not gold or not other:
        return f"{key}: no margins (the server returned no log-probabilities)"
    lines = [
        f"**{key}**: {len(gold)} gold and {len(other)} other passages; "
        f"AUC {auc(gold, other):.2f}; gold median {statistics.median(gold):+.2f}, "
        f"other median {statistics.median(other):+.2f}; threshold keeping "
        f"{KEEP_GOLD:.0%} of gold: {threshold_for(gold):+.2f}",
        "",
    ]
    candidates = sorted({-2.0, -1.0, -0.5, 0.0, 0.5, round(threshold_for(gold), 2)})
    table = [
        [
            f"{t:+.2f}",
            f"{sum(m >= t for m in gold) / len(gold):.2f}",
            f"{sum(m < t for m in other) / len(other):.2f}",
        ]
        for t in candidates
    ]
    lines.append(markdown_table(["threshold", "gold kept", "other dropped"], table, "rrr"))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint")
    parser.add_argument("--model", default="local")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY")
    parser.add_argument("--sets", default="mixed,data,hotpot")
    parser.add_argument("--limit", type=int, default=30, help="questions per set")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--each", action="store_true", help="also one verdict call per passage")
    parser.add_argument("--db", type=Path, default=OUT / "real_model.db")
    parser.add_argument("--json-out")
    parser.add_argument("--tables", metavar="JSON", help="the tables of a saved run")
    args = parser.parse_args()
    args.sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    if args.tables:
        rows = json.loads(Path(args.tables).read_text(encoding="utf-8"))
    else:
        if not args.base_url:
            parser.error("--base-url is required (or --tables)")
        rows = asyncio.run(collect(args))
    keys = ["batch", *(["each"] if rows and "each" in rows[0] else [])]
    print(f"{len(rows)} questions\n")
    print("\n\n".join(report(rows, k) for k in keys))


if __name__ == "__main__":
    main()
