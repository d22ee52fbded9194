"""Loads that do not collide: real ``deepsearcher load`` processes on one Milvus server
(``milvus-lite server``), started together, on the same and on overlapping folders, one killed
with ``kill -9`` mid-load, end with exactly what one clean load gives. The loaders embed through
a local OpenAI-compatible embeddings server (word hashing: fast and deterministic) that can hold
requests back, so a test sees from outside when a loader holds the lease mid-load."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from deepsearcher.cli import app
from deepsearcher.config import LoadingSettings, Settings, load_settings
from deepsearcher.errors import LoadLeaseLostError
from deepsearcher.ingest import Ingestor
from deepsearcher.load_lease import acquire_load_lease
from deepsearcher.searcher import DeepSearcher
from deepsearcher.store import LeaseClaim, LocalLoadLeases, MilvusLoadLeases, MilvusStore
from deepsearcher.store._client import MilvusConnection
from tests.memory_index import WordHashEmbedder
from tests.milvus_server import running_milvus_server

REPO = Path(__file__).resolve().parents[1]
TTL_S = 5.0  # short, so a killed loader is taken over soon; long enough for a busy CI box
SETTLE_S = 0.5
_TOPICS = ["robot", "battery", "office", "travel", "invoice", "harbour", "garden", "engine"]


# -- fixtures: one Milvus server and one embeddings server for the module ---------------------


@pytest.fixture(scope="module")
def server_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_milvus_server(tmp_path_factory.mktemp("milvus")) as uri:
        yield uri


class _Embeddings:
    """Word-hash embeddings over HTTP. ``hold_after(n)``: requests past the n-th wait until
    ``release()``; ``held`` counts the requests waiting."""

    def __init__(self) -> None:
        self.embedder = WordHashEmbedder()
        self.cond = threading.Condition()
        self.limit: int | None = None
        self.served = 0
        self.held = 0

    def hold_after(self, n: int) -> None:
        with self.cond:
            self.limit, self.served = n, 0

    def release(self) -> None:
        with self.cond:
            self.limit = None
            self.cond.notify_all()

    def wait_held(self, timeout: float = 60) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.held > 0, timeout), "no request was held"

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.cond:
            self.held += 1
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.limit is None or self.served < self.limit)
            self.held -= 1
            self.served += 1
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = self.embedder.embed(texts)
        as_b64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode()
                if as_b64
                else v.tolist(),
            }
            for i, v in enumerate(vectors)
        ]
        usage = {"prompt_tokens": 0, "total_tokens": 0}
        return {"object": "list", "data": data, "model": body.get("model"), "usage": usage}


@pytest.fixture(scope="module")
def embeddings() -> Iterator[tuple[_Embeddings, str]]:
    state = _Embeddings()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            payload = json.dumps(state.answer(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the loader was killed while its request was held
                self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield state, f"http://127.0.0.1:{httpd.server_port}/v1"
    finally:
        state.release()
        httpd.shutdown()


@pytest.fixture
def embed(embeddings: tuple[_Embeddings, str]) -> Iterator[_Embeddings]:
    yield embeddings[0]
    embeddings[0].release()


# -- helpers ----------------------------------------------------------------------------------


def _env(server_uri: str, embed_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPSEARCHER_")}
    env.update(
        PYTHONPATH=str(REPO),
        NO_PROXY="127.0.0.1,localhost",
        DEEPSEARCHER_VECTOR_STORE__URI=server_uri,
        DEEPSEARCHER_EMBEDDING__PROVIDER="openai",
        DEEPSEARCHER_EMBEDDING__MODEL="word-hash",
        DEEPSEARCHER_EMBEDDING__BASE_URL=embed_url,
        DEEPSEARCHER_EMBEDDING__DIMENSIONS=str(WordHashEmbedder.dimension),
        # One request per encode batch, so holding the second request stops a load midway.
        DEEPSEARCHER_EMBEDDING__BATCH_SIZE="4096",
        # Small chunks: a few small files give several encode batches.
        DEEPSEARCHER_CHUNKING__CHUNK_SIZE="16",
        DEEPSEARCHER_CHUNKING__CHUNK_OVERLAP="0",
        DEEPSEARCHER_LOADING__LEASE_TTL_S=str(TTL_S),
        DEEPSEARCHER_LOADING__LEASE_SETTLE_S=str(SETTLE_S),
    )
    return env


class Loader:
    """A ``deepsearcher load --json`` process; its stderr is read as it comes."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for_line(self, text: str, timeout: float = 60) -> None:
        with self._changed:
            found = self._changed.wait_for(lambda: any(text in x for x in self.lines), timeout)
        assert found, f"no stderr line with {text!r}: {''.join(self.lines)}"

    def finish(self, timeout: float = 90) -> tuple[int, dict[str, Any] | None, str]:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout)
        report = json.loads(out) if code == 0 and out.startswith("{") else None
        return code, report, "".join(self.lines)


@pytest.fixture
def start_load(
    server_uri: str, embeddings: tuple[_Embeddings, str], tmp_path: Path
) -> Iterator[Any]:
    started: list[Loader] = []

    def start(collection: str, *paths: Path, args: tuple[str, ...] = ("--json",)) -> Loader:
        cmd = [sys.executable, "-m", "deepsearcher.cli", "load", *map(str, paths)]
        proc = subprocess.Popen(
            [*cmd, "--collection", collection, *args],
            cwd=tmp_path,
            env=_env(server_uri, embeddings[1]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(Loader(proc))
        return started[-1]

    yield start
    for loader in started:
        if loader.proc.poll() is None:
            loader.proc.kill()
            loader.proc.wait()


@pytest.fixture
def clean_load(server_uri: str, embeddings: tuple[_Embeddings, str]) -> Any:
    """One load, in this process (a third process per test would double its time), with the
    loaders' settings: the reference a collided load must equal."""

    def load(collection: str, *paths: Path) -> None:
        settings = load_settings(environ=_env(server_uri, embeddings[1]))
        with DeepSearcher(settings) as ds:
            ds.load(list(paths), collection)

    return load


def _write_corpus(root: Path, names: list[str], version: str = "v1") -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, name in enumerate(names):
        topic = _TOPICS[n % len(_TOPICS)]
        lines = [
            f"Note {i} of {name} ({version}): the {topic} report line {i} mentions item {n * 100 + i}."
            for i in range(30)
        ]
        path = root / name
        path.write_text("\n".join(lines), encoding="utf-8")
        paths.append(path)
    return paths


def _store(server_uri: str) -> MilvusStore:
    settings = load_settings(overrides={"vector_store": {"uri": server_uri}}, environ={})
    return MilvusStore(settings.vector_store)


def _snapshot(
    server_uri: str, collection: str
) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """The collection's chunks (id, source, content hash, text) and manifest records."""
    store = _store(server_uri)
    try:
        conn = store._conn
        conn.ensure_loaded(collection)
        rows = conn.iterate(collection, ["id", "source", "content_hash", "text"])
        chunks = {(r["id"], r["source"], r["content_hash"], r["text"]) for r in rows}
        records = {
            (r.source, r.doc_id, r.content_hash, r.chunks)
            for r in store.manifest.file_records(collection).values()
        }
        return chunks, records
    finally:
        store.close()


def _count(server_uri: str, collection: str) -> int:
    store = _store(server_uri)
    try:
        return store.count(collection)
    finally:
        store.close()


def _assert_like_clean_load(server_uri: str, collection: str, clean: str) -> None:
    chunks, records = _snapshot(server_uri, collection)
    want_chunks, want_records = _snapshot(server_uri, clean)
    assert want_chunks and want_records
    assert chunks == want_chunks  # no duplicate, missing or stale chunk
    assert records == want_records  # every file recorded with its current hash
    assert len({c[0] for c in chunks}) == len(chunks)


def _holder_pid(server_uri: str, collection: str) -> int:
    """The pid of the loader holding ``collection``'s lease, read from the store."""
    conn = _connection(server_uri)
    try:
        holder = MilvusLoadLeases(conn).holder(collection)
    finally:
        conn.close()
    assert holder is not None
    return int(holder.owner.split(":")[1])


def _wait_for(condition: Any, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


# -- real loader processes ----------------------------------------------------------------------


@pytest.mark.slow
def test_two_loads_of_one_folder_end_like_one_clean_load(
    tmp_path: Path, server_uri: str, start_load: Any, clean_load: Any, embed: _Embeddings
) -> None:
    docs = tmp_path / "docs"
    files = _write_corpus(docs, [f"doc_{i:02d}.txt" for i in range(6)])
    first, second = start_load("same", docs), start_load("same", docs)
    results = [loader.finish() for loader in (first, second)]
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    reports = [report for _, report, _ in results[:2]]
    assert reports[0] is not None and reports[1] is not None
    # The second load waited for the first and found every file already stored: no file was
    # embedded twice.
    assert sorted(r["files"]["new"] for r in reports) == [0, len(files)]
    assert sorted(r["files"]["unchanged"] for r in reports) == [0, len(files)]
    clean_load("same_clean", docs)
    _assert_like_clean_load(server_uri, "same", "same_clean")


@pytest.mark.slow
def test_loads_of_overlapping_folders_end_like_one_clean_load(
    tmp_path: Path, server_uri: str, start_load: Any, clean_load: Any, embed: _Embeddings
) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _write_corpus(a, ["a1.txt", "a2.txt"])
    _write_corpus(b, ["b1.txt", "b2.txt", "b3.txt"])
    _write_corpus(c, ["c1.txt", "c2.txt"])
    first, second = start_load("overlap", a, b), start_load("overlap", b, c)
    results = [loader.finish() for loader in (first, second)]
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    clean_load("overlap_clean", a, b, c)
    _assert_like_clean_load(server_uri, "overlap", "overlap_clean")


@pytest.mark.slow
def test_a_file_edited_during_a_load_ends_with_only_its_new_chunks(
    tmp_path: Path, server_uri: str, start_load: Any, clean_load: Any, embed: _Embeddings
) -> None:
    docs = tmp_path / "docs"
    files = _write_corpus(docs, [f"doc_{i:02d}.txt" for i in range(12)])
    embed.hold_after(1)
    loaders = [start_load("edit", docs, args=()), start_load("edit", docs, args=())]
    # One holds the lease and has stored its first batch; its next batch is held.
    embed.wait_held()
    _wait_for(lambda: _count(server_uri, "edit") > 0, what="the first batch")
    holder = _holder_pid(server_uri, "edit")
    waiter = next(x for x in loaders if x.proc.pid != holder)
    # The other's progress display says whom it waits for; it loads nothing meanwhile.
    waiter.wait_for_line("waiting: collection 'edit' is being loaded by")
    assert f"pid {holder}" in "".join(waiter.lines)

    env = _env(server_uri, "http://127.0.0.1:9/unused")
    busy = CliRunner().invoke(
        app, ["load", str(docs), "--collection", "edit", "--no-wait"], env=env
    )
    assert busy.exit_code == 1
    assert busy.stderr.startswith("error: collection 'edit' is being loaded by")
    assert f"pid {holder}" in busy.stderr and "\nhint: " in busy.stderr

    edited = files[-1]
    _write_corpus(docs, [edited.name], version="v2")  # same name, new content, mid-load
    embed.release()
    results = [loader.finish() for loader in loaders]
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]

    clean_load("edit_clean", docs)
    _assert_like_clean_load(server_uri, "edit", "edit_clean")
    chunks, _ = _snapshot(server_uri, "edit")
    texts = [c[3] for c in chunks if c[1] == str(edited)]
    assert texts and not any("(v1)" in t for t in texts)


@pytest.mark.slow
def test_a_loader_killed_mid_load_is_taken_over_after_its_lease_lapses(
    tmp_path: Path, server_uri: str, start_load: Any, clean_load: Any, embed: _Embeddings
) -> None:
    docs = tmp_path / "docs"
    _write_corpus(docs, [f"doc_{i:02d}.txt" for i in range(12)])
    embed.hold_after(1)
    loaders = [start_load("killed", docs), start_load("killed", docs)]
    embed.wait_held()
    _wait_for(lambda: _count(server_uri, "killed") > 0, what="the first batch")
    pid = _holder_pid(server_uri, "killed")
    victim = next(x for x in loaders if x.proc.pid == pid)
    survivor = next(x for x in loaders if x.proc.pid != pid)
    os.kill(pid, signal.SIGKILL)
    victim.proc.wait()
    assert survivor.proc.poll() is None  # still waiting for the lease

    embed.release()
    code, report, err = survivor.finish()
    assert code == 0, err
    assert report is not None and f"pid {pid}" in err
    clean_load("killed_clean", docs)
    _assert_like_clean_load(server_uri, "killed", "killed_clean")


# -- the acquisition protocol, contender by contender -------------------------------------------

_FAST = LoadingSettings(lease_ttl_s=2, lease_settle_s=0.3)


def _connection(server_uri: str) -> MilvusConnection:
    return MilvusConnection(
        load_settings(overrides={"vector_store": {"uri": server_uri}}, environ={}).vector_store
    )


def test_contending_loaders_hold_the_lease_one_at_a_time(server_uri: str) -> None:
    held: list[tuple[float, float]] = []
    barrier = threading.Barrier(4)

    def contender() -> None:
        conn = _connection(server_uri)
        try:
            barrier.wait()
            lease = asyncio.run(acquire_load_lease(MilvusLoadLeases(conn), "contended", _FAST))
            start = time.monotonic()
            lease.verify()
            time.sleep(0.2)  # a load's work, while the others wait
            lease.verify()
            held.append((start, time.monotonic()))
            lease.release()
        finally:
            conn.close()

    threads = [threading.Thread(target=contender) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(held) == 4  # every contender got its turn
    held.sort()
    assert all(end <= nxt for (_, end), (nxt, _) in itertools.pairwise(held))


class _LateClaim(MilvusLoadLeases):
    """A contender whose claim write lands late: it takes its claim time, signals ``stamped``,
    then ``delay()`` runs before the write (a slow network, a paused process)."""

    def __init__(self, conn: MilvusConnection, delay: Any) -> None:
        super().__init__(conn)
        self.stamped = threading.Event()
        self._delay = delay

    def _put(self, collection: str, claim: LeaseClaim) -> None:
        if not self.stamped.is_set():
            self.stamped.set()
            self._delay()
        super()._put(collection, claim)


def _race(server_uri: str, collection: str, settle_s: float, late_by: Any) -> list[str]:
    """A late-written earlier claim against a prompt later one: who believes it holds."""
    conns = [_connection(server_uri), _connection(server_uri)]
    prompt_done = threading.Event()
    late = _LateClaim(conns[0], lambda: late_by(prompt_done))
    prompt = MilvusLoadLeases(conns[1])
    won: list[str] = []

    def run(leases: MilvusLoadLeases, owner: str) -> None:
        if leases is prompt:
            late.stamped.wait(30)
        got = leases.try_acquire(collection, owner, 10, settle_s)
        if got is not None and got.owner == owner:
            won.append(owner)
        if leases is prompt:
            prompt_done.set()

    try:
        threads = [
            threading.Thread(target=run, args=(late, "late")),
            threading.Thread(target=run, args=(prompt, "prompt")),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return won
    finally:
        for conn in conns:
            conn.close()


def test_the_settle_delay_lets_an_earlier_claim_written_late_win_alone(server_uri: str) -> None:
    # The late claim's write takes 0.3 s (< the 1 s settle): the prompt contender, which found
    # itself alone at first, sees the earlier claim when it checks again and stands down.
    won = _race(server_uri, "settled", 1.0, lambda _done: time.sleep(0.3))
    assert won == ["late"]


def test_without_a_settle_delay_a_late_claim_write_makes_two_holders(server_uri: str) -> None:
    # Why the settle delay exists: with none, the prompt contender believes it holds the lease
    # before the earlier claim lands, and the late one believes so too once it does.
    won = _race(server_uri, "unsettled", 0.0, lambda done: done.wait(30))
    assert sorted(won) == ["late", "prompt"]


class _Frozen(MilvusLoadLeases):
    """A holder whose renewals hang until ``thaw`` (a paused process, a partitioned host)."""

    def __init__(self, conn: MilvusConnection) -> None:
        super().__init__(conn)
        self.thaw = threading.Event()

    def renew(self, *args: Any, **kwargs: Any) -> LeaseClaim | None:
        self.thaw.wait(60)
        return super().renew(*args, **kwargs)


def test_a_holder_that_missed_its_renewals_stops_and_cannot_take_the_lease_back(
    server_uri: str,
) -> None:
    conn_a, conn_b = _connection(server_uri), _connection(server_uri)
    frozen = _Frozen(conn_a)
    try:
        first = asyncio.run(acquire_load_lease(frozen, "lapsed", _FAST))
        first.verify()
        waited: list[LeaseClaim] = []
        # Waits until the first claim lapses (its renewals hang), then takes over.
        second = asyncio.run(
            acquire_load_lease(MilvusLoadLeases(conn_b), "lapsed", _FAST, waited.append)
        )
        assert [c.owner for c in waited] == [first.claim.owner]
        with pytest.raises(LoadLeaseLostError):
            first.check()
        with pytest.raises(LoadLeaseLostError):
            first.verify()
        frozen.thaw.set()  # the late renewal must not revive the lapsed claim
        first.release()
        holder = MilvusLoadLeases(conn_b).holder("lapsed")
        assert holder is not None and holder.owner == second.claim.owner
        second.verify()
        second.release()
        assert MilvusLoadLeases(conn_b).holder("lapsed") is None
    finally:
        frozen.thaw.set()
        conn_a.close()
        conn_b.close()


# -- in one process (a Milvus Lite file) ---------------------------------------------------------


def test_two_loads_in_one_process_take_turns(tmp_path: Path, make_searcher: Any) -> None:
    docs = tmp_path / "docs"
    _write_corpus(docs, ["a.txt", "b.txt"])
    ds = make_searcher(embedder=WordHashEmbedder())
    _ = ds.store  # opened once, before the two loads ask for it

    async def both() -> list[Any]:
        return list(await asyncio.gather(ds.aload(docs, "turns"), ds.aload(docs, "turns")))

    reports = asyncio.run(both())
    assert sorted(r.files_new for r in reports) == [0, 2]
    assert sorted(r.files_unchanged for r in reports) == [0, 2]


class _Taken(LocalLoadLeases):
    """Leases where, as far as the store can tell, another loader took over."""

    def holder(self, collection: str) -> LeaseClaim | None:
        return LeaseClaim("elsewhere:42:beef", 0.0, float("inf"))


def test_a_load_that_lost_its_lease_records_nothing(tmp_path: Path, settings: Settings) -> None:
    docs = tmp_path / "docs"
    _write_corpus(docs, ["a.txt", "b.txt"])
    store = MilvusStore(settings.vector_store)
    try:
        ingestor = Ingestor(settings, store, WordHashEmbedder, leases=_Taken())
        with pytest.raises(LoadLeaseLostError, match="held by elsewhere pid 42"):
            asyncio.run(ingestor.aload([docs], "taken"))
        assert store.manifest.file_records("taken") == {}
    finally:
        store.close()
