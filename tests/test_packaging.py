"""What installing and importing the package does to a user's process: cheap imports, no
global state changed, optional extras that fail with a hint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepsearcher.errors import DeepSearcherError

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ["deepsearcher.searcher", "deepsearcher.ingest", "pymilvus", "torch", "unstructured"]


def _run(code: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter with this checkout first on the path; it prints JSON."""
    base = {**os.environ, **(env or {})}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), base.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", code], env=base, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_import_deepsearcher_loads_nothing_heavy_until_a_name_is_used() -> None:
    res = _run(
        "import json, sys, deepsearcher\n"
        f"before = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "cls = deepsearcher.DeepSearcher\n"
        "print(json.dumps({'before': before, 'cls': cls.__module__,\n"
        "                  'all': sorted(deepsearcher.__all__)}))\n"
    )
    assert res["before"] == []
    assert res["cls"] == "deepsearcher.searcher"
    assert "DeepSearcher" in res["all"] and "load_settings" in res["all"]


@pytest.mark.slow
def test_loaders_import_without_the_pipeline_above_them() -> None:
    res = _run(
        "import json, sys, loaders\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('deepsearcher.'))))\n"
    )
    # The bottom layer only: the settings (schema, provider names, sources), errors and types.
    bottom = {"deepsearcher.errors", "deepsearcher.types"}
    bottom |= {
        f"deepsearcher.config{m}"
        for m in ("", ".answering", ".fields", ".registry", ".schema", ".sources")
    }
    assert set(res) <= bottom


def test_unknown_package_attribute_is_an_attribute_error() -> None:
    import deepsearcher

    with pytest.raises(AttributeError):
        _ = deepsearcher.NoSuchThing  # type: ignore[attr-defined]


@pytest.mark.slow
def test_loading_the_packaged_minilm_leaves_the_environment_alone() -> None:
    # In a fresh process without the offline variables the tests set, and with every
    # non-loopback connection refused: the packaged model loads from disk and the process's
    # environment (HF_HUB_OFFLINE included) is what it was before.
    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    code = (
        "import json, os, socket\n"
        "def refuse(self, address):\n"
        "    raise OSError(f'network used: {address!r}')\n"
        "socket.socket.connect = refuse\n"
        "from deepsearcher.config import Settings\n"
        "from deepsearcher.embedding import SentenceTransformerEmbedder\n"
        # torch sets a few variables of its own when imported: snapshot after that.
        "import sentence_transformers\n"
        "before = dict(os.environ)\n"
        "e = SentenceTransformerEmbedder(\n"
        "    Settings(embedding={'provider': 'sentence-transformers'}).embedding)\n"
        "after = dict(os.environ)\n"
        "changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))\n"
        "print(json.dumps({'changed': changed, 'dim': e.dimension}))\n"
    )
    base = {**env, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=base, capture_output=True, text=True, check=True
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res == {"changed": [], "dim": 384}


def test_eval_plots_without_matplotlib_say_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deepsearcher.evaluation import report

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import now raises ImportError
    with pytest.raises(DeepSearcherError) as err:
        report._figure()
    assert "matplotlib" in err.value.message
    assert "deepsearcher[eval]" in (err.value.hint or "")
