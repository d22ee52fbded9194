"""Calibrate ``query.attribution_threshold``: how often an uncited answer sentence is attributed
to the passage that holds its evidence, at each threshold.

    .venv/bin/python benchmarks/attribution_calibration.py [--sets mixed,data,hotpot]
        [--db benchmarks/out/real_model.db] [--top-k 10] [--json-out FILE]

No LLM: for every question with a gold answer, the sentence an answer would write ("<the
question, as a statement>: <gold answer>.") is scored against the passages the question
retrieves (the real retriever and embedder, the collections ``benchmarks/real_model.py``
loads), by the project's ``Attributor`` (0.9 x cosine + 0.1 x key-term overlap, the passage
holding the sentence's own fact first) and its precision guard (``holds_claim``: the passage
holds the sentence's numbers and a third of its key terms).

A passage is gold when it holds the question's evidence strings (``real_model.py``'s rule).
For each threshold: how many sentences got a citation, how many of those cite a gold passage
first, and of the questions whose gold passage was retrieved, how many cite it first. The
default threshold is the highest that keeps the last figure at its best.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EVAL_DIR, OUT, markdown_table, prepare_imports

prepare_imports()

import real_model_sets as qsets  # noqa: E402

from deepsearcher.agents.attribution import Attributor, holds_claim  # noqa: E402
from deepsearcher.config import load_settings  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402

THRESHOLDS = [0.70, 0.72, 0.74, 0.76, 0.78, 0.80, 0.82, 0.84, 0.86]


def statement(question: str, answer: str) -> str:
    return f"{question.strip().rstrip('?？ ')}: {answer}."


async def collect(args: argparse.Namespace) -> list[dict[str, object]]:
    settings = load_settings(
        overrides={"vector_store": {"uri": str(args.db)}, "cache": {"enabled": False}},
        environ={},
    )
    ns = argparse.Namespace(sets=args.sets, all=True, limit=None, eval_dir=EVAL_DIR, subset="both")
    sets = qsets.load_sets(ns)
    rows: list[dict[str, object]] = []
    with DeepSearcher(settings) as ds:
        for name, qs in sets.items():
            if qs:
                await ds.aload(qs[0].root, name)
        attributor = Attributor(ds.embedder, 0.0)
        for qs in sets.values():
            for q in qs:
                hits = (await ds.retriever.search([q.question], [q.set], args.top_k))[0]
                if not hits:
                    continue
                gold = qsets.gold_keys(q, {h.id: h for h in hits})
                sentence = statement(q.question, q.parts[0][0])
                texts = [h.text for h in hits]
                score, fact = await attributor.scores([sentence], texts, q.question)
                rows.append(
                    {
                        "id": f"{q.set}/{q.id}",
                        "gold": [h.id in gold for h in hits],
                        "scores": [float(x) for x in score[0]],
                        "fact": [float(x) for x in fact[0]],
                        "guard": [holds_claim(sentence, h.text, q.question) for h in hits],
                    }
                )
    return rows


def table(rows: list[dict[str, object]]) -> str:
    out = []
    for t in THRESHOLDS:
        cited = right = reachable = found = 0
        for r in rows:
            gold, scores, fact, guard = r["gold"], r["scores"], r["fact"], r["guard"]
            assert isinstance(gold, list) and isinstance(scores, list)
            assert isinstance(fact, list) and isinstance(guard, list)
            ok = [i for i, s in enumerate(scores) if s >= t and guard[i]]
            # As Attributor ranks: the passage holding the sentence's fact first.
            best = max(ok, key=lambda i: (fact[i], scores[i])) if ok else None
            reachable += any(gold)
            if best is not None:
                cited += 1
                right += bool(gold[best])
                found += bool(any(gold) and gold[best])
        out.append(
            [
                f"{t:.2f}",
                f"{cited}/{len(rows)}",
                f"{right / cited:.2f}" if cited else "–",
                f"{found / reachable:.2f}" if reachable else "–",
            ]
        )
    header = [
        "threshold",
        "sentences cited",
        "gold passage cited first (of all cited)",
        "gold passage cited first (where one was retrieved)",
    ]
    return markdown_table(header, out, "rrrr")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", default="mixed,data,hotpot")
    parser.add_argument("--db", type=Path, default=OUT / "real_model.db")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--json-out")
    args = parser.parse_args()
    args.sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    rows = asyncio.run(collect(args))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows), encoding="utf-8")
    print(f"{len(rows)} questions ({', '.join(args.sets)}), top {args.top_k} passages each\n")
    print(table(rows))


if __name__ == "__main__":
    main()
