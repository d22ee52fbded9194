"""PDF text extraction with PDFium (pypdfium2).

Why not unstructured's ``partition_pdf(strategy="fast")``: in unstructured 0.27.35 the module
imports ``unstructured_inference`` at load time, which is not installed on purpose (it drags in
torchvision and layout models), so it cannot even be imported. Its fast strategy is pdfminer.six
underneath anyway, which took 120 s for the 20 SEC 10-Q PDFs (1,037 pages) on this machine
before any element classification; PDFium takes ~4 s and also reads the one file
(``2023 Q1 MSFT.pdf``) on which pypdf gives up. pypdfium2 comes with unstructured (through
unstructured-client).

PDFium returns each page's text line by line. Lines are grouped into blocks by their
baselines: a vertical gap wider than normal line spacing, a change of font size or weight, or a
jump back up the page (a new column) starts a new block. A short single-line block set larger or
bolder than the page's body text is a ``Title`` and becomes the heading of what follows.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import statistics
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document
from loaders.base import Part, assemble_document, describe_exception

# PDFium is not thread-safe, not even across separate documents, and parse_file runs in worker
# threads. A process-wide lock around every PDFium call is what pypdfium2 prescribes.
_PDFIUM_LOCK = threading.Lock()

_LINE_RE = re.compile(r"[^\r\n]+")
_PARAGRAPH_GAP = 1.5  # baseline distance, in the page's line spacings, that starts a new block
_TITLE_SIZE_RATIO = 1.15
_TITLE_MAX_CHARS = 120
_BOLD_WEIGHT = 600
# PDFium's weight is often missing or wrong (380 for Arial-BoldMT); the font name is reliable.
_BOLD_NAME_RE = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)


@dataclass
class _Line:
    text: str
    y: float  # baseline, PDF units (grows upwards)
    size: float
    bold: bool


class PdfiumLoader:
    """Text PDFs: one element per block of lines, with its 1-based page number."""

    def load(self, path: Path, settings: LoadingSettings) -> Document:
        try:  # lazy: only PDFs need PDFium
            import pypdfium2 as pdfium
        except ImportError as exc:  # pragma: no cover - installed with unstructured
            raise LoaderError(
                "PDF support needs pypdfium2", "pip install pypdfium2 (it comes with unstructured)"
            ) from exc

        parts: list[Part] = []
        failed_pages: list[int] = []
        with _PDFIUM_LOCK:
            try:
                pdf = pdfium.PdfDocument(str(path))
            except pdfium.PdfiumError as exc:
                raise _open_error(exc) from exc
            try:
                n_pages = len(pdf)
                heading: str | None = None
                for index in range(n_pages):
                    try:
                        lines = _read_page_lines(pdf, index)
                    except pdfium.PdfiumError:
                        failed_pages.append(index + 1)
                        continue
                    heading = _blocks_to_parts(lines, index + 1, heading, parts)
            finally:
                pdf.close()

        metadata: dict[str, Any] = {"pages": n_pages}
        if failed_pages:
            metadata["pages_failed"] = failed_pages
        return assemble_document(
            path,
            parts,
            "pdf",
            metadata,
            "no text found (a scanned PDF without a text layer? OCR is not supported)",
        )


def _open_error(exc: Exception) -> LoaderError:
    msg = str(exc)
    if "password" in msg.lower():
        return LoaderError("encrypted PDF (a password is required)", "remove the password first")
    return LoaderError(f"could not parse: {describe_exception(exc)}")


def _read_page_lines(pdf: Any, index: int) -> list[_Line]:
    import pypdfium2.raw as pdfium_c  # lazy, as in PDFLoader.load

    page = pdf[index]
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_range()
        n_chars = textpage.count_chars()
        raw = textpage.raw
        x, y = ctypes.c_double(), ctypes.c_double()
        font_name = ctypes.create_string_buffer(128)
        flags = ctypes.c_int()
        lines: list[_Line] = []
        for m in _LINE_RE.finditer(text):
            stripped = m.group().strip()
            if not stripped:
                continue
            text_index = m.start() + (len(m.group()) - len(m.group().lstrip()))
            char = pdfium_c.FPDFText_GetCharIndexFromTextIndex(raw, text_index)
            if not 0 <= char < n_chars:
                char = min(text_index, n_chars - 1)
            if pdfium_c.FPDFText_GetCharOrigin(raw, char, ctypes.byref(x), ctypes.byref(y)):
                baseline = y.value
            else:  # keep the line; it just cannot start a block by position
                baseline = lines[-1].y if lines else 0.0
            size = float(pdfium_c.FPDFText_GetFontSize(raw, char))
            weight = int(pdfium_c.FPDFText_GetFontWeight(raw, char))
            pdfium_c.FPDFText_GetFontInfo(raw, char, font_name, 128, ctypes.byref(flags))
            bold = weight >= _BOLD_WEIGHT or bool(
                _BOLD_NAME_RE.search(font_name.value.decode("latin-1"))
            )
            lines.append(_Line(stripped, baseline, size, bold))
        return lines
    finally:
        textpage.close()
        page.close()


def _line_spacing(lines: list[_Line]) -> float:
    """The page's usual baseline distance: the most common drop between consecutive lines of
    one size (ties go to the smaller). Font sizes alone mislead: PDFs scale text with the text
    matrix, so a reported 13.3 pt font may be set 10 pt apart."""
    drops = Counter(
        round(prev.y - line.y)
        for prev, line in itertools.pairwise(lines)
        if prev.y - line.y >= 0.5 * max(line.size, 1.0) and abs(prev.size - line.size) <= 0.5
    )
    if drops:
        return float(min(drops, key=lambda d: (-drops[d], d)))
    return 1.2 * statistics.median(line.size for line in lines) or 12.0


def _starts_block(prev: _Line, line: _Line, spacing: float) -> bool:
    if abs(prev.size - line.size) > 0.5 or prev.bold != line.bold:
        return True
    drop = prev.y - line.y
    if drop < -0.5 * spacing:  # moved up the page: next column or an out-of-order run
        return True
    return drop > _PARAGRAPH_GAP * spacing


def _blocks_to_parts(
    lines: list[_Line], page: int, heading: str | None, parts: list[Part]
) -> str | None:
    """Append the page's blocks to ``parts``; return the heading in force after the page."""
    if not lines:
        return heading
    body_size = statistics.median(line.size for line in lines)
    spacing = _line_spacing(lines)
    blocks: list[list[_Line]] = [[lines[0]]]
    for prev, line in itertools.pairwise(lines):
        if _starts_block(prev, line, spacing):
            blocks.append([line])
        else:
            blocks[-1].append(line)
    for block in blocks:
        text = "\n".join(line.text for line in block)
        first = block[0]
        if (
            len(block) == 1
            and len(text) <= _TITLE_MAX_CHARS
            and (first.size >= _TITLE_SIZE_RATIO * body_size or first.bold)
            and text[-1] not in ".,;:"
            and any(ch.isalpha() for ch in text)
        ):
            heading = text
            parts.append(Part(text, kind="Title", page=page, heading=heading))
        else:
            parts.append(Part(text, kind="NarrativeText", page=page, heading=heading))
    return heading
