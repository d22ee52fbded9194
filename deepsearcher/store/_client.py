"""One Milvus connection shared by the vector store and the file manifest: opening (with the
errors a user can act on), the Lite lock, loading collections, and error mapping.

All methods are blocking; async callers run them with ``asyncio.to_thread`` (pymilvus's async
client does not work with Milvus Lite).
"""

from __future__ import annotations

import errno
import logging
import os
import shlex
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from deepsearcher.config import VectorStoreSettings
from deepsearcher.errors import CollectionNotFoundError, StoreError, StoreLockedError
from deepsearcher.store.base import MANIFEST_SUFFIX

logger = logging.getLogger(__name__)

_QUERY_BATCH = 1000
# Milvus Lite's index files (vector and scalar), derived from a collection's stored rows.
_INDEX_SUFFIXES = (".idx", ".sidx")
# File times may be coarser than the clock: a file written as a load began counts as its own.
_MTIME_SLACK_S = 2.0


def is_remote(uri: str) -> bool:
    return uri.startswith(("http://", "https://", "tcp://", "grpc://"))


class _DropLiteIteratorNoise(logging.Filter):
    """Milvus Lite does not implement AllocTimestamp; pymilvus's query iterator asks for it,
    falls back to a client timestamp (correct), and Lite's gRPC server logs a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Method not implemented" not in record.getMessage()


def _quiet_lite_grpc() -> None:
    grpc_log = logging.getLogger("grpc._server")
    if not any(isinstance(f, _DropLiteIteratorNoise) for f in grpc_log.filters):
        grpc_log.addFilter(_DropLiteIteratorNoise())


class MilvusConnection:
    """``pymilvus.MilvusClient`` for a Lite file or a server URI, with every call mapped to
    ``StoreError`` and, for Lite, serialised by one lock."""

    def __init__(self, settings: VectorStoreSettings) -> None:
        # Lazy: pymilvus (grpc, pandas) takes ~1 s to import; `import deepsearcher.store` must not.
        from pymilvus import MilvusClient

        self.remote = is_remote(settings.uri)
        uri = settings.uri if self.remote else str(Path(settings.uri).expanduser().resolve())
        self.uri = uri
        token = os.environ.get(settings.token_env, "")
        # Milvus Lite runs in-process; one lock keeps its client single-threaded. A server
        # handles concurrent requests itself.
        self._lock: threading.Lock | None = None if self.remote else threading.Lock()
        self._loaded: set[str] = set()
        if not self.remote:
            _quiet_lite_grpc()
        try:
            if not self.remote:
                Path(uri).parent.mkdir(parents=True, exist_ok=True)
            self.client = MilvusClient(uri=uri, token=token)
        except Exception as exc:
            raise _open_error(exc, settings.uri, self.remote) from exc

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` with errors as ``StoreError``. A call on a collection (its
        name first) that the server holds released is retried once after loading it."""
        try:
            return self._call(fn, *args, **kwargs)
        except StoreError:
            raise
        except Exception as exc:
            name = args[0] if args and isinstance(args[0], str) else None
            if name is None or not _released(exc):
                raise _call_error(fn, exc) from exc
            # A restarted Milvus server (or another process) released it: this process's
            # memory of what is loaded is stale, and must not need a restart of ours too.
            logger.info("collection %s was released by the server; loading it again", name)
            self._loaded.discard(name)
            self.ensure_loaded(name)
            try:
                return self._call(fn, *args, **kwargs)
            except Exception as again:
                raise _call_error(fn, again) from again

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._lock is None:
            return fn(*args, **kwargs)
        with self._lock:
            return fn(*args, **kwargs)

    def has(self, name: str) -> bool:
        return bool(self.call(self.client.has_collection, name))

    def require(self, name: str) -> None:
        if not self.has(name):
            raise CollectionNotFoundError(f"collection '{name}' does not exist")
        self.ensure_loaded(name)

    def ensure_loaded(self, name: str) -> None:
        # A database reopened after a crash holds its collections "released"; queries then
        # fail until they are loaded into memory again. Loading a loaded collection is a no-op.
        if name not in self._loaded:
            self._load(name)
            self._loaded.add(name)

    def _load(self, name: str) -> None:
        """Load ``name``, repairing its index files when they cannot be read.

        Milvus Lite writes a collection's index files (derived from its stored rows) the first
        time it loads it, straight to their final names: a full disk stops a write part-way,
        and that cut file failed every later load of the database. So a load that fails for
        lack of space removes the index files it wrote, and a load that fails otherwise, with
        index files present, removes them and loads once more, which builds them again."""
        started = time.time()
        try:
            self._call(self.client.load_collection, name)
            return
        except Exception as exc:
            first = exc
        if _disk_full(first):
            self._remove_index_files(name, since=started)
            raise _load_error(name, first, self.remote) from first
        broken = self._index_files(name)
        if not broken:
            raise _load_error(name, first, self.remote) from first
        logger.warning(
            "%s could not be loaded (%s): rebuilding its index files",
            _shown(name),
            short_error(first),
        )
        self._remove_index_files(name)
        started = time.time()
        try:
            self._call(self.client.load_collection, name)
        except Exception as again:
            if _disk_full(again):
                self._remove_index_files(name, since=started)
            raise _load_error(name, again, self.remote) from again
        logger.warning("%s: index files rebuilt", _shown(name))

    def _index_files(self, name: str) -> list[Path]:
        """Milvus Lite's index files of ``name`` (none for a server, which keeps its own):
        ``<uri>/collections/<name>/partitions/<partition>/indexes/*.idx|*.sidx``."""
        if self.remote:
            return []
        partitions = Path(self.uri) / "collections" / name / "partitions"
        return [
            f for f in partitions.glob("*/indexes/*") if f.suffix in _INDEX_SUFFIXES and f.is_file()
        ]

    def _remove_index_files(self, name: str, since: float | None = None) -> None:
        """Remove ``name``'s index files (those written from ``since`` on): each is rebuilt
        from the collection's rows when it is next loaded."""
        for path in self._index_files(name):
            try:
                if since is None or path.stat().st_mtime >= since - _MTIME_SLACK_S:
                    path.unlink()
                    logger.info("removed index file %s", path)
            except OSError as exc:
                logger.warning("could not remove index file %s: %s", path, exc)

    def drop(self, name: str) -> None:
        if self.has(name):
            self.call(self.client.drop_collection, name)
        self._loaded.discard(name)

    def count(self, name: str) -> int:
        if not self.has(name):
            return 0
        self.ensure_loaded(name)
        res = self.call(self.client.query, name, filter="", output_fields=["count(*)"])
        return int(res[0]["count(*)"]) if res else 0

    def iterate(self, name: str, fields: list[str]) -> Iterable[dict[str, Any]]:
        it = self.call(
            self.client.query_iterator,
            name,
            batch_size=_QUERY_BATCH,
            filter="",
            output_fields=fields,
        )
        try:
            while True:
                batch = self.call(it.next)
                if not batch:
                    break
                yield from batch
        finally:
            it.close()

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # closing twice or after a failed open is harmless
            logger.debug("closing Milvus client failed", exc_info=True)


def _shown(name: str) -> str:
    """A stored collection as the user knows it: a manifest is its collection's file list."""
    if name.endswith(MANIFEST_SUFFIX):
        return f"the file list of collection '{name[: -len(MANIFEST_SUFFIX)]}'"
    return f"collection '{name}'"


def _load_error(name: str, exc: BaseException, remote: bool) -> StoreError:
    """Why ``name`` could not be loaded, and what fixes it: free space, then any command that
    opens it (the index is rebuilt then), or a rebuild of the collection from its files."""
    shown = _shown(name)
    base = name.removesuffix(MANIFEST_SUFFIX)
    if _disk_full(exc):
        where = "the Milvus server's disk" if remote else "the disk holding vector_store.uri"
        logger.info("%s could not be loaded: %s", shown, exc)  # the driver's words, with paths
        return StoreError(
            f"{shown} could not be loaded: the disk is full, so its index could not be written",
            f"free space on {where}, then open it again (`deepsearcher collections`, or any "
            "request to the server that holds the store): its index is built again, and "
            "nothing half-written was kept",
        )
    return StoreError(
        f"{shown} could not be loaded: {short_error(exc)}",
        f"reload it from its files: `deepsearcher load PATH --collection {base} --rebuild` "
        f"(or drop it: `deepsearcher collections drop {base}`)",
    )


def _released(exc: BaseException) -> bool:
    """Milvus refused because the collection is not loaded (code 101: CollectionNotLoaded)."""
    text = str(exc).lower()
    return getattr(exc, "code", None) == 101 or "released" in text or "not loaded" in text


def _call_error(fn: Callable[..., Any], exc: BaseException) -> StoreError:
    hint = "check that the store is reachable and the collection exists"
    if _disk_full(exc):
        hint = (
            "the disk holding the store's data is full: free space there (Milvus Lite: the "
            "folder of vector_store.uri) and load again; unchanged files are skipped"
        )
    return StoreError(f"Milvus {getattr(fn, '__name__', 'call')} failed: {short_error(exc)}", hint)


def _disk_full(exc: BaseException) -> bool:
    """The store could not write for lack of space: this process's OSError, or the server's
    own (milvus-lite says "[Errno 28] No space left on device" in a MilvusException)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return any(
        mark in text
        for mark in (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT), "[Errno 28]")
    )


def short_error(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}"[:300]


def lock_holders(db_dir: str | Path) -> list[str]:
    """Processes holding the Milvus Lite LOCK file open, as "pid (command)". Linux /proc only;
    elsewhere, or without permission, an empty list."""
    lock = Path(db_dir) / "LOCK"
    proc = Path("/proc")
    holders: list[str] = []
    if not lock.exists() or not proc.is_dir():
        return holders
    target = str(lock.resolve())
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            if any(os.readlink(fd) == target for fd in (pid_dir / "fd").iterdir()):
                argv = (pid_dir / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
                args = [a.decode(errors="replace") for a in argv]
                holders.append(f"{pid_dir.name} ({_shorten_command(args)})")
        except OSError:
            continue
    return holders


def _shorten_command(args: list[str], limit: int = 120) -> str:
    """The command line quoted as a shell would take it, cut between arguments (never inside
    one) once it passes ``limit`` characters; the program is always shown whole."""
    shown: list[str] = []
    for arg in args:
        quoted = shlex.quote(arg)
        if shown and sum(len(a) + 1 for a in shown) + len(quoted) > limit:
            return " ".join([*shown, "…"])
        shown.append(quoted)
    return " ".join(shown)


def _open_error(exc: Exception, uri: str, remote: bool) -> StoreError:
    text = f"{exc} {exc.__cause__ or ''}"
    if not remote and (
        "Open local milvus failed" in text or "DataDirLocked" in text or "lock" in text.lower()
    ):
        holders = lock_holders(uri)
        who = f" (held by process {', '.join(holders)})" if holders else ""
        return StoreLockedError(
            f"the Milvus Lite database {uri} is in use by another process{who}",
            "Milvus Lite allows one process per database: stop the other process (often "
            "`deepsearcher serve`), load through the server's POST /v1/load, or use a Milvus "
            "server URI (see README: milvus-lite server)",
        )
    if remote:
        return StoreError(
            f"could not connect to Milvus at {uri}: {short_error(exc)}",
            "check that the server is running and vector_store.uri / the token are right",
        )
    return StoreError(
        f"could not open Milvus Lite at {uri}: {short_error(exc)}", "check the path is writable"
    )
