"""File discovery and parsing into ``Document``s.

Importing this package is cheap and has no side effects: unstructured (and spaCy) are imported
on the first file that needs them, and PDFium on the first PDF.

    files, skipped = discover_files(["docs/"], settings.loading)
    doc = parse_file(files[0], settings.loading)  # blocking: run it in a thread
"""

from __future__ import annotations

from loaders.base import Loader
from loaders.discovery import discover_files
from loaders.email_loader import EmailLoader
from loaders.json_loader import JsonLoader
from loaders.parse import parse_file
from loaders.pdf import PdfiumLoader
from loaders.registry import FILE_TYPES, LOADERS, SUPPORTED_EXTENSIONS, FileType
from loaders.tables import CsvLoader
from loaders.text import PlainTextLoader, decode_text
from loaders.unstructured_loader import UnstructuredLoader
from loaders.xlsx import XlsxLoader

__all__ = [
    "FILE_TYPES",
    "LOADERS",
    "SUPPORTED_EXTENSIONS",
    "CsvLoader",
    "EmailLoader",
    "FileType",
    "JsonLoader",
    "Loader",
    "PdfiumLoader",
    "PlainTextLoader",
    "UnstructuredLoader",
    "XlsxLoader",
    "decode_text",
    "discover_files",
    "parse_file",
]
