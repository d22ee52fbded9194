from __future__ import annotations

import itertools

import pytest

from deepsearcher.chunking import Chunker
from deepsearcher.config import ChunkingSettings
from deepsearcher.errors import ConfigError
from deepsearcher.types import Document, Element


def _doc_with_pages(paragraphs_per_page: list[list[str]]) -> Document:
    text, elements = "", []
    for page_no, paragraphs in enumerate(paragraphs_per_page, start=1):
        for p in paragraphs:
            if text:
                text += "\n\n"
            elements.append(
                Element(len(text), len(text) + len(p), page=page_no, heading=f"Section {page_no}")
            )
            text += p
    return Document(source="/docs/report.pdf", text=text, elements=elements, file_type="pdf")


def test_chunks_fit_the_encoder_and_offsets_are_exact(embedder) -> None:
    sentences = [
        f"Sentence number {i} talks about robots, batteries and payload limits." for i in range(200)
    ]
    doc = _doc_with_pages(
        [
            [" ".join(sentences[i : i + 10]) for i in range(p * 50, p * 50 + 50, 10)]
            for p in range(4)
        ]
    )
    chunker = Chunker(
        ChunkingSettings(chunk_size=64, chunk_overlap=8), embedder.count_tokens, embedder.max_tokens
    )
    chunks = chunker.split(doc, content_hash="h1")
    assert len(chunks) > 10
    for c in chunks:
        assert doc.text[c.start : c.end] == c.text
        assert embedder.count_tokens(c.text) <= 64
        assert c.pages and all(1 <= p <= 4 for p in c.pages)
        assert c.heading == f"Section {c.pages[0]}"
    assert [c.index for c in chunks] == list(range(len(chunks)))
    # Chunks cover the document in order.
    assert chunks[0].start == 0 and chunks[-1].end == len(doc.text)
    assert all(a.start < b.start for a, b in itertools.pairwise(chunks))
    # Page numbers follow the text: the last chunk is on the last page.
    assert chunks[-1].pages == [4]


def test_ids_are_deterministic_and_depend_on_content(embedder) -> None:
    doc = _doc_with_pages([["alpha beta gamma " * 40]])
    chunker = Chunker(ChunkingSettings(chunk_size=32, chunk_overlap=4), embedder.count_tokens)
    a = [c.id for c in chunker.split(doc, content_hash="v1")]
    b = [c.id for c in chunker.split(doc, content_hash="v1")]
    c = [c.id for c in chunker.split(doc, content_hash="v2")]
    assert a == b and len(set(a)) == len(a)
    assert not set(a) & set(c)


def test_chinese_text_without_spaces_is_split_within_limits(embedder) -> None:
    text = "深度搜索系统会把问题拆成多个子问题。" * 60
    doc = Document(source="/docs/zh.md", text=text, elements=[Element(0, len(text))])
    chunks = Chunker(ChunkingSettings(chunk_size=48, chunk_overlap=8), embedder.count_tokens).split(
        doc, content_hash="z"
    )
    assert len(chunks) > 3
    assert all(
        embedder.count_tokens(c.text) <= 48 and doc.text[c.start : c.end] == c.text for c in chunks
    )


def test_chunk_size_beyond_model_limit_is_rejected(embedder) -> None:
    with pytest.raises(ConfigError, match="exceeds what the embedding model"):
        Chunker(
            ChunkingSettings(chunk_size=400, chunk_overlap=10),
            embedder.count_tokens,
            embedder.max_tokens,
        )
    with pytest.raises(ConfigError, match="overlap"):
        Chunker(ChunkingSettings(chunk_size=50, chunk_overlap=50), embedder.count_tokens)
