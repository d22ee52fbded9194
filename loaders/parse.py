"""``parse_file``, the one entry point for parsing a file."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document
from loaders.base import describe_exception
from loaders.registry import LOADERS
from loaders.sniff import check_file

logger = logging.getLogger(__name__)


def parse_file(path: Path, settings: LoadingSettings) -> Document:
    """Parse one file into a ``Document`` with non-empty text. Blocking: run it in a thread.

    Raises ``LoaderError`` with a one-line reason for any file that cannot be loaded (unsupported,
    empty, too large, corrupt, binary, no text); library exceptions are wrapped as
    ``could not parse: <ExcClass>: <message>``. The message does not repeat the path.
    """
    path = Path(path).expanduser().resolve()
    file_type = check_file(path, settings)
    loader = LOADERS[file_type]()
    started = time.perf_counter()
    try:
        doc = loader.load(path, settings)
    except LoaderError:
        raise
    except MemoryError:
        raise LoaderError("could not parse: out of memory", "raise loading.max_file_mb") from None
    except Exception as exc:
        logger.debug("parsing %s failed", path, exc_info=True)
        raise LoaderError(f"could not parse: {describe_exception(exc)}") from exc
    logger.debug(
        "parsed %s (%s): %d elements, %d chars in %.3fs",
        path,
        file_type,
        len(doc.elements),
        len(doc.text),
        time.perf_counter() - started,
    )
    return doc
