"""Loading over HTTP: paths confined to ``server.load_root`` (symlinks resolved), or uploaded
files kept under a folder the server owns. Loads run one at a time in the server process, which
owns the Milvus Lite database."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, BinaryIO

from starlette.datastructures import UploadFile
from starlette.requests import Request

from deepsearcher import errors
from deepsearcher.config import ServerSettings, Settings
from deepsearcher.options import LoadOptions
from deepsearcher.searcher import DeepSearcher, validate_collection_name
from deepsearcher.server.errors import RequestError
from deepsearcher.server.openai_api import LoadRequest
from deepsearcher.types import LoadFailure, LoadReport
from loaders.sniff import file_type_of, unsupported_reason

logger = logging.getLogger(__name__)
Prepared = tuple[list[Path], list[LoadFailure]]  # paths to load, files refused
_SAFE_NAME = re.compile(r"[^\w.\- ()+@]")
_MAX_PATH_CHARS = 4096  # PATH_MAX on Linux: longer paths only ever fail (ENAMETOOLONG)


def default_upload_dir(settings: Settings) -> Path:
    """Uploads are kept (sources must stay readable for reloads and prune): in
    ``server.upload_dir``, else next to a Milvus Lite file, else in the user cache."""
    if settings.server.upload_dir:
        return Path(settings.server.upload_dir).expanduser().resolve()
    uri = settings.vector_store.uri
    if "://" in uri:
        return Path.home() / ".cache" / "deepsearcher" / "uploads"
    db = Path(uri).expanduser().resolve()
    return db.with_name(db.name + ".uploads")


_NAME_MAX = 200  # characters and UTF-8 bytes: file systems allow 255 bytes a name


def safe_filename(raw: str | None) -> str:
    """The uploaded file's own name, stripped of directories and odd characters. A long name
    is cut inside its stem: the extension says which loader reads the file."""
    base = PureWindowsPath(PurePosixPath(raw or "").name).name
    name = _SAFE_NAME.sub("_", base).lstrip(". ")
    suffix = PurePosixPath(name).suffix
    if len(suffix) > 20:  # not an extension, just a dot in a long name
        suffix = ""
    stem = name[: len(name) - len(suffix)]
    while stem and len((stem + suffix).encode()) > _NAME_MAX:
        stem = stem[: min(len(stem) - 1, _NAME_MAX - len(suffix))]
    return (stem + suffix if stem else name[:_NAME_MAX]) or "upload"


def _copy_to(src: BinaryIO, dest: Path) -> None:
    with dest.open("wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)


class HTTPLoads:
    """The ``/v1/load`` endpoint's work: path checks, uploads, and one load at a time."""

    def __init__(self, searcher: DeepSearcher, server: ServerSettings, upload_dir: Path) -> None:
        self.searcher = searcher
        self.server = server
        self.upload_dir = upload_dir
        self.lock = asyncio.Lock()  # ingestion into one database runs one at a time
        self._background: set[asyncio.Task[Any]] = set()

    async def run_load(
        self,
        prepare: Callable[[], Awaitable[Prepared]],
        collection: str | None,
        *,
        job: Callable[[], Awaitable[LoadReport]] | None = None,
        cleanup: _Published | None = None,
        options: LoadOptions | None = None,
    ) -> LoadReport:
        """Load under the lock. A load that outlives the request timeout is not cancelled (that
        would leave the database mid-file); the client gets a 504 and the load finishes.
        ``job`` replaces the plain load of the prepared paths; ``cleanup`` is rolled back if a
        load that went on in the background fails."""
        name = _collection_name(collection or self.searcher.settings.vector_store.collection)

        async def run() -> LoadReport:
            async with self.lock:
                paths, refused = await prepare()
                if job is not None:
                    report = await job()
                else:
                    report = await self.searcher.aload(paths, name, options)
                report.failures.extend(refused)
                report.files_failed += len(refused)
                return report

        async def run_or_roll_back() -> LoadReport:
            try:
                return await run()
            except BaseException:
                if cleanup is not None:
                    await asyncio.to_thread(cleanup.roll_back)
                raise

        task = asyncio.create_task(run_or_roll_back())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.server.request_timeout_s)
        except TimeoutError:
            task.add_done_callback(_log_late_load)
            raise RequestError(
                504,
                f"the load did not finish within {self.server.request_timeout_s:g}s; it goes on in the background",
                type_="server_error",
                code="timeout",
                hint="load the same paths again later for its report (unchanged files are skipped)",
            ) from None

    def paths_under_root(self, raw_paths: list[str]) -> tuple[Path, list[Path]]:
        """The resolved root and paths; 403 for any path that resolves outside the root."""
        if not self.server.load_root:
            raise RequestError(
                403,
                "loading by path is disabled; set server.load_root",
                type_="permission_error",
                code="load_root_unset",
                hint="set server.load_root to the folder clients may load from, or upload files "
                "as multipart/form-data",
            )
        root = Path(self.server.load_root).expanduser().resolve()
        resolved = []
        for raw in raw_paths:
            shown = raw if len(raw) <= 200 else raw[:200] + "..."
            if len(raw) > _MAX_PATH_CHARS or "\x00" in raw:
                raise RequestError(
                    400,
                    f"invalid path {shown!r}: longer than {_MAX_PATH_CHARS} characters or "
                    "holding a NUL byte",
                    code="invalid_path",
                    hint="send paths relative to server.load_root",
                )
            try:
                # Relative paths are relative to the root; resolve() follows every symlink.
                path = (root / raw).resolve()
                inside = path.is_relative_to(root)
                exists = inside and path.exists()
            except (OSError, ValueError) as exc:
                # The OS error names the absolute path: the log gets it, the client the reason.
                logger.info("invalid load path %r: %s", raw, exc)
                reason = (
                    os.strerror(exc.errno) if isinstance(exc, OSError) and exc.errno else "invalid"
                )
                raise RequestError(
                    400, f"invalid path {shown!r}: {reason}", code="invalid_path"
                ) from None
            if not inside:
                raise RequestError(
                    403,
                    f"path is outside server.load_root: {shown}",
                    type_="permission_error",
                    code="path_outside_load_root",
                    hint="only paths under server.load_root may be loaded; relative paths start "
                    "from it",
                )
            if not exists:
                raise RequestError(
                    404,
                    f"no such file or folder: {shown}",
                    type_="not_found_error",
                    code="path_not_found",
                )
            resolved.append(path)
        return root, resolved

    async def load_paths(self, req: LoadRequest) -> LoadReport:
        root, paths = await asyncio.to_thread(self.paths_under_root, req.paths)

        async def prepare() -> Prepared:
            return await asyncio.to_thread(_files_inside, paths, root, self.searcher.settings)

        options = LoadOptions(description=req.description, force=req.force, prune=req.prune)
        return await self.run_load(prepare, req.collection, options=options)

    async def load_uploads(
        self, request: Request, authorize: Callable[[str], None] | None = None
    ) -> LoadReport:
        """Uploaded files are kept under the upload folder only if they load: an unsupported
        one refuses the request before anything is written, and a file the load rejects (or a
        load that fails) is removed again, the earlier upload of the same name put back."""
        async with request.form(max_files=1000, max_fields=100) as form:
            uploads = [
                v
                for key in ("files", "file")
                for v in form.getlist(key)
                if isinstance(v, UploadFile)
            ]
            if not uploads:
                raise RequestError(
                    400, "no files uploaded: send them as multipart fields named 'files'"
                )
            fields = {k: v for k, v in form.items() if isinstance(v, str)}
            collection = _collection_name(
                fields.get("collection") or self.searcher.settings.vector_store.collection
            )
            if authorize is not None:  # before anything is stored
                authorize(collection)
            names = [safe_filename(u.filename) for u in uploads]
            if len(set(names)) < len(names):
                raise RequestError(400, "two uploaded files have the same name")
            unsupported = [n for n in names if file_type_of(Path(n)) is None]
            if unsupported:
                raise RequestError(
                    415,
                    f"cannot load {unsupported[0]}: {unsupported_reason(Path(unsupported[0]))}",
                    code="unsupported_file_type",
                    hint="upload files of a supported type; nothing was stored",
                )
            # Staged first, so the request can end (and close its files) while the load waits.
            staging_root = self.upload_dir / ".staging"
            await asyncio.to_thread(staging_root.mkdir, parents=True, exist_ok=True)
            staging = Path(await asyncio.to_thread(tempfile.mkdtemp, dir=staging_root))
            try:
                for upload, fname in zip(uploads, names, strict=True):
                    await asyncio.to_thread(_copy_to, upload.file, staging / fname)
            except BaseException as exc:
                await asyncio.to_thread(shutil.rmtree, staging, True)
                if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise RequestError(
                        507,
                        "the server's disk is full: the upload could not be stored",
                        type_="server_error",
                        code="insufficient_storage",
                        hint="free space on the server (its upload folder and store) and "
                        "upload again; nothing was stored",
                    ) from None
                raise
        published = _Published(staging, self.upload_dir / collection, names)
        force = fields.get("force", "").lower() in ("1", "true", "yes", "on")

        async def load() -> LoadReport:
            options = LoadOptions(description=fields.get("description"), force=force)
            report = await self.searcher.aload(published.paths(), collection, options)
            await asyncio.to_thread(published.drop, {f.path for f in report.failures})
            return report

        async def prepare() -> Prepared:
            await asyncio.to_thread(published.publish)
            return published.paths(), []

        try:
            return await self.run_load(prepare, collection, job=load, cleanup=published)
        except RequestError as exc:
            if exc.status == 504:  # the load goes on; it keeps or drops the files itself
                raise
            await asyncio.to_thread(published.roll_back)
            raise
        except BaseException:
            await asyncio.to_thread(published.roll_back)
            raise


class _Published:
    """Uploaded files moved from staging into the collection's folder, with the files they
    replaced kept aside until the load says whether the new ones stay."""

    def __init__(self, staging: Path, target: Path, names: list[str]) -> None:
        self.staging = staging
        self.target = target
        self.names = names
        self.backup = staging / ".replaced"
        self.moved: list[str] = []

    def paths(self) -> list[Path]:
        return [self.target / n for n in self.names]

    def publish(self) -> None:
        self.target.mkdir(parents=True, exist_ok=True)
        self.backup.mkdir(exist_ok=True)
        for fname in self.names:  # replace: re-uploading a file updates it, no duplicate
            if (self.target / fname).exists():
                os.replace(self.target / fname, self.backup / fname)
            os.replace(self.staging / fname, self.target / fname)
            self.moved.append(fname)

    def _undo(self, fname: str) -> None:
        (self.target / fname).unlink(missing_ok=True)
        if (self.backup / fname).exists():
            os.replace(self.backup / fname, self.target / fname)

    def drop(self, failed_paths: set[str]) -> None:
        """Remove the uploads the load rejected; the rest stay. Staging goes either way."""
        failed = {os.path.realpath(p) for p in failed_paths}
        for fname in self.moved:
            if os.path.realpath(self.target / fname) in failed:
                logger.info("removed rejected upload %s", self.target / fname)
                self._undo(fname)
        shutil.rmtree(self.staging, ignore_errors=True)

    def roll_back(self) -> None:
        for fname in self.moved:
            self._undo(fname)
        self.moved = []
        shutil.rmtree(self.staging, ignore_errors=True)


def _collection_name(name: str) -> str:
    try:
        return validate_collection_name(name)
    except errors.StoreError as exc:
        raise RequestError(
            400, exc.message, hint=exc.hint, code="invalid_collection_name"
        ) from None


_OUTSIDE_ROOT = "resolves outside server.load_root"


def _files_inside(paths: list[Path], root: Path, settings: Settings) -> Prepared:
    """The files under ``paths`` that a load may read, and those refused or skipped. The walk
    never follows a symlink, to a file or a folder, out of the root: the link is refused by its
    own name under the root, and what lies behind it is neither read nor named (the log gets
    its target). The load gets the files found here, so it does not walk the folders again."""
    from loaders import discover_files

    files, skipped = discover_files(
        list(paths), settings.loading, within=root, outside=_OUTSIDE_ROOT
    )
    for failure in skipped:
        if failure.reason == _OUTSIDE_ROOT:
            target = os.path.realpath(failure.path)
            logger.warning("refused %s: it resolves to %s, outside load_root", failure.path, target)
    return list(files), skipped


def _log_late_load(task: asyncio.Task[LoadReport]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        logger.error("background load failed: %s", exc)
    else:
        logger.info("background load finished: %s", task.result().to_dict())
