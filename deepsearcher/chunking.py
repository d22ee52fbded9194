"""Split parsed documents into chunks sized in the embedding model's own tokens.

``start``/``end`` index ``Document.text``, so a citation points at the exact passage. Pages and
heading come from the parsed elements the chunk overlaps.

The document is first cut into segments that no chunk crosses: runs of prose (on slides, one
run per slide, notes included), each table and each record. Prose is split recursively
(paragraphs, lines, sentences...). A table is split between rows and every chunk repeats its
header line (and sheet name or caption), so a row far down still says what its cells mean;
``Chunk.text`` is then header + rows while ``start``/``end`` span the rows themselves. A record
stays whole unless it alone exceeds the chunk size.

``chunk_file`` is a load's work on one file: parse it, chunk it, or say why it cannot be loaded.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from langchain_text_splitters import RecursiveCharacterTextSplitter

from deepsearcher.config import ChunkingSettings, LoadingSettings
from deepsearcher.errors import ConfigError, LoaderError
from deepsearcher.types import Chunk, Document, Element
from loaders import parse_file
from loaders.discovery import modified_time

logger = logging.getLogger(__name__)

# Paragraphs, lines, then sentence ends (Latin and CJK), clauses, words, characters: CJK text has
# no spaces, so without its punctuation a paragraph would be cut mid-word.
_SEPARATORS = ["\n\n", "\n", "。", "！", "？", ". ", "! ", "? ", "；", "; ", "，", ", ", " ", ""]

# Special tokens ([CLS], [SEP]) the encoder adds around every input.
_SPECIAL_TOKENS = 2

# File types whose ``Element.page`` is a slide: a chunk never spans two slides.
_SLIDE_TYPES = frozenset({"pptx", "ppt", "odp"})
# File types whose table ``title`` is a sheet name, shown as "Sheet: <name>".
_SHEET_TYPES = frozenset({"xlsx", "xls", "ods"})

# Separator of the context prefix parts (file name, heading).
CONTEXT_SEPARATOR = " › "


def doc_id_for(source: str) -> str:
    return hashlib.sha1(source.encode("utf-8")).hexdigest()


def chunk_id_for(doc_id: str, content_hash: str, index: int) -> str:
    # Deterministic: reloading the same file version rewrites the same rows (upsert), never dups.
    return hashlib.sha1(f"{doc_id}:{content_hash}:{index}".encode()).hexdigest()


_META_VALUE_MAX = 1000


def filterable_metadata(metadata: dict[str, object]) -> dict[str, object]:
    """The loader metadata a filter can test (``meta.NAME``): scalar values under plain names,
    long strings cut; lists such as attachments are left out."""
    out: dict[str, object] = {}
    for key, value in metadata.items():
        if not (isinstance(key, str) and key.isidentifier() and key.isascii()):
            continue
        if isinstance(value, str):
            out[key] = value[:_META_VALUE_MAX]
        elif isinstance(value, bool | int | float):
            out[key] = value
    return out


def display_name(source: str) -> str:
    """The file name of a path, or host + path of a URL: what a reader recognises."""
    if "://" in source:
        url = urlparse(source)
        return (url.netloc + url.path).rstrip("/") or source
    return PurePosixPath(source.replace("\\", "/")).name or source


@dataclass
class _Segment:
    start: int
    end: int
    element: Element | None = None  # the table or record; None for a prose run


@dataclass
class _Piece:
    start: int
    end: int
    text: str
    record_id: str | None = None


class Chunker:
    """Token-sized, structure-aware splitter; ``count_tokens`` is the embedder's tokenizer."""

    def __init__(
        self,
        settings: ChunkingSettings,
        count_tokens: Callable[[str], int],
        max_model_tokens: int | None = None,
    ) -> None:
        if settings.chunk_overlap >= settings.chunk_size:
            raise ConfigError(
                f"chunking.chunk_overlap ({settings.chunk_overlap}) must be smaller than "
                f"chunking.chunk_size ({settings.chunk_size})",
                "lower chunk_overlap",
            )
        if max_model_tokens and settings.chunk_size + _SPECIAL_TOKENS > max_model_tokens:
            raise ConfigError(
                f"chunking.chunk_size={settings.chunk_size} exceeds what the embedding model "
                f"reads ({max_model_tokens} tokens incl. {_SPECIAL_TOKENS} special); longer "
                "chunks would be silently truncated",
                f"set chunking.chunk_size to at most {max_model_tokens - _SPECIAL_TOKENS}",
            )
        self.settings = settings
        self._count = count_tokens
        size = settings.chunk_size
        # A trailing piece this small (a footer, a page number, half a sentence) is merged into
        # the chunk before it rather than retrieved and cited on its own.
        self._tiny = max(4, size // 8)
        # What the encoder reads in full: merged pieces and context prefixes must stay within.
        self._hard_limit = (
            max_model_tokens - _SPECIAL_TOKENS if max_model_tokens else size + self._tiny
        )
        self._splitter = self._make_splitter(size)

    def _make_splitter(self, size: int) -> RecursiveCharacterTextSplitter:
        return RecursiveCharacterTextSplitter(
            chunk_size=size,
            chunk_overlap=min(self.settings.chunk_overlap, size // 2),
            length_function=self._count,
            separators=_SEPARATORS,
            keep_separator="end",
            strip_whitespace=True,
        )

    def split(self, doc: Document, *, content_hash: str) -> list[Chunk]:
        doc_id = doc_id_for(doc.source)
        pieces: list[_Piece] = []
        for seg in _segments(doc):
            el = seg.element
            if el is None:
                pieces += self._split_prose(doc.text, seg.start, seg.end)
            elif el.kind == "Table":
                pieces += self._split_table(doc, el)
            else:
                pieces += self._split_record(doc.text, el)
        starts = [e.start for e in doc.elements]
        doc_meta = filterable_metadata(doc.metadata)
        chunks: list[Chunk] = []
        for piece in pieces:
            pages, heading = _locate(doc.elements, starts, piece.start, piece.end)
            index = len(chunks)
            chunk = Chunk(
                id=chunk_id_for(doc_id, content_hash, index),
                doc_id=doc_id,
                source=doc.source,
                content_hash=content_hash,
                index=index,
                text=piece.text,
                start=piece.start,
                end=piece.end,
                pages=pages,
                heading=heading,
                file_type=doc.file_type,
                record_id=piece.record_id,
                doc_meta=doc_meta,
            )
            if self.settings.context_prefix:
                chunk.context = self._context(doc, chunk)
            chunks.append(chunk)
        return chunks

    # -- prose and records ---------------------------------------------------------------------

    def _split_prose(
        self,
        text: str,
        start: int,
        end: int,
        splitter: RecursiveCharacterTextSplitter | None = None,
    ) -> list[_Piece]:
        sub = text[start:end]
        out: list[_Piece] = []
        search_from = 0
        for piece in (splitter or self._splitter).split_text(sub):
            if not piece.strip():
                continue
            # The splitter returns exact substrings; find each after the previous start so
            # repeated passages map to the right occurrence.
            at = sub.find(piece, search_from)
            if at < 0:
                at = sub.find(piece)
            out.append(_Piece(start + at, start + at + len(piece), piece))
            search_from = at + 1
        return self._merge_tiny_tail(out, text)

    def _merge_tiny_tail(self, pieces: list[_Piece], text: str) -> list[_Piece]:
        if len(pieces) < 2 or self._count(pieces[-1].text) >= self._tiny:
            return pieces
        prev, last = pieces[-2], pieces[-1]
        merged = text[prev.start : max(prev.end, last.end)]
        if self._count(merged) > self._hard_limit:
            return pieces
        return [*pieces[:-2], _Piece(prev.start, prev.start + len(merged), merged)]

    def _split_record(self, text: str, el: Element) -> list[_Piece]:
        span = text[el.start : el.end]
        if self._count(span) <= self.settings.chunk_size:
            pieces = [_Piece(el.start, el.end, span)]
        else:
            pieces = self._split_prose(text, el.start, el.end)
        for p in pieces:
            p.record_id = el.record_id
        return pieces

    # -- tables --------------------------------------------------------------------------------

    def _split_table(self, doc: Document, el: Element) -> list[_Piece]:
        text = doc.text
        title = _table_title(el, doc.file_type)
        span = text[el.start : el.end]
        whole = f"{title}\n{span}" if title else span
        size = self.settings.chunk_size
        if self._count(whole) <= size:
            return [_Piece(el.start, el.end, whole)]

        # Row lines with their offsets in Document.text; the header line is not a row.
        rows: list[tuple[int, str]] = []
        pos = el.start
        header = el.table_header.strip() if el.table_header else None
        for i, line in enumerate(span.split("\n")):
            if line.strip() and not (i == 0 and header is not None and line.strip() == header):
                rows.append((pos, line))
            pos += len(line) + 1
        head = "\n".join(x for x in (title, header) if x)
        head_tokens = self._count(head) if head else 0
        if not rows or head_tokens > size // 2:
            # A header that fills half the chunk leaves too little room to repeat it.
            return self._split_prose(text, el.start, el.end)

        budget = size - head_tokens
        row_tokens = [self._count(line) for _, line in rows]
        pieces: list[_Piece] = []
        i = 0
        while i < len(rows):
            if row_tokens[i] > budget:
                pieces += self._split_long_row(text, rows[i], head, budget)
                i += 1
                continue
            j, used = i, 0
            while j < len(rows) and row_tokens[j] <= budget and used + row_tokens[j] <= budget:
                used += row_tokens[j]
                j += 1
            # Per-row counts only estimate the joined text's; trim until the real count fits.
            while True:
                piece = self._table_piece(text, el, rows, i, j, title, header)
                if j - i == 1 or self._count(piece.text) <= size:
                    break
                j -= 1
            pieces.append(piece)
            i = j
        return pieces

    def _table_piece(
        self,
        text: str,
        el: Element,
        rows: list[tuple[int, str]],
        i: int,
        j: int,
        title: str | None,
        header: str | None,
    ) -> _Piece:
        end = rows[j - 1][0] + len(rows[j - 1][1])
        if i == 0:
            # The first chunk's span starts at the table itself, its own header line included.
            body = text[el.start : end]
            head = [title] if header is None or body.startswith(header) else [title, header]
            return _Piece(el.start, end, "\n".join([*(h for h in head if h), body]))
        start = rows[i][0]
        shown = "\n".join([*(h for h in (title, header) if h), text[start:end]])
        return _Piece(start, end, shown)

    def _split_long_row(
        self, text: str, row: tuple[int, str], head: str, budget: int
    ) -> list[_Piece]:
        """A row longer than a chunk: cut it like prose, the header before every piece."""
        offset, line = row
        # Two tokens spare: the joining newline, and a subword tokenizer (e5's SentencePiece)
        # can count header + piece one higher than the two apart.
        splitter = self._make_splitter(max(budget - 2, 8))
        pieces = self._split_prose(text, offset, offset + len(line), splitter)
        for p in pieces:
            p.text = f"{head}\n{p.text}" if head else p.text
        return pieces

    # -- context prefix ------------------------------------------------------------------------

    def _context(self, doc: Document, chunk: Chunk) -> str:
        """``file name › heading``, dropped part by part when the encoder would cut it."""
        name = display_name(doc.source)
        parts = [name]
        if chunk.heading and chunk.heading.strip() and chunk.heading.strip() != name:
            parts.append(" ".join(chunk.heading.split()))
        while parts:
            context = CONTEXT_SEPARATOR.join(parts)
            if self._count(f"{context}\n{chunk.text}") <= self._hard_limit:
                return context
            parts.pop()
        logger.debug("no room for a context prefix in chunk %d of %s", chunk.index, doc.source)
        return ""


def chunk_file(
    path: Path,
    loading: LoadingSettings,
    chunker: Chunker,
    content_hash: str,
    modified: str | None = None,
) -> list[Chunk]:
    """Blocking: one file of a load parsed and split, each chunk stamped with the file's
    modification time (``modified``, else read from the file). Every way one file fails (its
    loader refuses it, a parser bug, no text) is a ``LoaderError`` whose message is the reason
    the load reports; the load goes on with the other files. The local and the Ray pipelines
    both load files through here."""
    try:
        doc = parse_file(path, loading)
        chunks = chunker.split(doc, content_hash=content_hash)
        stamp = modified_time(path) if modified is None else modified
    except LoaderError:
        raise
    except Exception as exc:  # any parser bug is one file's failure, not the load's
        raise LoaderError(f"could not parse: {type(exc).__name__}: {exc}"[:300]) from exc
    if not chunks:
        raise LoaderError("no text found")
    for chunk in chunks:
        chunk.modified = stamp
    return chunks


def _table_title(el: Element, file_type: str) -> str | None:
    if not el.title or not el.title.strip():
        return None
    title = " ".join(el.title.split())
    if file_type in _SHEET_TYPES and not title.lower().startswith("sheet"):
        return f"Sheet: {title}"
    return title


def _segments(doc: Document) -> Iterator[_Segment]:
    """Spans no chunk crosses: prose runs (one per slide on decks), tables, records."""
    if not doc.elements:
        yield _Segment(0, len(doc.text))
        return
    slides = doc.file_type in _SLIDE_TYPES
    run: _Segment | None = None
    run_page: int | None = None
    for el in doc.elements:
        if el.kind in ("Table", "Record"):
            if run is not None:
                yield run
                run = None
            yield _Segment(el.start, el.end, el)
            continue
        if run is not None and slides and el.page != run_page:
            yield run
            run = None
        if run is None:
            run, run_page = _Segment(el.start, el.end), el.page
        else:
            run.end = el.end
    if run is not None:
        yield run


def _locate(
    elements: list[Element], starts: list[int], start: int, end: int
) -> tuple[list[int], str | None]:
    """Pages a span touches, and the heading of the section holding most of its text (a chunk
    that opens with the previous section's last lines belongs to the section it continues)."""
    pages: set[int] = set()
    cover: dict[str, int] = {}
    first = max(bisect.bisect_right(starts, start) - 1, 0)
    for el in elements[first:]:
        if el.start >= end:
            break
        if el.end <= start:
            continue
        if el.page is not None:
            pages.add(el.page)
        if el.heading:
            overlap = min(end, el.end) - max(start, el.start)
            # Insertion order breaks ties in favour of the later section (the one starting).
            cover[el.heading] = cover.pop(el.heading, 0) + overlap
    heading = None
    if cover:
        best = max(cover.values())
        heading = [h for h, n in cover.items() if n == best][-1]
    return sorted(pages), heading
