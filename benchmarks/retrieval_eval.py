"""Retrieval recall@k, dense vs hybrid, on the shared eval sets; plus the eval command's cost
figures for the deep and naive agents against the scripted LLM server.

    .venv/bin/python benchmarks/retrieval_eval.py [--datasets hotpotqa100,cmrc2018_zh]
        [--limit N] [--cost-questions 20] [--eval-dir /work/shared/eval] [--context-prefix on]

Whole corpora are loaded (incrementally, into benchmarks/out/retrieval_eval.db, so a second run
only hashes files); ``--limit`` cuts the questions only. cmrc2018_zh gets its own collection
with the jieba BM25 analyzer. ``--context-prefix on|off`` overrides chunking.context_prefix
(file name and heading embedded and indexed with each chunk); "on" loads into collections
suffixed ``_ctx``, so both variants stay side by side in the one database. Prints markdown tables and writes them to
benchmarks/out/retrieval_eval.md (+ .json).

What the figures mean: recall@k is over the top-k distinct documents of a search for the
question text (follow-ups: previous user turns prepended). The default embedder,
all-MiniLM-L6-v2, is English-only, so cmrc2018_zh's dense figures show that limit, not
Chinese retrieval quality. The cost table uses a scripted LLM: its LLM-call and token counts
follow the real prompts and loop, but its answers and relevance verdicts are keyword rules, so
agent recall, EM and F1 from that run mean nothing; they need a real LLM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.llm_server (scripted LLM) and the package from a checkout
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from deepsearcher.config import Settings, load_settings  # noqa: E402
from deepsearcher.embedding import build_embedder  # noqa: E402
from deepsearcher.evaluation.runner import (  # noqa: E402
    FETCH_CHUNKS_PER_DOC,
    EvalOptions,
    EvalResult,
    run_eval,
)
from deepsearcher.searcher import DeepSearcher  # noqa: E402
from deepsearcher.store import build_store  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
DATASETS = ["hotpotqa100", "musique100", "gitlab_handbook", "cmrc2018_zh"]
KS = [2, 5, 10]
# cmrc2018_zh has 3,219 questions; 500 keep a run within minutes on a small machine (the whole
# corpus is still loaded). --limit overrides.
DEFAULT_LIMITS = {"cmrc2018_zh": 500}


# The Milvus Lite database; --db points elsewhere so two variants can load side by side
# (Lite allows one process per database).
_DB = [OUT / "retrieval_eval.db"]


def _settings(
    collection: str,
    analyzer: str = "standard",
    llm_url: str | None = None,
    context_prefix: bool | None = None,
) -> Any:
    chunking = {} if context_prefix is None else {"context_prefix": context_prefix}
    return load_settings(
        overrides={
            "chunking": chunking,
            "vector_store": {
                "uri": str(_DB[0]),
                "collection": collection,
                "analyzer": analyzer,
            },
            "llm": {"base_url": llm_url, "api_key_env": "DEEPSEARCHER_BENCH_NO_KEY"},
        },
        environ={},
    )


def _fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


async def run_retrieval(
    eval_dir: Path,
    names: list[str],
    limit: int | None,
    shared: dict[str, Any],
    context_prefix: bool | None = None,
) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        analyzer = "chinese" if name.startswith("cmrc") else "standard"
        collection = f"bench_{name}" + ("_ctx" if context_prefix else "")
        ds = DeepSearcher(_settings(collection, analyzer, context_prefix=context_prefix), **shared)
        opts = EvalOptions(
            questions=eval_dir / name / "questions.jsonl",
            corpus=eval_dir / name / "corpus",
            collection=collection,
            ks=KS,
            limit=limit or DEFAULT_LIMITS.get(name),
            retrieval_only=True,
        )
        t0 = time.perf_counter()
        result = await run_eval(ds, opts)
        load = result.load.to_dict() if result.load else {}
        print(
            f"{name}: load {load.get('seconds')} s {load.get('files')} chunks "
            f"{load.get('chunks', {}).get('total')}; eval {time.perf_counter() - t0:.1f} s",
            file=sys.stderr,
        )
        for mode in result.labels:
            m = result.summary[mode]
            rows.append({"dataset": name, "mode": mode, "load": load, **m})
    return rows


async def run_cost(eval_dir: Path, questions: int, shared: dict[str, Any]) -> EvalResult:
    from tests.llm_server import ScriptedLLMServer

    with ScriptedLLMServer(latency=0.0) as server:
        ds = DeepSearcher(_settings("bench_hotpotqa100", llm_url=server.base_url), **shared)
        opts = EvalOptions(
            questions=eval_dir / "hotpotqa100" / "questions.jsonl",
            corpus=eval_dir / "hotpotqa100" / "corpus",
            collection="bench_hotpotqa100",
            ks=KS,
            limit=questions,
            agents=["deep", "naive"],
        )
        return await run_eval(ds, opts)


def retrieval_table(rows: list[dict[str, Any]]) -> str:
    head = ["dataset", "questions", "mode"] + [f"R@{k}" for k in KS] + [f"all@{k}" for k in KS]
    lines = ["| " + " | ".join([*head, "search ms"]) + " |", "|" + "---|" * (len(head) + 1)]
    for r in rows:
        cells = [r["dataset"], str(r["n"]), r["mode"]]
        cells += [_fmt(r.get(f"recall@{k}")) for k in KS] + [
            _fmt(r.get(f"all_hops@{k}")) for k in KS
        ]
        cells.append(_fmt((r.get("seconds_mean") or 0) * 1000, 1))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cost_table(result: EvalResult) -> str:
    head = [
        "agent",
        "questions",
        "LLM calls",
        "prompt tok",
        "compl. tok",
        "s/q mean",
        "s p50",
        "s p95",
    ]
    head += ["R@5*", "all@5*", "errors"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label in result.labels:
        m = result.summary[label]
        cells = [label, str(m["n"]), _fmt(m.get("llm_calls_mean"), 1)]
        cells += [_fmt(m.get("prompt_tokens_mean"), 0), _fmt(m.get("completion_tokens_mean"), 0)]
        cells += [_fmt(m.get(k), 2) for k in ("seconds_mean", "seconds_p50", "seconds_p95")]
        cells += [_fmt(m.get("recall@5")), _fmt(m.get("all_hops@5")), str(m.get("errors", 0))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval-dir", type=Path, default=Path("/work/shared/eval"))
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument(
        "--limit", type=int, default=None, help="Questions per dataset (cmrc2018_zh: 500)."
    )
    parser.add_argument("--cost-questions", type=int, default=20, help="0 skips the cost run.")
    parser.add_argument(
        "--context-prefix",
        choices=["on", "off"],
        default=None,
        help="Override chunking.context_prefix for the retrieval run.",
    )
    parser.add_argument("--db", type=Path, default=_DB[0], help="Milvus Lite database path.")
    args = parser.parse_args()
    _DB[0] = args.db
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("grpc").setLevel(logging.CRITICAL)  # Milvus Lite's unimplemented-RPC noise
    OUT.mkdir(parents=True, exist_ok=True)

    names = [n for n in args.datasets.split(",") if n]
    base = _settings("bench")
    # One embedder and one Milvus Lite client for every dataset (Lite: one client per db).
    shared = {"embedder": build_embedder(base.embedding), "store": build_store(base.vector_store)}
    try:
        text, summary = _run_all(args, names, shared)
    finally:
        shared["store"].close()
    print(text)
    (OUT / "retrieval_eval.md").write_text(text, encoding="utf-8")
    (OUT / "retrieval_eval.json").write_text(
        json.dumps(summary, indent=2, default=str), encoding="utf-8"
    )


def _run_all(
    args: argparse.Namespace, names: list[str], shared: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    prefix = None if args.context_prefix is None else args.context_prefix == "on"
    rows = asyncio.run(run_retrieval(args.eval_dir, names, args.limit, shared, prefix))
    parts = [
        "### Retrieval recall@k (distinct documents), dense vs hybrid (dense + BM25, RRF)\n",
        retrieval_table(rows),
        "\nEmbedder all-MiniLM-L6-v2 (English-only: cmrc2018_zh dense figures reflect that; its "
        "BM25 uses the jieba analyzer). Recall over the top k distinct documents of "
        f"{max(KS) * FETCH_CHUNKS_PER_DOC} chunks; follow-ups search with the previous user turns prepended.",
    ]
    summary: dict[str, Any] = {"retrieval": rows}
    if args.cost_questions:
        cost = asyncio.run(run_cost(args.eval_dir, args.cost_questions, shared))
        q = Settings().query
        parts += [
            f"\n### Cost per question, hotpotqa100 ({args.cost_questions} questions), scripted "
            "LLM (latency 0)\n",
            cost_table(cost),
            "\nCalls and tokens follow the real prompts and loop (query defaults: max_iter "
            f"{q.max_iter}, top_k {q.top_k}, rerank {q.rerank}); seconds are local overhead only "
            "(no model latency). "
            "*Recall, EM and F1 of a scripted LLM are meaningless; they need a real LLM.",
        ]
        summary["cost"] = cost.summary
    return "\n".join(parts) + "\n", summary


if __name__ == "__main__":
    main()
