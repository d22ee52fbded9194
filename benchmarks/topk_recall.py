"""How much of the gold evidence the deep loop puts in front of its judge, per ``query.top_k``.

    .venv/bin/python benchmarks/topk_recall.py [--top-k 5,10] [--limit 100] [--eval-dir DIR]

The loop runs against the scripted LLM server with no latency and the ``fanout`` decomposition
and ``follow`` reflection of benchmarks/query.py (so three iterations run), on the HotpotQA
corpus loaded by benchmarks/query.py. For every question it records which passages were judged
(every VerdictEvent) and reports, per top_k: the share of gold passages that were judged, the
share of questions whose gold passages were all judged, the share of gold passages among the
passages the answer call was given (at most ``query.max_context_chunks`` of the kept ones), and
LLM calls. The scripted judge is a keyword rule that keeps most passages, so the "judged" columns
measure retrieval and the "answer context" column measures which kept passages reach the answer
when there are more than fit; no LLM quality is measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EVAL_DIR, OUT, markdown_table, prepare_imports

prepare_imports()

from query import COLLECTION, fanout_decompose_reply, follow_reply  # noqa: E402

from deepsearcher.config import load_settings  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402
from deepsearcher.types import VerdictEvent  # noqa: E402
from tests.llm_server import ScriptedLLMServer, task_of  # noqa: E402


async def _run(args: argparse.Namespace) -> list[list[str]]:
    path = args.eval_dir / "hotpotqa100" / "questions.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    table = []
    with ScriptedLLMServer(latency=0.0) as llm:
        for k in args.top_k:
            settings = load_settings(
                overrides={
                    "vector_store": {"uri": str(args.db), "collection": COLLECTION},
                    "llm": {"base_url": llm.base_url, "max_concurrency": 40, "model": "scripted"},
                    "cache": {"enabled": False},  # every run measures a real search
                    "query": {"top_k": k, "max_iter": 3, "max_llm_calls": 200},
                },
                environ={},
            )
            ds = DeepSearcher(settings)
            await ds.aload(args.eval_dir / "hotpotqa100" / "corpus", COLLECTION)
            judged_share, all_judged, kept_share, context_share, calls = [], [], [], [], []
            for row in rows[: args.limit]:
                llm.reset()
                llm.add_rule(lambda r: task_of(r) == "reflect", follow_reply)
                llm.add_rule(lambda r: task_of(r) == "plan", fanout_decompose_reply)
                judged: set[str] = set()
                kept: set[str] = set()
                async for ev in ds.astream(row["question"]):
                    if isinstance(ev, VerdictEvent):
                        judged.add(Path(ev.source).stem)
                        if ev.kept:
                            kept.add(Path(ev.source).stem)
                gold = set(row["gold_doc_ids"])
                judged_share.append(len(gold & judged) / len(gold))
                all_judged.append(float(gold <= judged))
                kept_share.append(len(gold & kept) / len(gold))
                context_share.append(len(gold & _answer_context(llm.requests)) / len(gold))
                calls.append(len(llm.requests))
            ds.close()
            table.append(
                [
                    str(k),
                    str(len(calls)),
                    f"{statistics.mean(judged_share):.3f}",
                    f"{statistics.mean(all_judged):.3f}",
                    f"{statistics.mean(kept_share):.3f}",
                    f"{statistics.mean(context_share):.3f}",
                    f"{statistics.mean(calls):.1f}",
                ]
            )
            print(f"top_k {k}: {table[-1]}", file=sys.stderr, flush=True)
    return table


def _answer_context(requests: list[dict]) -> set[str]:
    """Document ids of the passages in the answer call's prompt."""
    ids: set[str] = set()
    for req in requests:
        if task_of(req) == "answer":
            text = "\n".join(str(m.get("content", "")) for m in req.get("messages", []))
            for source in re.findall(r'<document n="\d+" source="([^"]+)"', text):
                ids.add(Path(source.split(" p.")[0]).stem)
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--top-k", default="5,10")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    parser.add_argument("--db", type=Path, default=OUT / "query.db")
    args = parser.parse_args()
    args.top_k = [int(k) for k in args.top_k.split(",") if k.strip()]
    table = asyncio.run(_run(args))
    text = markdown_table(
        [
            "query.top_k",
            "questions",
            "gold passages judged",
            "all gold judged",
            "gold kept (keyword judge)",
            "gold in answer context",
            "LLM calls",
        ],
        table,
        "rrrrrrr",
    )
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "topk_recall.md").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
