"""Tables as text that keeps its column names: CSV files, and the tables inside HTML/Office files.

Every table becomes one ``Table`` part whose text is the header line followed by one line per
row, cells joined by `` | ``; ``table_header`` is that header line and ``title`` the sheet name,
caption or file stem. The chunker splits such a part by rows and repeats header and title in
every chunk, so row 150 of a CSV still says which column each value is in.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from deepsearcher.config import LoadingSettings
from deepsearcher.types import Document
from loaders.base import Part, assemble_document
from loaders.text import normalize_newlines, read_text

CELL_SEPARATOR = " | "
_DELIMITERS = (",", ";", "\t", "|")
_SNIFF_CHARS = 65536


def clean_cell(value: str) -> str:
    """One line per row: whitespace and line breaks inside a cell collapse to single spaces."""
    return " ".join(value.split())


def table_parts(
    rows: Sequence[Sequence[str]],
    *,
    title: str | None,
    heading: str | None = None,
    page: int | None = None,
) -> list[Part]:
    """The parts for one grid of cells: an optional preamble, then the ``Table`` part.

    Empty rows and columns are dropped. Single-cell rows above a wider table (a report title
    typed in A1, "Exported 2024-05-01") are not its header: they become a text part of their
    own before the table. Returns ``[]`` when no cell holds text.
    """
    grid = [[clean_cell(str(cell)) for cell in row] for row in rows]
    grid = [row for row in grid if any(row)]
    if not grid:
        return []
    width = max(len(row) for row in grid)
    grid = [row + [""] * (width - len(row)) for row in grid]
    keep = [j for j in range(width) if any(row[j] for row in grid)]
    grid = [[row[j] for j in keep] for row in grid]

    parts: list[Part] = []
    if len(keep) > 1:
        preamble: list[str] = []
        while len(grid) > 1 and sum(1 for cell in grid[0] if cell) == 1:
            preamble.append(next(cell for cell in grid[0] if cell))
            grid = grid[1:]
        if preamble:
            parts.append(Part("\n".join(preamble), kind="Title", page=page, heading=heading))
    # Stripping each line keeps the part's text exactly as assembled (assemble_document strips
    # the whole text); a leading empty cell still shows as a leading "|".
    lines = [CELL_SEPARATOR.join(row).strip() for row in grid]
    parts.append(
        Part(
            "\n".join(lines),
            kind="Table",
            page=page,
            heading=heading,
            table_header=lines[0],
            title=title,
        )
    )
    return parts


# ---------------------------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------------------------


def sniff_delimiter(text: str) -> str:
    """The delimiter among ``, ; tab |`` that splits the first rows into the most columns
    consistently (most rows with the same count > 1). ``csv.Sniffer`` guesses letters and
    quotes as delimiters on real exports; this only ever picks one of the four."""
    sample = text[:_SNIFF_CHARS]
    if len(text) > _SNIFF_CHARS and "\n" in sample:
        sample = sample[: sample.rindex("\n")]  # drop the cut-off last line
    best, best_score = ",", (0.0, 0)
    for delimiter in _DELIMITERS:
        try:
            counts = [len(row) for row in csv.reader(io.StringIO(sample), delimiter=delimiter)]
        except csv.Error:
            continue
        counts = [n for n in counts if n > 0][:200]
        if not counts:
            continue
        width, n_rows = Counter(counts).most_common(1)[0]
        if width < 2:
            continue
        score = (n_rows / len(counts), width)
        if score > best_score:
            best, best_score = delimiter, score
    return best


class CsvLoader:
    """A CSV file (any common delimiter and encoding) as one ``Table`` titled by the file stem."""

    def load(self, path: Path, settings: LoadingSettings) -> Document:
        text, encoding = read_text(path)
        text = normalize_newlines(text)
        delimiter = sniff_delimiter(text)
        rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
        metadata: dict[str, Any] = {"encoding": encoding, "delimiter": delimiter}
        parts = table_parts(rows, title=path.stem, heading=path.stem)
        if parts:
            metadata["rows"] = parts[-1].text.count("\n")  # data rows, without the header
        return assemble_document(path, parts, "csv", metadata, "no text found (no cell has text)")


# ---------------------------------------------------------------------------------------------
# HTML tables (unstructured's ``metadata.text_as_html`` for html, docx and pptx tables)
# ---------------------------------------------------------------------------------------------


@dataclass
class HtmlTable:
    caption: str = ""
    rows: list[list[str]] = field(default_factory=list)


class _TableParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.table = HtmlTable()
        self._cell: list[str] | None = None
        self._colspan = 1
        self._caption: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.table.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
            span = dict(attrs).get("colspan") or "1"
            self._colspan = max(1, min(int(span), 100)) if span.isdigit() else 1
        elif tag == "caption":
            self._caption = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            if not self.table.rows:
                self.table.rows.append([])
            # A spanning header cell names every column under it.
            self.table.rows[-1].extend([clean_cell("".join(self._cell))] * self._colspan)
            self._cell = None
        elif tag == "caption" and self._caption is not None:
            self.table.caption = clean_cell("".join(self._caption))
            self._caption = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        elif self._caption is not None:
            self._caption.append(data)


def parse_html_table(table_html: str) -> HtmlTable:
    """Rows of cells (a ``colspan`` cell repeated under each column it spans) and the caption."""
    parser = _TableParser()
    parser.feed(table_html)
    parser.close()
    return parser.table
