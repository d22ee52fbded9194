"""Structured formats through unstructured: docx, pptx, xlsx, csv, html, md, eml (and txt).

unstructured is imported on first use only (it takes ~2 s and pulls in spaCy), after
``patch_unstructured`` has made it work offline. Text-based formats are decoded by us (see
``loaders.text.decode_text``) so every common encoding works the same way as for ``.txt``.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document
from loaders._unstructured_patch import patch_unstructured
from loaders.base import Part, assemble_document
from loaders.sniff import file_type_of
from loaders.text import read_text

_EMPTY_REASON = {
    "html": "no text found (the page holds only markup, scripts or boilerplate)",
}


class UnstructuredLoader:
    """Partitions a file with unstructured and keeps each element's category, page and heading."""

    def load(self, path: Path, settings: LoadingSettings) -> Document:
        file_type = file_type_of(path)
        partition = _PARTITIONERS.get(file_type or "")
        if file_type is None or partition is None:
            raise LoaderError(f"unstructured loader does not handle {path.suffix or 'this file'}")
        patch_unstructured()
        metadata: dict[str, Any] = {}
        elements = partition(path, metadata)
        if file_type == "eml":
            header = _email_header(elements)
            subject = header[0].heading if header else None
            parts = header + _elements_to_parts(elements, file_type, subject)
        else:
            parts = _elements_to_parts(elements, file_type)
        return assemble_document(
            path, parts, file_type, metadata, _EMPTY_REASON.get(file_type, "no text found")
        )


# ---------------------------------------------------------------------------------------------
# One partition call per file type. Each returns unstructured elements and may add metadata.
# ---------------------------------------------------------------------------------------------


def _partition_docx(path: Path, metadata: dict[str, Any]) -> list[Any]:
    from unstructured.partition.docx import partition_docx

    return list(partition_docx(filename=str(path)))


def _partition_pptx(path: Path, metadata: dict[str, Any]) -> list[Any]:
    from unstructured.partition.pptx import partition_pptx

    return list(partition_pptx(filename=str(path)))


def _partition_xlsx(path: Path, metadata: dict[str, Any]) -> list[Any]:
    from unstructured.partition.xlsx import partition_xlsx

    return list(partition_xlsx(filename=str(path)))


def _partition_csv(path: Path, metadata: dict[str, Any]) -> list[Any]:
    from unstructured.partition.csv import partition_csv

    text, metadata["encoding"] = read_text(path)
    data = io.BytesIO(text.encode("utf-8"))
    return list(partition_csv(file=data, encoding="utf-8", metadata_filename=str(path)))


def _partition_html(path: Path, metadata: dict[str, Any]) -> list[Any]:
    from unstructured.partition.html import partition_html

    text, metadata["encoding"] = read_text(path)
    # partition_html already drops <nav>, <script>, <style>, <footer> and <header> subtrees.
    return list(partition_html(text=text, skip_headers_and_footers=True))


def _partition_md(path: Path, metadata: dict[str, Any]) -> list[Any]:
    from unstructured.partition.md import partition_md

    text, metadata["encoding"] = read_text(path)
    return list(partition_md(text=text))


def _partition_txt(path: Path, metadata: dict[str, Any]) -> list[Any]:
    from unstructured.partition.text import partition_text

    text, metadata["encoding"] = read_text(path)
    return list(partition_text(text=text))


def _partition_eml(path: Path, metadata: dict[str, Any]) -> list[Any]:
    from unstructured.partition.email import partition_email

    # Attachments are not partitioned: a PDF attachment would need unstructured's PDF path,
    # which cannot be imported here (see loaders.pdf), and would fail the whole message.
    return list(partition_email(filename=str(path), process_attachments=False))


_PARTITIONERS: dict[str, Callable[[Path, dict[str, Any]], list[Any]]] = {
    "docx": _partition_docx,
    "pptx": _partition_pptx,
    "xlsx": _partition_xlsx,
    "csv": _partition_csv,
    "html": _partition_html,
    "md": _partition_md,
    "eml": _partition_eml,
    "txt": _partition_txt,
}


# ---------------------------------------------------------------------------------------------
# Elements -> parts
# ---------------------------------------------------------------------------------------------


def _elements_to_parts(
    elements: Iterable[Any], file_type: str, heading: str | None = None
) -> list[Part]:
    """Keep text, category, page; the heading is the latest ``Title`` (per-format rules below)."""
    parts: list[Part] = []
    current_page: int | None = None
    for el in elements:
        category = str(getattr(el, "category", "") or "Text")
        if category == "PageBreak":
            continue
        md = el.metadata
        text = str(el.text or "")
        if category == "Table" and md.text_as_html:
            text = html_table_to_text(md.text_as_html) or text
        page = md.page_number
        if file_type in ("pptx", "xlsx") and page != current_page:
            # A slide or sheet starts afresh: the last slide's title does not head this one.
            heading = md.page_name if file_type == "xlsx" else None
            current_page = page
        if category == "Title" and text.strip() and _is_heading(md, file_type):
            heading = " ".join(text.split())
        parts.append(Part(text, kind=category, page=page, heading=heading))
    return parts


def _is_heading(md: Any, file_type: str) -> bool:
    if file_type == "eml":
        # Short body lines ("Thanks,", a signature) come out as Title; the subject heads it all.
        return False
    if file_type == "pptx":
        # Slide body text set in a placeholder is often a Title at depth >= 1.
        return md.category_depth in (None, 0)
    return True


def _email_header(elements: list[Any]) -> list[Part]:
    if not elements:
        return []
    md = elements[0].metadata
    subject = (md.subject or "").strip()
    lines = [
        f"Subject: {subject}" if subject else "",
        f"From: {', '.join(md.sent_from)}" if md.sent_from else "",
        f"To: {', '.join(md.sent_to)}" if md.sent_to else "",
        f"Cc: {', '.join(md.cc_recipient)}" if getattr(md, "cc_recipient", None) else "",
    ]
    header = "\n".join(line for line in lines if line)
    return [Part(header, kind="EmailHeader", heading=subject or None)] if header else []


class _TableText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            if not self.rows:
                self.rows.append([])
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_table_to_text(table_html: str) -> str:
    """One line per row, cells separated by `` | ``: keeps the row structure that unstructured's
    space-joined table text loses."""
    parser = _TableText()
    parser.feed(table_html)
    parser.close()
    lines = [" | ".join(cell for cell in row) for row in parser.rows if any(row)]
    return "\n".join(lines)
