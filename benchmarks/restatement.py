"""Measure the rule that drops restated sub-queries before searching (``agents.plan.restates``).

    .venv/bin/python benchmarks/restatement.py --base-url http://127.0.0.1:PORT/v1 [--model local]
        [--limit 40] [--json-out FILE]
    .venv/bin/python benchmarks/restatement.py --pairs FILE   # the tables of saved pairs

Two kinds of labelled pairs:

- **restatements** (should be dropped): the model at ``--base-url`` asked to reword each
  question of the mixed-format set and the sample data three ways, keeping its meaning (what a
  small model's decomposition produced in the issue: "…in Västerås?", "…at Västerås?");
- **distinct lookups** (must be kept): MuSiQue's gold decompositions, each step (its "#k"
  taken out) against its question, and the mixed set's two-hop questions against the lookups
  a person would write for them (both hops).

For a grid of the rule's two parameters (the share of the other query's key words covered,
the new key words allowed) it prints how many restatements are caught and how many distinct
lookups would be lost; and, for comparison, the same by the cosine of the project's embedder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EVAL_DIR, ROOT, markdown_table, prepare_imports

prepare_imports()

from deepsearcher.agents import plan as planning  # noqa: E402
from deepsearcher.config import load_settings  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402

REWORD = (
    "Rewrite the question below three times in other words, keeping exactly its meaning and "
    'every name and number. Reply with a JSON object only: {{"variants": ["...", "...", '
    '"..."]}}.\n\nQuestion: {question}'
)
# The lookups of the mixed set's two-hop questions, as a person would write them.
MIXED_HOPS = {
    "mx48": ["Who owns the CAPA for the late occlusion alarm?",
             "What is the phone extension of Ingrid Halvorsen?"],
    "mx49": ["Which part is stored in bin B-14-03?", "Who supplies the PS-220 pressure sensor?",
             "Where are disputes with Shenzhen Huajing Sensors arbitrated?"],
    "mx50": ["Which customer is behind ticket SR-10482?",
             "Who is the account manager of the Tartu university hospital?"],
    "mx51": ["What priority is ticket SR-10431?",
             "How many minutes to respond to a P2 request under the SLA?"],
    "mx52": ["Who sent the battery latch safety notice?",
             "When did Henrik Sjöberg start at the company?"],
    "mx53": ["Which site's lease expires in March 2027?", "What are the IT desk hours in Tallinn?"],
    "mx54": ["Where are the held-up HJ-5521 sensors going?",
             "What temperature must the Göteborg cold room keep?"],
}  # fmt: skip


def distinct_pairs(eval_dir: Path) -> list[tuple[str, str]]:
    pairs = []
    musique = eval_dir / "musique100" / "questions.jsonl"
    if musique.is_file():
        for line in musique.read_text(encoding="utf-8").splitlines():
            q = json.loads(line)
            for step in q.get("decomposition", []):
                text = step.get("question") if isinstance(step, dict) else str(step)
                text = re.sub(r"#\d", "", text or "").replace(">>", " ").strip()
                if text:
                    pairs.append((text, q["question"]))
    mixed = ROOT / "benchmarks" / "mixed" / "questions.jsonl"
    for line in mixed.read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        for hop in MIXED_HOPS.get(q["id"], []):
            pairs.append((hop, q["question"]))
    return pairs


def questions() -> list[str]:
    mixed = ROOT / "benchmarks" / "mixed" / "questions.jsonl"
    out = [json.loads(line)["question"] for line in mixed.read_text(encoding="utf-8").splitlines()]
    from real_model_sets import DATA_QUESTIONS

    return [q for q in out if q.isascii()] + [q["question"] for q in DATA_QUESTIONS]


async def reworded(args: argparse.Namespace) -> list[tuple[str, str]]:
    settings = load_settings(
        overrides={
            "llm": {"base_url": args.base_url, "model": args.model, "timeout_s": 300},
            "cache": {"enabled": False},
        },
        environ={},
    )
    pairs = []
    with DeepSearcher(settings) as ds:
        assert ds.llm is not None
        for question in questions()[: args.limit]:
            prompt = [{"role": "user", "content": REWORD.format(question=question)}]
            reply = await ds.llm.complete(prompt, max_tokens=200)
            try:
                variants = json.loads(reply.text[reply.text.find("{") : reply.text.rfind("}") + 1])
                texts = [v for v in variants.get("variants", []) if isinstance(v, str)]
            except ValueError:
                texts = []
            pairs += [(v, question) for v in texts if v.strip() and v.strip() != question]
            print(f"{len(texts)} variants: {question}", file=sys.stderr)
    return pairs


def rule_table(same: list[tuple[str, str]], distinct: list[tuple[str, str]]) -> str:
    rows = []
    for share in (0.6, 0.7, 0.8, 0.9):
        for new in (0, 1, 2):
            planning.RESTATE_SHARE, planning.RESTATE_NEW_TERMS = share, new
            caught = sum(planning.restates(a, b) for a, b in same)
            lost = sum(planning.restates(a, b) for a, b in distinct)
            rows.append([f"{share:.1f}", new, f"{caught}/{len(same)}", f"{lost}/{len(distinct)}"])
    header = ["share covered", "new terms allowed", "restatements dropped", "lookups lost"]
    return markdown_table(header, rows, "rrrr")


def cosine_table(cos_same: list[float], cos_distinct: list[float]) -> str:
    rows = [
        [f"{t:.2f}", f"{sum(c >= t for c in cos_same)}/{len(cos_same)}",
         f"{sum(c >= t for c in cos_distinct)}/{len(cos_distinct)}"]
        for t in (0.85, 0.88, 0.90, 0.92, 0.94, 0.96)
    ]  # fmt: skip
    return markdown_table(["cosine at least", "restatements dropped", "lookups lost"], rows, "rrr")


def cosines(pairs: list[tuple[str, str]]) -> list[float]:
    settings = load_settings(environ={})
    with DeepSearcher(settings) as ds:
        a = ds.embedder.embed_query([p[0] for p in pairs])
        b = ds.embedder.embed_query([p[1] for p in pairs])
    return [float(x) for x in (a * b).sum(axis=1)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url")
    parser.add_argument("--model", default="local")
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    parser.add_argument("--json-out")
    parser.add_argument("--pairs", help="saved pairs (--json-out of an earlier run)")
    args = parser.parse_args()
    data: dict[str, Any]
    if args.pairs:
        data = json.loads(Path(args.pairs).read_text(encoding="utf-8"))
    else:
        if not args.base_url:
            parser.error("--base-url is required (or --pairs)")
        data = {"same": asyncio.run(reworded(args)), "distinct": distinct_pairs(args.eval_dir)}
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(data, ensure_ascii=False), "utf-8")
    same = [tuple(p) for p in data["same"]]
    distinct = [tuple(p) for p in data["distinct"]]
    print(f"{len(same)} restatements, {len(distinct)} distinct lookups\n")
    print(rule_table(same, distinct))  # type: ignore[arg-type]
    print()
    print(cosine_table(cosines(same), cosines(distinct)))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
