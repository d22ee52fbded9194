"""Find the files to load under the paths a user gives, and the facts a load records about
each (content hash, modification time)."""

from __future__ import annotations

import fnmatch
import hashlib
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import LoadFailure
from loaders.base import describe_exception
from loaders.sniff import file_type_of, format_size_limit, unsupported_reason


def discover_files(
    paths: Sequence[str | Path],
    settings: LoadingSettings,
    *,
    within: Path | None = None,
    outside: str = "resolves outside the folder loads are confined to",
) -> tuple[list[Path], list[LoadFailure]]:
    """Return the supported files under ``paths`` and the files skipped with a reason.

    Directories are walked recursively, following directory symlinks (each real directory is
    visited once, so symlink loops end). With ``within`` (a resolved folder) a symlink, to a
    file or a folder, whose target is outside it is not followed: it is reported by its own
    path with the reason ``outside``, and nothing behind it is read or named (not even
    whether the target exists). Hidden files and folders (name starting with ``.``)
    below a given path are skipped. ``settings.include``/``exclude`` globs are matched with
    ``fnmatch`` against the path relative to the given directory and against the base name
    (``**/`` prefixes also match at the top level); an excluded folder is not entered.
    Files with unsupported extensions are ignored silently.

    A file named directly is taken whatever its name and the globs; if its type is unsupported
    it is reported. Files larger than ``settings.max_file_mb`` are reported, not returned.
    Paths are absolute, resolved, unique and sorted; failures are sorted by path.

    Raises ``LoaderError`` when a given path does not exist.
    """
    found: set[Path] = set()
    failures: dict[str, LoadFailure] = {}
    fence = _Fence(within, outside)
    for raw in paths:
        given = Path(raw).expanduser()
        if fence.refuses(given, failures):
            continue
        if given.is_dir():
            _walk(given, settings, found, failures, fence)
        elif given.exists():
            if file_type_of(given) is None:
                _fail(failures, given.absolute(), unsupported_reason(given))
            else:
                _take(given, settings, found, failures)
        elif given.is_symlink():
            _fail(failures, given.absolute(), "broken symlink")
        else:
            raise LoaderError(
                f"path not found: {raw}",
                "check the spelling; relative paths start from the current directory",
            )
    return sorted(found), sorted(failures.values(), key=lambda f: f.path)


class _Fence:
    """The folder a walk may not leave through a symlink (None: anywhere)."""

    def __init__(self, within: Path | None, reason: str) -> None:
        self.within = within
        self.reason = reason

    def refuses(self, path: Path, failures: dict[str, LoadFailure]) -> bool:
        """True (and ``path`` reported under its own name) when it resolves outside."""
        if self.within is None or Path(os.path.realpath(path)).is_relative_to(self.within):
            return False
        _fail(failures, path.absolute(), self.reason)
        return True


def _walk(
    root: Path,
    settings: LoadingSettings,
    found: set[Path],
    failures: dict[str, LoadFailure],
    fence: _Fence,
) -> None:
    seen: set[str] = set()

    def on_error(exc: OSError) -> None:
        where = Path(exc.filename).absolute() if exc.filename else root.absolute()
        _fail(failures, where, f"could not read directory: {describe_exception(exc)}")

    for dirpath, dirnames, filenames in os.walk(root, followlinks=True, onerror=on_error):
        real = os.path.realpath(dirpath)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = [
            name
            for name in sorted(dirnames)
            if not name.startswith(".")
            and not _matches(settings.exclude, (rel_dir / name).as_posix(), name)
            and os.path.realpath(os.path.join(dirpath, name)) not in seen
            and not fence.refuses(Path(dirpath, name), failures)
        ]
        for name in filenames:
            if name.startswith("."):
                continue
            path = Path(dirpath, name)
            if file_type_of(path) is None:
                continue
            rel = (rel_dir / name).as_posix()
            if settings.include and not _matches(settings.include, rel, name):
                continue
            if _matches(settings.exclude, rel, name):
                continue
            if fence.refuses(path, failures):
                continue
            if not path.exists():
                _fail(failures, path.absolute(), "broken symlink")
                continue
            _take(path, settings, found, failures)


def _take(
    path: Path, settings: LoadingSettings, found: set[Path], failures: dict[str, LoadFailure]
) -> None:
    resolved = path.resolve()
    try:
        size = resolved.stat().st_size
    except OSError as exc:
        _fail(failures, resolved, f"could not read: {describe_exception(exc)}")
        return
    if size > settings.max_file_mb * 2**20:
        _fail(failures, resolved, format_size_limit(size, settings))
        return
    found.add(resolved)


def _matches(patterns: Sequence[str], rel: str, name: str) -> bool:
    for pattern in patterns:
        candidates = [pattern, pattern[3:]] if pattern.startswith("**/") else [pattern]
        for pat in candidates:
            if fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(name, pat):
                return True
    return False


def _fail(failures: dict[str, LoadFailure], path: Path, reason: str) -> None:
    failures.setdefault(str(path), LoadFailure(path=str(path), reason=reason))


_HASH_BLOCK = 1 << 20


def hash_file(path: Path) -> str:
    """SHA-256 of the file's bytes: a load skips a file whose hash its record already has."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def modified_time(path: Path) -> str:
    """The file's modification time as ISO text in UTC, which sorts as time does (filters
    compare it as text)."""
    mtime = path.stat().st_mtime
    return datetime.fromtimestamp(mtime, UTC).isoformat(timespec="seconds")
