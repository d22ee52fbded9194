"""Eval output: markdown tables, ``results.jsonl``, ``summary.json``, ``run.json`` and PNG plots."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deepsearcher.errors import DeepSearcherError
from deepsearcher.evaluation.metrics import RECALL_METRICS
from deepsearcher.evaluation.runner import EvalResult

_COST_COLUMNS = [
    ("llm_calls_mean", "LLM calls"),
    ("prompt_tokens_mean", "prompt tok"),
    ("completion_tokens_mean", "compl. tok"),
]


def _columns(
    summary: dict[str, dict[str, Any]], ks: Sequence[int], mode: str
) -> list[tuple[str, str]]:
    cols = [("n", "n")]
    cols += [(f"{key}@{k}", head.format(k=k)) for key, head, _ in RECALL_METRICS for k in ks]
    cols += [("em", "EM"), ("f1", "F1"), ("not_stated", "not-stated")]
    cols += _COST_COLUMNS
    if mode == "retrieval":
        cols += [("seconds_mean", "search ms"), ("seconds_p95", "ms p95")]
    else:
        cols += [("seconds_mean", "s/q mean"), ("seconds_p50", "s p50"), ("seconds_p95", "s p95")]
    cols += [("errors", "errors")]
    present = {key for metrics in summary.values() for key in metrics}
    return [(k, h) for k, h in cols if k in present and (k != "errors" or _any_errors(summary))]


def _any_errors(summary: dict[str, dict[str, Any]]) -> bool:
    return any(m.get("errors") for m in summary.values())


def _fmt(key: str, value: Any, mode: str) -> str:
    if value is None:
        return "–"
    if key in ("n", "errors"):
        return str(int(value))
    if key.startswith("seconds"):
        return f"{value * 1000:.1f}" if mode == "retrieval" else f"{value:.2f}"
    if key.endswith("tokens_mean"):
        return f"{value:.0f}"
    if key == "llm_calls_mean":
        return f"{value:.1f}"
    return f"{value:.3f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def markdown_report(result: EvalResult, title: str | None = None) -> str:
    """The summary table (one row per agent/mode) and, when questions have types, a per-type
    table of retrieval and answer figures."""
    summary, mode = result.summary, result.mode
    cols = _columns(summary, result.ks, mode)
    first = "mode" if mode == "retrieval" else "agent"
    rows = [
        [label] + [_fmt(k, summary[label].get(k), mode) for k, _ in cols] for label in result.labels
    ]
    parts = []
    if title:
        parts.append(f"### {title}\n")
    parts.append(_table([first] + [h for _, h in cols], rows))
    typed = [label for label in result.labels if summary[label].get("by_type")]
    if typed:
        tcols = [c for c in cols if c[0] in ("n", "em", "f1", "not_stated") or "@" in c[0]]
        trows = []
        for label in typed:
            for qtype, metrics in summary[label]["by_type"].items():
                trows.append([label, qtype] + [_fmt(k, metrics.get(k), mode) for k, _ in tcols])
        parts.append(
            "\nBy question type:\n\n" + _table([first, "type"] + [h for _, h in tcols], trows)
        )
    parts.append("\n" + recall_legend(cols))
    if result.notes:
        parts.append("\n" + "\n".join(f"- {n}" for n in result.notes))
    return "\n".join(parts) + "\n"


def recall_legend(cols: Sequence[tuple[str, str]]) -> str:
    """One line defining the recall columns shown: chunk and document level differ."""
    shown = {key.split("@")[0] for key, _ in cols if "@" in key}
    parts = [
        f"{head.replace('@{k}', '@k')}: {meaning}"
        for key, head, meaning in RECALL_METRICS
        if key in shown
    ]
    if not parts:
        return ""
    return (
        "; ".join(parts)
        + ". Chunk level is what `query --top-k k` retrieves; document level counts several "
        "chunks of one document once."
    )


def summary_json(result: EvalResult) -> dict[str, Any]:
    """What ``eval --json`` prints: the run, the metric definitions and the summary."""
    return {
        "mode": result.mode,
        "collection": result.collection,
        "ks": result.ks,
        "labels": result.labels,
        "metrics": {key: meaning for key, _, meaning in RECALL_METRICS},
        "summary": result.summary,
        "notes": result.notes,
    }


def write_outputs(result: EvalResult, out_dir: Path, markdown: str) -> dict[str, Path]:
    """Write every output file; return them by kind."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "results": out_dir / "results.jsonl",
        "summary": out_dir / "summary.json",
        "run": out_dir / "run.json",
        "report": out_dir / "report.md",
        "plot": out_dir / "recall_at_k.png",
    }
    with files["results"].open("w", encoding="utf-8") as fh:
        for row in result.rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    files["summary"].write_text(
        json.dumps(result.summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    run = {
        "mode": result.mode,
        "collection": result.collection,
        "ks": result.ks,
        "max_iters": result.max_iters,
        "labels": result.labels,
        "questions": len({r["id"] for r in result.rows}),
        "seconds": round(result.seconds, 3),
        "load": result.load.to_dict() if result.load else None,
        "notes": result.notes,
    }
    files["run"].write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    files["report"].write_text(markdown, encoding="utf-8")
    plot_recall_at_k(result, files["plot"])
    if any(label.startswith("deep[max_iter=") for label in result.labels):
        files["iter_plot"] = out_dir / "recall_vs_max_iter.png"
        plot_recall_vs_max_iter(result, files["iter_plot"])
    return files


def _figure() -> Any:
    # Figure without pyplot: no global backend or state, safe in threads and servers (Agg).
    # Lazy: matplotlib is the optional `eval` extra, needed only for the plots.
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise DeepSearcherError(
            "the eval plots need matplotlib, which is not installed",
            "pip install 'deepsearcher[eval]' (the tables and JSON files are already written)",
        ) from exc

    return Figure(figsize=(6.4, 4.2), dpi=100, layout="constrained")


def plot_recall_at_k(result: EvalResult, path: Path) -> None:
    """Document-level recall@k (solid) and chunk-level recall@k (dashed) against k, one colour
    per agent/mode."""
    fig = _figure()
    ax = fig.add_subplot()
    ks = result.ks
    for i, label in enumerate(result.labels):
        metrics = result.summary[label]
        color = f"C{i % 10}"
        recall = [metrics.get(f"doc_recall@{k}") for k in ks]
        hops = [metrics.get(f"chunk_recall@{k}") for k in ks]
        ax.plot(
            ks,
            [float("nan") if v is None else v for v in recall],
            "o-",
            color=color,
            label=f"{label} doc recall",
        )
        ax.plot(
            ks,
            [float("nan") if v is None else v for v in hops],
            "s--",
            color=color,
            alpha=0.7,
            label=f"{label} chunk recall",
        )
    ax.set_xticks(ks)
    ax.set_xlabel("k (distinct documents; chunks for chunk recall)")
    ax.set_ylabel("share of gold documents")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(f"recall@k — {result.collection}")
    ax.legend(fontsize="small")
    fig.savefig(path, format="png")


def plot_recall_vs_max_iter(result: EvalResult, path: Path) -> None:
    """Deep search recall@k and all-hops@k (largest k) against max_iter; naive as a line."""
    fig = _figure()
    ax = fig.add_subplot()
    k = max(result.ks)
    iters = result.max_iters
    deep = [result.summary.get(f"deep[max_iter={n}]", {}) for n in iters]
    for key, style, name in (
        (f"doc_recall@{k}", "o-", "doc recall"),
        (f"doc_all_hops@{k}", "s--", "doc all hops"),
    ):
        ax.plot(
            iters,
            [m.get(key, float("nan")) for m in deep],
            style,
            color="C0",
            label=f"deep {name}@{k}",
        )
        naive = result.summary.get("naive", {}).get(key)
        if naive is not None:
            ax.axhline(naive, color="C1", linestyle=style[1:], label=f"naive {name}@{k}")
    ax.set_xticks(iters)
    ax.set_xlabel("max_iter")
    ax.set_ylabel("share of gold documents")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(f"deep search: recall vs max_iter — {result.collection}")
    ax.legend(fontsize="small")
    fig.savefig(path, format="png")
