"""`loading.engine: ray` on a real local Ray instance: the same collection as the local engine,
with 1 or 2 workers, and the same incremental manifest semantics."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from deepsearcher.config import Settings, load_settings
from deepsearcher.types import LoadReport
from tests.fixture_files import make_pdf

ray = pytest.importorskip("ray", reason="the 'scale' extra (ray[data]) is not installed")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    """One local Ray instance for the module (starting one takes seconds); the engine reuses
    an initialised Ray and leaves it running."""
    from deepsearcher.ingest_ray import init_ray

    settings = load_settings(overrides={"loading": {"ray_workers": 2}}, environ={})
    assert init_ray(settings)
    yield
    ray.shutdown()


def _corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(5):
        body = "\n\n".join(
            f"Report {i}, section {p}: the warehouse robot fleet {i} moved {p * 7 + i} pallets "
            f"and the maintenance crew {p} inspected conveyor line {i}. " * 4
            for p in range(4)
        )
        (root / f"report_{i}.txt").write_text(body, encoding="utf-8")
    make_pdf(
        root / "manual.pdf",
        ["The NR-7 robot is assembled in Gdansk.", "Its battery is replaced every 400 hours."],
    )
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj garbage")
    return root


def _settings(uri: str, engine: str = "local", workers: int = 1) -> Settings:
    return load_settings(
        overrides={
            "vector_store": {"uri": uri},
            "cache": {"enabled": False},
            "loading": {"engine": engine, "ray_workers": workers},
        },
        environ={},
    )


def _contents(ds: Any, collection: str) -> dict[str, Any]:
    rows = ds.store._client.query(
        collection, filter="", output_fields=["id", "source", "text", "vector"], limit=16384
    )
    records = ds.store.manifest.file_records(collection)
    return {
        "chunks": {r["id"]: (r["source"], r["text"]) for r in rows},
        "vectors": {r["id"]: np.asarray(r["vector"], dtype=np.float32) for r in rows},
        "manifest": {s: (r.doc_id, r.content_hash, r.chunks) for s, r in sorted(records.items())},
    }


def _counts(report: LoadReport) -> tuple[int, int, int, int]:
    return (report.files_new, report.files_changed, report.files_unchanged, report.files_failed)


def _ray_workers(records: list[logging.LogRecord]) -> list[set[int]]:
    """The worker pids each Ray load reported (its closing log line)."""
    return [
        set(cast(list[int], r.args[2]))
        for r in records
        if str(r.msg).startswith("ray: ") and isinstance(r.args, tuple)
    ]


def test_ray_with_one_and_two_workers_gives_the_local_collection(
    tmp_path: Path, milvus_server: str, make_searcher: Any, caplog: pytest.LogCaptureFixture
) -> None:
    docs = _corpus(tmp_path / "docs")
    results = {}
    for name, engine, workers in (("local", "local", 1), ("ray1", "ray", 1), ("ray2", "ray", 2)):
        ds = make_searcher(_settings(milvus_server, engine, workers))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="deepsearcher.ingest_ray"):
            report = ds.load([docs], name)
        # The files were parsed and embedded by Ray's worker processes, not in this one.
        ran = _ray_workers(caplog.records)
        if engine == "local":
            assert ran == []
        else:
            assert len(ran) == 1 and 1 <= len(ran[0]) <= workers, (name, ran)
            assert os.getpid() not in ran[0]
        # The corrupt PDF is skipped and reported; every other file loads.
        assert _counts(report) == (6, 0, 0, 1), (name, report)
        assert [f.path for f in report.failures] == [str((docs / "broken.pdf").resolve())]
        assert report.chunks_added == report.chunks_total > 6
        results[name] = (report, _contents(ds, name))

    local = results["local"][1]
    for name in ("ray1", "ray2"):
        report, got = results[name]
        assert report.failures[0].reason == results["local"][0].failures[0].reason
        assert got["chunks"] == local["chunks"], name  # same ids, sources and texts
        assert got["manifest"] == local["manifest"], name
        for cid, vec in local["vectors"].items():
            np.testing.assert_allclose(got["vectors"][cid], vec, atol=1e-4, err_msg=name)


def test_ray_rerun_skips_unchanged_and_replaces_a_changed_file(
    tmp_path: Path, make_searcher: Any
) -> None:
    docs = _corpus(tmp_path / "docs")
    (docs / "broken.pdf").unlink()
    ds = make_searcher(_settings(str(tmp_path / "milvus.db"), "ray", 2))
    first = ds.load([docs], "c")
    assert _counts(first) == (6, 0, 0, 0)
    before = _contents(ds, "c")

    again = ds.load([docs], "c")
    assert _counts(again) == (0, 0, 6, 0) and again.chunks_added == 0
    assert _contents(ds, "c")["chunks"] == before["chunks"]

    target = docs / "report_2.txt"
    target.write_text("A rewritten report about solar panels on the roof.", encoding="utf-8")
    changed = ds.load([docs], "c")
    assert _counts(changed) == (0, 1, 5, 0)
    after = _contents(ds, "c")
    source = str(target.resolve())
    old_ids = {i for i, (s, _t) in before["chunks"].items() if s == source}
    new = {i: t for i, (s, t) in after["chunks"].items() if s == source}
    assert len(new) == 1 and "solar panels" in next(iter(new.values()))
    assert not old_ids & set(new)  # the old chunks are gone, not left beside the new one
    assert after["manifest"][source][2] == 1
    others = {i: v for i, v in before["chunks"].items() if v[0] != source}
    assert {i: v for i, v in after["chunks"].items() if v[0] != source} == others
    hits = ds.store.search("c", ds.embedder.embed(["solar panels on the roof"]), 1)[0]
    assert hits[0].source == source


def test_cli_engine_ray_without_ray_installed_says_which_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from deepsearcher.cli import app

    docs = _corpus(tmp_path / "docs")
    monkeypatch.setenv("DEEPSEARCHER_VECTOR_STORE__URI", str(tmp_path / "m.db"))
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    result = CliRunner().invoke(app, ["load", str(docs), "--engine", "ray"])
    assert result.exit_code == 1
    assert "error: loading.engine ray needs Ray Data, which is not installed" in result.output
    assert "hint: pip install 'deepsearcher[scale]'" in result.output
