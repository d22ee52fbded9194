"""Loading over HTTP: paths confined to ``server.load_root`` (symlinks resolved), or uploaded
files kept under a folder the server owns. Loads run one at a time in the server process, which
owns the Milvus Lite database."""

from __future__ import annotations

import asyncio
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
from deepsearcher.searcher import DeepSearcher
from deepsearcher.server_openai import LoadRequest, RequestError
from deepsearcher.store import validate_collection_name
from deepsearcher.types import LoadFailure, LoadReport

logger = logging.getLogger(__name__)
Prepared = tuple[list[Path], list[LoadFailure]]  # paths to load, files refused
_SAFE_NAME = re.compile(r"[^\w.\- ()+@]")


def default_upload_dir(settings: Settings) -> Path:
    """Uploads are kept (sources must stay readable for reloads and prune): next to a Milvus
    Lite file, else in the user cache."""
    uri = settings.vector_store.uri
    if "://" in uri:
        return Path.home() / ".cache" / "deepsearcher" / "uploads"
    db = Path(uri).expanduser().resolve()
    return db.with_name(db.name + ".uploads")


def safe_filename(raw: str | None) -> str:
    """The uploaded file's own name, stripped of directories and odd characters."""
    base = PureWindowsPath(PurePosixPath(raw or "").name).name
    name = _SAFE_NAME.sub("_", base).lstrip(". ")
    return name[:200] or "upload"


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
        self, prepare: Callable[[], Awaitable[Prepared]], collection: str | None, **kw: Any
    ) -> LoadReport:
        """Load under the lock. A load that outlives the request timeout is not cancelled (that
        would leave the database mid-file); the client gets a 504 and the load finishes."""
        name = _collection_name(collection or self.searcher.settings.vector_store.collection)

        async def job() -> LoadReport:
            async with self.lock:
                paths, refused = await prepare()
                report = await self.searcher.aload(paths, name, **kw)
                report.failures.extend(refused)
                report.files_failed += len(refused)
                return report

        task = asyncio.create_task(job())
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
            try:
                # Relative paths are relative to the root; resolve() follows every symlink.
                path = (root / raw).resolve()
            except (OSError, ValueError) as exc:
                raise RequestError(400, f"invalid path {raw!r}: {exc}") from None
            if not path.is_relative_to(root):
                raise RequestError(
                    403,
                    f"path is outside server.load_root: {raw}",
                    type_="permission_error",
                    code="path_outside_load_root",
                    hint=f"only paths under {root} may be loaded",
                )
            if not path.exists():
                raise RequestError(
                    404,
                    f"no such file or folder: {raw}",
                    type_="not_found_error",
                    code="path_not_found",
                )
            resolved.append(path)
        return root, resolved

    async def load_paths(self, req: LoadRequest) -> LoadReport:
        root, paths = await asyncio.to_thread(self.paths_under_root, req.paths)

        async def prepare() -> Prepared:
            return await asyncio.to_thread(_files_inside, paths, root, self.searcher.settings)

        return await self.run_load(
            prepare, req.collection, description=req.description, force=req.force, prune=req.prune
        )

    async def load_uploads(self, request: Request) -> LoadReport:
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
            names = [safe_filename(u.filename) for u in uploads]
            if len(set(names)) < len(names):
                raise RequestError(400, "two uploaded files have the same name")
            # Staged first, so the request can end (and close its files) while the load waits.
            staging_root = self.upload_dir / ".staging"
            await asyncio.to_thread(staging_root.mkdir, parents=True, exist_ok=True)
            staging = Path(await asyncio.to_thread(tempfile.mkdtemp, dir=staging_root))
            for upload, fname in zip(uploads, names, strict=True):
                await asyncio.to_thread(_copy_to, upload.file, staging / fname)
        target = self.upload_dir / collection

        def publish() -> Prepared:
            target.mkdir(parents=True, exist_ok=True)
            for fname in names:  # replace: re-uploading a file updates it instead of duplicating it
                os.replace(staging / fname, target / fname)
            shutil.rmtree(staging, ignore_errors=True)
            return [target / fname for fname in names], []

        async def prepare() -> Prepared:
            return await asyncio.to_thread(publish)

        force = fields.get("force", "").lower() in ("1", "true", "yes", "on")
        return await self.run_load(
            prepare, collection, description=fields.get("description"), force=force
        )


def _collection_name(name: str) -> str:
    try:
        return validate_collection_name(name)
    except errors.StoreError as exc:
        raise RequestError(
            400, exc.message, hint=exc.hint, code="invalid_collection_name"
        ) from None


def _files_inside(paths: list[Path], root: Path, settings: Settings) -> Prepared:
    """Folders are walked here, following symlinks as a load does; a file that resolves outside
    the root is refused and reported. Without such files the paths go to the load unchanged."""
    from loaders import discover_files

    files, _skipped = discover_files(list(paths), settings.loading)  # the load reports these
    outside = [f for f in files if not f.resolve().is_relative_to(root)]
    if not outside:
        return list(paths), []
    refused = [LoadFailure(str(f), "resolves outside server.load_root") for f in outside]
    logger.warning("refused %d file(s) that resolve outside server.load_root", len(outside))
    return [f for f in files if f not in outside], refused


def _log_late_load(task: asyncio.Task[LoadReport]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        logger.error("background load failed: %s", exc)
    else:
        logger.info("background load finished: %s", task.result().to_dict())
