"""A store that a full disk cannot break: Milvus Lite writes a collection's index files the
first time it loads the collection, and a write that stopped part-way used to fail every later
command on the database. Real Milvus Lite in tmp_path; the cut file is a real prefix of the
real index file, as a full disk leaves it, and the slow test fills a real small filesystem."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

from deepsearcher.config import Settings
from deepsearcher.server import create_app
from tests.sample_docs import write_docs
from tests.server_fixtures import _uvicorn

REPO = Path(__file__).resolve().parent.parent
OTHER_DOCS = {
    "canteen.md": "# Canteen\n\nThe canteen serves lunch from noon to two. Soup costs 3 euros.\n",
    "parking.md": "# Parking\n\nStaff park in garage B. Visitors get a ticket at reception.\n",
}


def _index_files(db: Path, name: str) -> list[Path]:
    return sorted((db / "collections" / name / "partitions").glob("*/indexes/*.idx"))


def _close(ds: Any) -> None:
    """Close ``ds`` and its database as the end of its process would: Milvus Lite serves a
    database in-process until the process exits, and the next open reads it from disk."""
    from milvus_lite.server_manager import server_manager_instance

    ds.close()
    server_manager_instance.release_server(ds.settings.vector_store.uri)


def _two_collections(tmp_path: Path, make_searcher: Any, settings: Settings) -> Path:
    """Collections 'a' and 'b' loaded and closed (which writes their index files)."""
    ds = make_searcher(settings)
    assert ds.load([write_docs(tmp_path / "docs-a")], "a").files_new == 4
    assert ds.load([write_docs(tmp_path / "docs-b", OTHER_DOCS)], "b").files_new == 2
    _close(ds)
    return Path(settings.vector_store.uri)


def test_an_index_file_cut_short_is_rebuilt_on_the_next_open(
    tmp_path: Path, make_searcher: Any, settings: Settings
) -> None:
    db = _two_collections(tmp_path, make_searcher, settings)
    [index] = _index_files(db, "a")
    whole = index.read_bytes()
    index.write_bytes(whole[: len(whole) * 2 // 3])  # what the full disk left of the write

    ds = make_searcher(settings)
    infos = ds.collections()  # failed before: "This file contains pickled (object) data"
    assert [(i.name, i.rows, i.error) for i in infos] == [("a", 4, None), ("b", 2, None)]
    assert index.stat().st_size == len(whole)  # written again, whole
    answer = ds.query("When does the canteen serve lunch?", collections=["a", "b"])
    assert any("noon" in s.text for s in answer.sources)
    assert not any("could not be loaded" in n for n in answer.notes)


def test_a_collection_that_cannot_be_opened_fails_alone(
    tmp_path: Path, make_searcher: Any, settings: Settings
) -> None:
    """An index that cannot be read nor removed (its file is a folder here) leaves 'a' broken:
    the server lists it with its error, refuses a search naming it with that error, and
    answers everything else from 'b'; a rebuild of 'a' repairs it."""
    db = _two_collections(tmp_path, make_searcher, settings)
    [index] = _index_files(db, "a")
    index.unlink()
    index.mkdir()
    ds = make_searcher(settings)
    with _uvicorn(create_app(ds, settings, upload_dir=tmp_path / "uploads")) as url:
        models = {m["id"]: m for m in httpx.get(f"{url}/v1/models").json()["data"]}
        assert "error" not in models["b"] and models["b"]["chunks"] == 2
        assert "collection 'a' could not be loaded" in models["a"]["error"]
        assert "--collection a --rebuild" in models["a"]["error"]
        assert str(tmp_path) not in models["a"]["error"]  # no server path to a client

        named = httpx.post(f"{url}/v1/query", json={"question": "lunch?", "collections": ["a"]})
        assert named.status_code == 503, named.text
        assert "collection 'a' could not be loaded" in named.json()["error"]["message"]
        unnamed = httpx.post(f"{url}/v1/query", json={"question": "When is lunch served?"})
        assert unnamed.status_code == 200, unnamed.text
        answer = unnamed.json()
        assert answer["sources"] and {s["collection"] for s in answer["sources"]} == {"b"}
        assert any("collection 'a' could not be loaded" in n for n in answer["notes"])

    report = ds.load([tmp_path / "docs-a"], "a", rebuild=True)
    assert report.files_new == 4
    assert [(i.name, i.error) for i in ds.collections()] == [("a", None), ("b", None)]


@pytest.fixture
def namespace_tmpfs() -> list[str]:
    """The command prefix that runs a process in its own user and mount namespaces, where it
    may mount a small tmpfs as an unprivileged user; skipped where the kernel forbids it."""
    prefix = ["unshare", "--user", "--map-root-user", "--mount"]
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(
        [*prefix, "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"], capture_output=True
    )
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.decode(errors='replace')[:200]}")
    return prefix


# Runs in the namespace: the database copied onto a small tmpfs, the disk filled, each step's
# outcome printed as one JSON line.
_FULL_DISK_STEPS = textwrap.dedent(
    """
    import json, os, shutil, subprocess, sys
    from pathlib import Path
    from typer.testing import CliRunner
    from deepsearcher.cli import app

    source, mount = Path(sys.argv[1]), Path(sys.argv[2])
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    db = mount / "milvus.db"
    shutil.copytree(source, db)
    free = os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize
    with open(mount / "filler", "wb") as f:
        os.posix_fallocate(f.fileno(), 0, free)
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(db)}

    def step(name, args):
        res = CliRunner().invoke(app, args, env=env)
        index = sorted(str(p.relative_to(db)) for p in db.rglob("*.idx"))
        print(json.dumps({"step": name, "exit": res.exit_code, "out": res.stdout,
                          "err": res.stderr, "index": index}), flush=True)

    step("full", ["collections", "--json"])
    step("search-full", ["query", "When does the canteen serve lunch?", "--json"])
    (mount / "filler").unlink()
    step("freed", ["collections", "--json"])
    step("search-freed", ["query", "What does soup cost in the canteen?", "--json"])
    """
)


def test_a_full_disk_breaks_one_collection_and_freeing_space_repairs_it(
    tmp_path: Path, make_searcher: Any, settings: Settings, namespace_tmpfs: list[str]
) -> None:
    """Collection 'b' was opened before the disk filled (its index is on disk), 'a' was not:
    with the disk full, opening 'a' fails alone, saying why and what to do, leaving no index
    file half-written, while 'b' is listed and searched; once space is freed, the next command
    builds a's index and everything works."""
    db = _two_collections(tmp_path, make_searcher, settings)
    for index in _index_files(db, "a") + _index_files(db, "a__files"):
        index.unlink()  # derived from the rows: Milvus Lite writes them when it next loads 'a'
    mount = tmp_path / "mnt"
    mount.mkdir()
    run = subprocess.run(
        [*namespace_tmpfs, sys.executable, "-c", _FULL_DISK_STEPS, str(db), str(mount)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PATH": "/usr/sbin:/usr/bin:/bin"},
    )
    steps = {s["step"]: s for s in map(json.loads, run.stdout.splitlines())}
    assert set(steps) == {"full", "search-full", "freed", "search-freed"}, run.stderr[-2000:]

    full = steps["full"]
    assert full["exit"] == 1, full
    listed = {c["name"]: c for c in json.loads(full["out"])}
    assert listed["b"]["chunks"] > 0 and "error" not in listed["b"]
    assert "the disk is full" in listed["a"]["error"], listed["a"]
    assert "free space" in listed["a"]["hint"] and "deepsearcher collections" in listed["a"]["hint"]
    assert "error: collection 'a' could not be loaded: the disk is full" in full["err"]
    # Nothing half-written is left: a's index files are absent, b's are whole.
    assert full["index"] and all(p.startswith("collections/b") for p in full["index"])

    searched = steps["search-full"]
    assert searched["exit"] == 0, searched
    answer = json.loads(searched["out"])
    assert any("noon" in s["text"] for s in answer["sources"])
    assert any("collection 'a' could not be loaded" in n for n in answer["notes"])

    freed = steps["freed"]
    assert freed["exit"] == 0, freed
    assert [(c["name"], "error" in c) for c in json.loads(freed["out"])] == [
        ("a", False),
        ("b", False),
    ]
    assert any(p.startswith("collections/a/") for p in freed["index"])
    again = steps["search-freed"]
    assert again["exit"] == 0 and "3 euros" in again["out"], again
