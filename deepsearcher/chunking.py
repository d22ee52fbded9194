"""Split parsed documents into chunks sized in the embedding model's own tokens.

Chunks are exact substrings of ``Document.text``; ``start``/``end`` index it, so a citation can
point at the passage. Pages and heading come from the parsed elements the chunk overlaps.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable

from langchain_text_splitters import RecursiveCharacterTextSplitter

from deepsearcher.config import ChunkingSettings
from deepsearcher.errors import ConfigError
from deepsearcher.types import Chunk, Document

# Paragraphs, lines, then sentence ends (Latin and CJK), clauses, words, characters: CJK text has
# no spaces, so without its punctuation a paragraph would be cut mid-word.
_SEPARATORS = ["\n\n", "\n", "。", "！", "？", ". ", "! ", "? ", "；", "; ", "，", ", ", " ", ""]

# Special tokens ([CLS], [SEP]) the encoder adds around every input.
_SPECIAL_TOKENS = 2


def doc_id_for(source: str) -> str:
    return hashlib.sha1(source.encode("utf-8")).hexdigest()


def chunk_id_for(doc_id: str, content_hash: str, index: int) -> str:
    # Deterministic: reloading the same file version rewrites the same rows (upsert), never dups.
    return hashlib.sha1(f"{doc_id}:{content_hash}:{index}".encode()).hexdigest()


class Chunker:
    """Token-sized recursive splitter; ``count_tokens`` is the embedder's tokenizer."""

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
        self._splitter = RecursiveCharacterTextSplitter(
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            length_function=count_tokens,
            separators=_SEPARATORS,
            keep_separator="end",
            add_start_index=True,
            strip_whitespace=True,
        )

    def split(self, doc: Document, *, content_hash: str) -> list[Chunk]:
        doc_id = doc_id_for(doc.source)
        starts = [e.start for e in doc.elements]
        chunks: list[Chunk] = []
        search_from = 0
        for piece in self._splitter.split_text(doc.text):
            if not piece.strip():
                continue
            # The splitter returns exact substrings; find each after the previous start so
            # repeated passages map to the right occurrence.
            start = doc.text.find(piece, search_from)
            if start < 0:
                start = doc.text.find(piece)
            end = start + len(piece)
            search_from = start + 1
            pages: list[int] = []
            heading = None
            first = max(bisect.bisect_right(starts, start) - 1, 0)
            for el in doc.elements[first:]:
                if el.start >= end:
                    break
                if el.end <= start:
                    continue
                if heading is None and el.heading:
                    heading = el.heading
                if el.page is not None and el.page not in pages:
                    pages.append(el.page)
            index = len(chunks)
            chunks.append(
                Chunk(
                    id=chunk_id_for(doc_id, content_hash, index),
                    doc_id=doc_id,
                    source=doc.source,
                    content_hash=content_hash,
                    index=index,
                    text=piece,
                    start=start,
                    end=end,
                    pages=sorted(pages),
                    heading=heading,
                    file_type=doc.file_type,
                )
            )
        return chunks
