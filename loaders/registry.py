"""Every file type a load accepts: its extensions, its loader and how it is checked.

A new format is one ``Loader`` class and one ``FileType`` row here; discovery, the file checks
and ``parse_file`` all read this table. Loaders are named by import path and imported on the
first file of their type: the loader modules themselves read this table (``loaders.sniff``), so
importing them from here would be a cycle, and a load of text files never pays for PDFium or
unstructured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from deepsearcher.config import Registry
from loaders.base import Loader


@dataclass(frozen=True)
class FileType:
    name: str  # Document.file_type
    extensions: tuple[str, ...]  # lower case, with the dot
    loader: str  # "module:Class" of the Loader
    # A text format: a file that is plainly binary (NUL bytes, a PDF or zip header) is refused
    # before parsing, with a reason instead of a parser's traceback.
    text: bool = False
    # An Office Open XML format: the zip part every valid file of the type holds.
    zip_part: str | None = None


FILE_TYPES: tuple[FileType, ...] = (
    # Plain text skips unstructured: ~19 ms vs ~0.15 ms per small file (see loaders.text).
    FileType("txt", (".txt",), "loaders.text:PlainTextLoader", text=True),
    FileType(
        "md", (".md", ".markdown"), "loaders.unstructured_loader:UnstructuredLoader", text=True
    ),
    FileType(
        "html", (".html", ".htm"), "loaders.unstructured_loader:UnstructuredLoader", text=True
    ),
    # unstructured's partition_pdf cannot be imported without unstructured_inference, and its
    # pdfminer backend is 30x slower than PDFium (see loaders.pdf).
    FileType("pdf", (".pdf",), "loaders.pdf:PdfiumLoader"),
    FileType(
        "docx",
        (".docx",),
        "loaders.unstructured_loader:UnstructuredLoader",
        zip_part="word/document.xml",
    ),
    FileType(
        "pptx",
        (".pptx",),
        "loaders.unstructured_loader:UnstructuredLoader",
        zip_part="ppt/presentation.xml",
    ),
    # Tables and e-mail lose header rows, cell formats and line breaks in unstructured.
    FileType("xlsx", (".xlsx",), "loaders.xlsx:XlsxLoader", zip_part="xl/workbook.xml"),
    FileType("csv", (".csv",), "loaders.tables:CsvLoader", text=True),
    FileType("eml", (".eml",), "loaders.email_loader:EmailLoader", text=True),
    FileType("json", (".json",), "loaders.json_loader:JsonLoader", text=True),
    FileType("jsonl", (".jsonl",), "loaders.json_loader:JsonLoader", text=True),
)

LOADERS: Mapping[str, Callable[[], Loader]] = Registry(
    "file type", {t.name: t.loader for t in FILE_TYPES}
)
"""File type (``loaders.SUPPORTED_EXTENSIONS`` values) -> loader factory."""

SUPPORTED_EXTENSIONS: Mapping[str, str] = MappingProxyType(
    {ext: t.name for t in FILE_TYPES for ext in t.extensions}
)
"""Lower-case extension -> file type (``Document.file_type``)."""

TEXT_TYPES = frozenset(t.name for t in FILE_TYPES if t.text)
OFFICE_ZIP_PARTS: Mapping[str, str] = MappingProxyType(
    {t.name: t.zip_part for t in FILE_TYPES if t.zip_part}
)
