"""Incremental, idempotent, crash-safe loading into real Milvus Lite with the real model."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from deepsearcher.cli import app
from deepsearcher.config import Settings
from deepsearcher.errors import IncompatibleCollectionError
from deepsearcher.ingest import Ingestor
from deepsearcher.store import LocalLoadLeases


def _corpus(root: Path, n: int = 6, paragraphs: int = 3) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        body = "\n\n".join(
            f"Document {i} paragraph {p}: the warehouse robot fleet {i} moved {p * 7 + i} pallets "
            f"and the maintenance crew {p} inspected conveyor line {i}." * 3
            for p in range(paragraphs)
        )
        (root / f"doc_{i:03d}.txt").write_text(body, encoding="utf-8")
    return root


def _chunk_ids(ds: Any, collection: str) -> list[str]:
    rows = ds.store._client.query(collection, filter="", output_fields=["id"], limit=16384)
    return sorted(r["id"] for r in rows)


def test_reload_skips_unchanged_and_replaces_changed(tmp_path: Path, make_searcher: Any) -> None:
    docs = _corpus(tmp_path / "docs")
    ds = make_searcher()
    first = ds.load([docs], "c")
    assert (first.files_new, first.files_changed, first.files_unchanged, first.files_failed) == (
        6,
        0,
        0,
        0,
    )
    assert first.chunks_added == first.chunks_total > 6
    ids_before = _chunk_ids(ds, "c")

    again = ds.load([docs], "c")
    assert (again.files_new, again.files_unchanged, again.chunks_added) == (0, 6, 0)
    assert _chunk_ids(ds, "c") == ids_before

    # Change one file: its old chunks go, its new chunks come, nothing else moves.
    target = docs / "doc_002.txt"
    old_chunks = [i for i in ids_before]
    target.write_text(
        "A completely rewritten report about solar panels on the roof.", encoding="utf-8"
    )
    changed = ds.load([docs], "c")
    assert (changed.files_changed, changed.files_unchanged) == (1, 5)
    assert changed.chunks_added == 1 and changed.chunks_removed >= 1
    assert changed.chunks_total == first.chunks_total - changed.chunks_removed + 1
    hits = ds.store.search("c", ds.embedder.embed(["solar panels on the roof"]), 1)[0]
    assert hits[0].source == str(target.resolve()) and "solar" in hits[0].text
    assert len(set(_chunk_ids(ds, "c")) - set(old_chunks)) == 1


def test_force_reembeds_without_duplicates_and_prune_removes_deleted(
    tmp_path: Path, make_searcher: Any
) -> None:
    docs = _corpus(tmp_path / "docs", n=3)
    ds = make_searcher()
    first = ds.load([docs], "c")
    forced = ds.load([docs], "c", force=True)
    assert forced.files_changed == 3 and forced.chunks_total == first.chunks_total
    (docs / "doc_001.txt").unlink()
    kept = ds.load([docs], "c")  # without --prune the chunks stay
    assert kept.chunks_total == first.chunks_total
    pruned = ds.load([docs], "c", prune=True)
    assert pruned.chunks_removed > 0
    assert pruned.chunks_total == first.chunks_total - pruned.chunks_removed
    assert str((docs / "doc_001.txt").resolve()) not in ds.store.manifest.file_records("c")


class _ThreadRecordingEmbedder:
    """The real embedder, noting which thread ran each encode call."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.threads: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Any) -> Any:
        self.threads.append(threading.get_ident())
        return self.inner.embed(texts)


def test_every_encode_batch_runs_on_one_thread(
    tmp_path: Path, make_searcher: Any, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each thread that runs the encoder keeps its own malloc arena of freed activations; batches
    # spread over a thread pool raised the PDF benchmark's peak RSS from 1.5 to 2.2 GB.
    import deepsearcher.load_pipeline as pipeline

    monkeypatch.setattr(pipeline, "_EMBED_BATCH", 3)
    monkeypatch.setattr(pipeline, "_MAX_BUFFERED", 6)
    recorder = _ThreadRecordingEmbedder(embedder)
    ds = make_searcher(embedder=recorder)
    report = ds.load([_corpus(tmp_path / "docs", n=6)], "c")
    assert report.files_new == 6 and report.chunks_total >= 12
    assert len(recorder.threads) >= 4  # several batches, so several chances to switch threads
    assert len(set(recorder.threads)) == 1
    assert recorder.threads[0] != threading.get_ident()  # and never on the event loop's thread


def test_bad_files_are_reported_and_the_rest_loads(tmp_path: Path, make_searcher: Any) -> None:
    docs = _corpus(tmp_path / "docs", n=2)
    (docs / "empty.txt").write_bytes(b"")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\n this is not really a pdf \x00\x01")
    (docs / "junk.txt").write_bytes(os.urandom(4096))
    ds = make_searcher()
    report = ds.load([docs], "c")
    assert report.files_new == 2 and report.files_failed == 3
    reasons = {Path(f.path).name: f.reason for f in report.failures}
    assert set(reasons) == {"empty.txt", "broken.pdf", "junk.txt"}
    assert all(r and "\n" not in r for r in reasons.values())


def test_other_embedder_gets_rebuild_hint(
    tmp_path: Path, make_searcher: Any, settings: Settings
) -> None:
    docs = _corpus(tmp_path / "docs", n=1)
    make_searcher().load([docs], "c")
    other = settings.model_copy(deep=True)
    other.chunking.chunk_size = 120
    with pytest.raises(IncompatibleCollectionError) as err:
        make_searcher(other).load([docs], "c")
    assert "chunk_size" in err.value.message and "--rebuild" in err.value.hint
    rebuilt = make_searcher(other).load([docs], "c", rebuild=True)
    assert rebuilt.files_new == 1


def test_description_is_kept_and_updated(tmp_path: Path, make_searcher: Any) -> None:
    docs = _corpus(tmp_path / "docs", n=1)
    ds = make_searcher()
    ds.load([docs], "c", description="warehouse reports")
    ds.load([docs], "c")
    assert ds.store.get_meta("c").description == "warehouse reports"
    ds.load([docs], "c", description="fleet reports")
    assert ds.store.get_meta("c").description == "fleet reports"


@pytest.mark.slow
def test_killed_load_then_rerun_equals_clean_load(
    tmp_path: Path, make_searcher: Any, settings: Settings
) -> None:
    # Manifest records are written once per 256-chunk insert batch, so the corpus must span
    # several batches (~600 one-chunk files: three) for the kill to land between them.
    docs = _corpus(tmp_path / "docs", n=600, paragraphs=1)
    db = tmp_path / "killed.db"
    env = {
        **os.environ,
        "DEEPSEARCHER_VECTOR_STORE__URI": str(db),
        "DEEPSEARCHER_LOADING__PARSE_WORKERS": "1",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from deepsearcher.cli import main; main()",
            "load",
            str(docs),
            "--collection",
            "c",
            "-v",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=tmp_path,
        text=True,
    )
    assert proc.stdout is not None
    loaded_lines = 0
    deadline = time.time() + 240
    for line in proc.stdout:
        if line.lstrip().startswith("loaded"):
            loaded_lines += 1
            if loaded_lines >= 5:
                break
        assert time.time() < deadline
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert loaded_lines >= 5, "the load finished before it could be killed"

    killed_settings = settings.model_copy(deep=True)
    killed_settings.vector_store.uri = str(db)
    ds = make_searcher(killed_settings)
    partial = ds.store.manifest.file_records("c")
    assert 5 <= len(partial) < 600  # really killed mid-run
    rerun = ds.load([docs], "c")
    assert rerun.files_unchanged == len(
        partial
    ) and rerun.files_new + rerun.files_changed == 600 - len(partial)

    clean = make_searcher()
    clean_report = clean.load([docs], "c")
    assert rerun.chunks_total == clean_report.chunks_total
    assert _chunk_ids(ds, "c") == _chunk_ids(clean, "c")


def test_cli_load_json_and_collections(tmp_path: Path) -> None:
    docs = _corpus(tmp_path / "docs", n=2)
    (docs / "empty.md").write_text("")
    runner = CliRunner()
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "cli.db")}
    res = runner.invoke(
        app,
        ["load", str(docs), "--collection", "notes", "--description", "ops notes", "--json"],
        env=env,
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"collection", "files", "chunks", "failures", "seconds"}
    assert out["files"] == {"new": 2, "changed": 0, "unchanged": 0, "failed": 1}
    assert out["chunks"]["added"] == out["chunks"]["total"] > 0
    assert out["failures"][0]["path"].endswith("empty.md") and out["failures"][0]["reason"]

    res = runner.invoke(app, ["load", str(docs), "--collection", "notes"], env=env)
    assert res.exit_code == 0 and "unchanged" in res.stdout

    res = runner.invoke(app, ["collections", "--json"], env=env)
    listed = json.loads(res.stdout)
    assert listed == [
        {
            "name": "notes",
            "chunks": out["chunks"]["total"],
            "files": 2,
            "embedding_model": "multilingual-e5-small",  # the default embedder
            "description": "ops notes",
        }
    ]

    res = runner.invoke(app, ["collections", "drop", "notes"], env=env, input="n\n")
    assert res.exit_code == 1
    res = runner.invoke(app, ["collections", "drop", "notes", "--yes"], env=env)
    assert res.exit_code == 0
    res = runner.invoke(app, ["collections", "--json"], env=env)
    assert json.loads(res.stdout) == []


def test_cli_errors_are_one_line_with_hint(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "cli.db")}
    res = runner.invoke(app, ["load", str(tmp_path / "nope")], env=env)
    assert res.exit_code == 1
    assert (
        res.stderr.startswith("error: ")
        and "hint: " in res.stderr
        and "Traceback" not in res.output
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("llm:\n  tempreature: 1\n")
    res = runner.invoke(app, ["load", str(tmp_path), "--config", str(bad)], env=env)
    assert res.exit_code == 1 and "llm.tempreature" in res.stderr
    only_bad = tmp_path / "onlybad"
    only_bad.mkdir()
    (only_bad / "a.txt").write_bytes(b"")
    res = runner.invoke(app, ["load", str(only_bad)], env=env)
    assert res.exit_code == 1 and "nothing could be loaded" in res.stderr


@pytest.mark.slow
def test_locked_database_names_the_holder(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from pymilvus import MilvusClient; import time; MilvusClient({str(db)!r}); print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        res = CliRunner().invoke(
            app,
            ["load", str(_corpus(tmp_path / "docs", n=1))],
            env={"DEEPSEARCHER_VECTOR_STORE__URI": str(db)},
        )
        assert res.exit_code == 1
        assert "in use by another process" in res.stderr and str(holder.pid) in res.stderr
        assert "/v1/load" in res.stderr  # the hint says how to load through the server instead
    finally:
        holder.kill()
        holder.wait()


# The last commit whose deepsearcher/store.py wrote chunks and manifest in one class, before the
# store became a package with a separate file manifest.
_STORE_BEFORE_SPLIT = "564b3bb"


def _store_before_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    root = Path(__file__).resolve().parents[1]
    try:
        src = subprocess.run(
            ["git", "-C", str(root), "show", f"{_STORE_BEFORE_SPLIT}:deepsearcher/store.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs the git history: the store module from before the split")
    path = tmp_path / "store_before_split.py"
    path.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("store_before_split", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_collection_written_before_the_store_split_loads_incrementally(
    tmp_path: Path,
    settings: Settings,
    embedder: Any,
    make_searcher: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = _store_before_split(tmp_path, monkeypatch)
    docs = _corpus(tmp_path / "docs", n=3)
    old_store = old.MilvusStore(settings.vector_store)
    try:
        # The old class was chunks and manifest in one: it serves as both.
        ingestor = Ingestor(
            settings, old_store, lambda: embedder, manifest=old_store, leases=LocalLoadLeases()
        )
        first = asyncio.run(ingestor.aload([docs], "c"))
    finally:
        old_store.close()
    assert first.files_new == 3

    ds = make_searcher()
    again = ds.load([docs], "c")  # the manifest written by the old code is read
    assert (again.files_new, again.files_changed, again.files_unchanged) == (0, 0, 3)
    assert again.chunks_added == 0 and again.chunks_total == first.chunks_total

    (docs / "doc_001.txt").write_text("Conveyor belts are inspected every Monday.", "utf-8")
    changed = ds.load([docs], "c", prune=True)
    assert (changed.files_changed, changed.files_unchanged) == (1, 2)
    record = ds.store.manifest.file_records("c")[str((docs / "doc_001.txt").resolve())]
    assert record.chunks == 1


def test_a_file_kept_in_two_folders_is_found_once(tmp_path: Path, make_searcher: Any) -> None:
    docs = _corpus(tmp_path / "docs", n=4)
    copy = tmp_path / "docs" / "archive"
    copy.mkdir()
    for name in ("doc_001.txt", "doc_002.txt"):
        (copy / name).write_text((docs / name).read_text(encoding="utf-8"), encoding="utf-8")
    ds = make_searcher()
    report = ds.load([docs], "c")
    assert report.files_new == 6  # both copies are loaded: each is a file the user has
    top_k = 4
    hits = asyncio.run(
        ds.asearch("warehouse robot fleet 1 pallets", collections=["c"], top_k=top_k)
    )
    texts = [" ".join(h.text.split()) for h in hits.hits]
    # Each passage once, best copy first, and still top_k of them: the copies' places are
    # taken by other passages, not left empty.
    assert len(texts) == len(set(texts)) == top_k
    stored = ds.store.search(
        "c", ds.embedder.embed_query(["warehouse robot fleet 1 pallets"]), top_k
    )
    assert len({" ".join(h.text.split()) for h in stored[0]}) < top_k  # the store alone repeats


def _parts_table(root: Path) -> Path:
    """A parts list as a spreadsheet export: one file per block of rows, every row alike but
    for its numbers, so neither the embedder nor BM25 ("b", "14", "03") can rank one bin."""
    root.mkdir(parents=True)
    bins = [f"B-{a}-{b:02d}" for a in (12, 13, 14, 15) for b in (1, 3, 5)]
    suppliers = ["Kuopio Metal Oy", "Gislaved Polymer AB", "Tartu Plast OU", "Huajing Sensor"]
    for i, bin_ in enumerate(bins):
        supplier = suppliers[i % len(suppliers)]
        row = f"Part NM-{40100 + i} | Valve | Supplier {supplier} | Bin {bin_} | On hand {i * 7}"
        (root / f"parts_{i:02d}.txt").write_text(f"Sheet: Parts\n{row}\n", encoding="utf-8")
    return root


def test_a_passage_stating_the_questions_identifier_comes_first(
    tmp_path: Path, make_searcher: Any
) -> None:
    ds = make_searcher()
    ds.load([_parts_table(tmp_path / "parts")], "c")
    question = "Who is the supplier of the part stored in bin B-14-03?"
    hits = asyncio.run(ds.asearch(question, collections=["c"], top_k=5)).hits
    assert "B-14-03" in hits[0].text
    assert sum("B-14-03" in h.text for h in hits) == 1
    # Without the pin the row is not first: the store ranks rows that share "14" or "03".
    stored = ds.store.search("c", ds.embedder.embed_query([question]), 5, texts=[question])
    assert "B-14-03" not in stored[0][0].text


def test_an_identifier_many_passages_share_moves_only_two_of_them() -> None:
    from deepsearcher.retrieval import pinned
    from deepsearcher.types import Hit

    hits = [Hit(id=str(i), text=t, source=f"/d/{i}.txt", score=1.0 - i / 10, collection="c")
            for i, t in
            enumerate(["the plant", "ISO-9001 audit", "ISO-9001 scope", "ISO-9001 owner",
                       "ticket SR-10431: priority P2"])]  # fmt: skip
    order = [h.id for h in pinned("Who owns the ISO-9001 audit for ticket sr-10431?", hits)]
    assert order == ["1", "2", "4", "0", "3"]
    assert [h.id for h in pinned("Who owns the audit in Q3 and v2?", hits)] == list("01234")
