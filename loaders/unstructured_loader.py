"""Structured formats through unstructured: docx, pptx, html, md (and txt).

Tables (unstructured's ``metadata.text_as_html``) become ``Table`` parts with their header row
(see ``loaders.tables``); a slide's speaker notes become a ``SpeakerNotes`` part on its page.
CSV, xlsx and e-mail have loaders of their own (``loaders.tables``, ``loaders.xlsx``,
``loaders.email_loader``): unstructured loses their header rows, cell formats and line breaks.

unstructured is imported on first use only (it takes ~2 s and pulls in spaCy), after
``patch_unstructured`` has made it work offline. Text-based formats are decoded by us (see
``loaders.text.decode_text``) so every common encoding works the same way as for ``.txt``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document
from loaders._unstructured_patch import patch_unstructured
from loaders.base import Part, assemble_document
from loaders.sniff import file_type_of
from loaders.tables import parse_html_table, table_parts
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
        parts = _elements_to_parts(elements, file_type)
        if file_type == "pptx":
            parts = _add_speaker_notes(path, parts)
        return assemble_document(
            path, parts, file_type, metadata, _EMPTY_REASON.get(file_type, "no text found")
        )


# ---------------------------------------------------------------------------------------------
# One partition call per file type. Each returns unstructured elements and may add metadata.
# ---------------------------------------------------------------------------------------------


# The partitioners import lazily: unstructured is heavy to import, and a load of text,
# PDF or JSON files never needs it.


def _partition_docx(path: Path, metadata: dict[str, Any]) -> list[Any]:
    from unstructured.partition.docx import partition_docx

    return list(partition_docx(filename=str(path)))


def _partition_pptx(path: Path, metadata: dict[str, Any]) -> list[Any]:
    from unstructured.partition.pptx import partition_pptx

    # Notes are read by ``_add_speaker_notes``: unstructured's include_slide_notes=True
    # emits them as NarrativeText, indistinguishable from the slide's own text.
    return list(partition_pptx(filename=str(path), include_slide_notes=False))


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


_PARTITIONERS: dict[str, Callable[[Path, dict[str, Any]], list[Any]]] = {
    "docx": _partition_docx,
    "pptx": _partition_pptx,
    "html": _partition_html,
    "md": _partition_md,
    "txt": _partition_txt,
}


# ---------------------------------------------------------------------------------------------
# Elements -> parts
# ---------------------------------------------------------------------------------------------


def _elements_to_parts(elements: Iterable[Any], file_type: str) -> list[Part]:
    """Keep text, category, page; the heading is the latest ``Title`` (per-format rules below).

    A ``Title`` carries its own text as heading; a table is titled by its caption, else by the
    heading it sits under.
    """
    parts: list[Part] = []
    heading: str | None = None
    current_page: int | None = None
    for el in elements:
        category = str(getattr(el, "category", "") or "Text")
        if category == "PageBreak":
            continue
        md = el.metadata
        text = str(el.text or "")
        page = md.page_number
        if file_type == "pptx" and page != current_page:
            # A slide starts afresh: the last slide's title does not head this one.
            heading = None
            current_page = page
        if category == "Table" and md.text_as_html:
            table = parse_html_table(md.text_as_html)
            tables = table_parts(
                table.rows, title=table.caption or heading, heading=heading, page=page
            )
            if tables:
                parts += tables
                continue
        if category == "Title" and text.strip() and _is_heading(md, file_type):
            heading = " ".join(text.split())
        parts.append(Part(text, kind=category, page=page, heading=heading))
    return parts


def _is_heading(md: Any, file_type: str) -> bool:
    if file_type == "pptx":
        # Slide body text set in a placeholder is often a Title at depth >= 1.
        return md.category_depth in (None, 0)
    return True


def _add_speaker_notes(path: Path, parts: list[Part]) -> list[Part]:
    """Insert each slide's notes, as ``Speaker notes: ...``, after the slide's last part."""
    from pptx import Presentation  # lazy: only .pptx files need it

    notes: dict[int, str] = {}
    for number, slide in enumerate(Presentation(str(path)).slides, start=1):
        if not slide.has_notes_slide:
            continue
        frame = slide.notes_slide.notes_text_frame
        # PowerPoint stores a line break inside a paragraph as a vertical tab.
        text = frame.text.replace("\v", "\n").strip() if frame is not None else ""
        if text:
            notes[number] = text
    if not notes:
        return parts
    out: list[Part] = []
    heading_of: dict[int, str | None] = {}
    for i, part in enumerate(parts):
        out.append(part)
        if part.page is not None:
            heading_of[part.page] = part.heading
        next_page = parts[i + 1].page if i + 1 < len(parts) else None
        if part.page in notes and next_page != part.page:
            out.append(_notes_part(notes.pop(part.page), part.page, heading_of.get(part.page)))
    # Slides with notes but no text of their own, in slide order.
    for number in sorted(notes):
        at = next(
            (i for i, p in enumerate(out) if p.page is not None and p.page > number), len(out)
        )
        out.insert(at, _notes_part(notes[number], number, None))
    return out


def _notes_part(text: str, page: int, heading: str | None) -> Part:
    return Part(f"Speaker notes: {text}", kind="SpeakerNotes", page=page, heading=heading)
