"""File type -> loader, and ``parse_file``, the one entry point for parsing a file."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document
from loaders.base import Loader, describe_exception
from loaders.email_loader import EmailLoader
from loaders.json_loader import JsonLoader
from loaders.pdf import PdfiumLoader
from loaders.sniff import check_file
from loaders.tables import CsvLoader
from loaders.text import PlainTextLoader
from loaders.unstructured_loader import UnstructuredLoader
from loaders.xlsx import XlsxLoader

logger = logging.getLogger(__name__)

LOADERS: Mapping[str, Callable[[], Loader]] = MappingProxyType(
    {
        # Plain text skips unstructured: ~19 ms vs ~0.15 ms per small file (see loaders.text).
        "txt": PlainTextLoader,
        # unstructured's partition_pdf cannot be imported without unstructured_inference, and its
        # pdfminer backend is 30x slower than PDFium (see loaders.pdf).
        "pdf": PdfiumLoader,
        "docx": UnstructuredLoader,
        "pptx": UnstructuredLoader,
        # Tables and e-mail lose header rows, cell formats and line breaks in unstructured.
        "xlsx": XlsxLoader,
        "csv": CsvLoader,
        "html": UnstructuredLoader,
        "md": UnstructuredLoader,
        "eml": EmailLoader,
        "json": JsonLoader,
        "jsonl": JsonLoader,
    }
)
"""File type (``loaders.SUPPORTED_EXTENSIONS`` values) -> loader factory."""


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
