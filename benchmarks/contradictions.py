"""The contradiction rule of research reports on labelled pairs (issue #32).

    .venv/bin/python benchmarks/contradictions.py [--pairs benchmarks/conflict_pairs.jsonl] [-v]

``benchmarks/conflict_pairs.jsonl`` holds pairs of statements, each from a source: **planted**
conflicts (a fact from data/ or benchmarks/mixed/corpus with its value changed, from another
source), **look-alikes** that are not conflicts (a gross margin next to a price rise and its
effect on the margin, two meetings' times, Q2 next to Q3, two products' prices, two sites, a
bound next to a typical value, a current rate next to a proposed one) and **agreeing** pairs
(the same value in other words: "5" and "five", USD 11.8 million and 11,800,000, rounding).
Pairs marked ``held_out`` were written after the rule was settled.

A pair is flagged when any claim of one and any claim of the other conflict
(``research.contradictions.conflict``: same entity, measure and period, different values), as
the report's check flags two passages from different sources. Prints precision and recall
overall and for the development and held-out parts; ``-v`` lists every pair with its verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, markdown_table, prepare_imports

prepare_imports()

from deepsearcher.research.claims import claims_of  # noqa: E402
from deepsearcher.research.contradictions import conflict  # noqa: E402


def flagged(pair: dict[str, Any]) -> bool:
    a = claims_of(pair["a"]["text"], ["A"], pair["a"]["source"])
    b = claims_of(pair["b"]["text"], ["B"], pair["b"]["source"])
    return any(conflict(x, y) for x in a for y in b)


def scores(pairs: list[dict[str, Any]]) -> list[object]:
    tp = sum(1 for p in pairs if p["conflict"] and p["flagged"])
    fp = sum(1 for p in pairs if not p["conflict"] and p["flagged"])
    fn = sum(1 for p in pairs if p["conflict"] and not p["flagged"])
    planted = tp + fn
    negatives = sum(1 for p in pairs if not p["conflict"])
    precision = f"{tp / (tp + fp):.2f}" if tp + fp else "-"
    recall = f"{tp / planted:.2f}" if planted else "-"
    return [len(pairs), f"{tp} / {planted}", f"{fp} / {negatives}", precision, recall]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=ROOT / "benchmarks/conflict_pairs.jsonl")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    pairs = [json.loads(line) for line in args.pairs.read_text(encoding="utf-8").splitlines()]
    for p in pairs:
        p["flagged"] = flagged(p)
        if args.verbose or p["flagged"] != p["conflict"]:
            mark = "ok " if p["flagged"] == p["conflict"] else "MISS" if p["conflict"] else "FALSE"
            print(f"{mark:5} {p['id']:5} {p['kind']:10} {p['why']}", file=sys.stderr)
    parts = {
        "all": pairs,
        "development": [p for p in pairs if not p.get("held_out")],
        "held out": [p for p in pairs if p.get("held_out")],
        "look-alikes only": [p for p in pairs if p["kind"] == "look-alike"],
    }
    print(
        markdown_table(
            ["pairs", "n", "planted found", "false conflicts", "precision", "recall"],
            [[name, *scores(part)] for name, part in parts.items()],
            "lrrrrr",
        )
    )


if __name__ == "__main__":
    main()
