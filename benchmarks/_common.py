"""Helpers shared by the benchmark scripts: paths, the machine line, percentiles, markdown."""

from __future__ import annotations

import os
import platform
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
# The shared evaluation data sits next to the checkout (/work/shared/eval for /work/main).
EVAL_DIR = Path(__file__).resolve().parents[2] / "shared" / "eval"


def prepare_imports() -> None:
    """Make the checkout importable (package, tests.llm_server) and keep the model offline."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def machine() -> str:
    """One line naming the machine the figures come from."""
    ram_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            names = [line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")]
        if names:
            cpu = names[0]
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), {ram_gb:.0f} GB RAM, Python {platform.python_version()}"
    )


def percentile(values: Sequence[float], q: float) -> float:
    """Inclusive percentile ``q`` (0-100); NaN for no values."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str) -> str:
    """``align`` holds one of l/r per column."""
    marks = {"l": ":---", "r": "---:"}
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(marks[a] for a in align) + "|",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"
