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
            # The model's own limit leaves no room for its special tokens: too long.
            ChunkingSettings(chunk_size=embedder.max_tokens, chunk_overlap=10),
            embedder.count_tokens,
            embedder.max_tokens,
        )
    with pytest.raises(ConfigError, match="overlap"):
        Chunker(ChunkingSettings(chunk_size=50, chunk_overlap=50), embedder.count_tokens)


def _chunker(embedder, size: int = 200, overlap: int = 32, **kw) -> Chunker:
    return Chunker(
        ChunkingSettings(chunk_size=size, chunk_overlap=overlap, **kw),
        embedder.count_tokens,
        embedder.max_tokens,
    )


def _assemble(parts: list[tuple[str, dict]], source: str, file_type: str) -> Document:
    """A Document the way loaders build one: element texts joined by blank lines."""
    text, elements = "", []
    for body, fields in parts:
        if text:
            text += "\n\n"
        elements.append(Element(len(text), len(text) + len(body), **fields))
        text += body
    return Document(source=source, text=text, elements=elements, file_type=file_type)


HEADER = "Employee | Role | Office | Start date | Extension"
INTRO = "The staff list of the Lyon office, as exported by HR in March."
OUTRO = "Report corrections to the HR mailbox before the end of the quarter."


def _row(i: int) -> str:
    return f"Person {i:03d} | Engineer level {i % 5} | Lyon | 2020-01-{i % 28 + 1:02d} | {4000 + i}"


def _staff_doc(rows: int, long_row: str | None = None) -> Document:
    lines = [HEADER] + [_row(i) for i in range(1, rows + 1)]
    if long_row:
        lines.insert(3, long_row)
    table = {"kind": "Table", "table_header": HEADER, "title": "Staff", "page": 1}
    return _assemble(
        [(INTRO, {"page": 1}), ("\n".join(lines), table), (OUTRO, {"page": 1})],
        "/docs/staff.xlsx",
        "xlsx",
    )


def test_big_table_repeats_its_header_in_every_chunk_and_never_cuts_a_row(embedder) -> None:
    doc = _staff_doc(200)
    table_el = doc.elements[1]
    chunks = _chunker(embedder).split(doc, content_hash="t")
    table_chunks = [c for c in chunks if c.start < table_el.end and c.end > table_el.start]
    assert len(table_chunks) > 5
    rows_seen: list[str] = []
    for c in table_chunks:
        # Each chunk reads "Sheet: Staff", the column names, then whole rows...
        assert c.text.startswith(f"Sheet: Staff\n{HEADER}\n"), c.text[:80]
        assert embedder.count_tokens(c.text) <= 200
        # ...and cites exactly the rows it holds: its span is text of the document.
        assert table_el.start <= c.start < c.end <= table_el.end
        assert c.text.endswith(doc.text[c.start : c.end])
        body = c.text.split("\n")[2:]
        assert all(line in {_row(i) for i in range(1, 201)} for line in body)
        rows_seen += body
        # No table chunk carries the prose around the table.
        assert INTRO not in c.text and OUTRO not in c.text
    assert rows_seen == [_row(i) for i in range(1, 201)]  # every row once, in order
    row150 = next(c for c in chunks if _row(150) in c.text)
    assert "Employee | Role | Office" in row150.text and "Sheet: Staff" in row150.text
    assert [c.text for c in chunks if INTRO in c.text] == [INTRO]
    assert [c.text for c in chunks if OUTRO in c.text] == [OUTRO]


def test_small_table_stays_whole_and_a_giant_row_is_split_under_the_header(embedder) -> None:
    doc = _staff_doc(5)
    table_el = doc.elements[1]
    (table,) = [c for c in _chunker(embedder).split(doc, content_hash="t") if "Person" in c.text]
    assert (table.start, table.end) == (table_el.start, table_el.end)
    assert table.text == "Sheet: Staff\n" + doc.text[table_el.start : table_el.end]

    giant = "Person 999 | " + " ".join(f"note{i} about the onboarding plan" for i in range(150))
    doc = _staff_doc(5, long_row=giant)
    pieces = [
        c for c in _chunker(embedder, 100, 16).split(doc, content_hash="t") if "note" in c.text
    ]
    assert len(pieces) > 2
    for c in pieces:
        assert c.text.startswith(f"Sheet: Staff\n{HEADER}\n")
        assert embedder.count_tokens(c.text) <= 100
        assert c.text.endswith(doc.text[c.start : c.end])


def _record(i: int, words: int = 12) -> str:
    notes = " ".join(f"detail{i}-{w}" for w in range(words))
    return f"id: T-{i}\ncustomer: Client {i}\nstatus: open\nnotes: {notes}"


def test_records_are_never_merged_and_a_big_record_is_split_with_its_id(embedder) -> None:
    records = [_record(i) for i in range(6)]
    records[3] = _record(3, words=300)
    doc = _assemble(
        [(r, {"kind": "Record", "record_id": f"T-{i}"}) for i, r in enumerate(records)],
        "/docs/tickets.jsonl",
        "jsonl",
    )
    chunks = _chunker(embedder).split(doc, content_hash="r")
    for i, rec in enumerate(records):
        el = doc.elements[i]
        mine = [c for c in chunks if c.record_id == f"T-{i}"]
        assert all(el.start <= c.start and c.end <= el.end for c in mine)
        assert all(doc.text[c.start : c.end] == c.text for c in mine)
        if i == 3:
            assert len(mine) > 2 and all(embedder.count_tokens(c.text) <= 200 for c in mine)
        else:
            assert [c.text for c in mine] == [rec]
    assert len(chunks) == sum(1 for _ in chunks if _.record_id)  # nothing outside a record


def _slide_text(n: int, words: int) -> str:
    return " ".join(f"point{n}x{w} of the roadmap" for w in range(words))


def test_slides_with_notes_never_share_a_chunk_and_a_footer_is_not_left_alone(embedder) -> None:
    parts: list[tuple[str, dict]] = []
    for n in range(1, 6):
        parts += [
            (f"Quarter plan {n}", {"page": n, "kind": "Title"}),
            (_slide_text(n, 8), {"page": n, "kind": "NarrativeText"}),
            (f"Speaker notes {n}: stress the hiring freeze.", {"page": n, "kind": "SpeakerNotes"}),
        ]
    # The last slide is longer than a chunk and ends with its footer.
    parts += [
        ("Quarter plan 6", {"page": 6, "kind": "Title"}),
        (_slide_text(6, 30), {"page": 6, "kind": "NarrativeText"}),
        (_slide_text(7, 34), {"page": 6, "kind": "NarrativeText"}),
        ("Confidential, page 6", {"page": 6, "kind": "Footer"}),
    ]
    doc = _assemble(parts, "/docs/plan.pptx", "pptx")
    chunks = _chunker(embedder).split(doc, content_hash="s")
    assert all(len(c.pages) == 1 for c in chunks), [c.pages for c in chunks]
    for n in range(1, 6):
        (slide,) = [c for c in chunks if c.pages == [n]]
        assert f"Quarter plan {n}" in slide.text and f"Speaker notes {n}" in slide.text
    last = [c for c in chunks if c.pages == [6]]
    assert len(last) >= 2
    footer = next(c for c in last if "Confidential, page 6" in c.text)
    assert "roadmap" in footer.text  # merged into its neighbour, not a chunk of its own
    assert all(doc.text[c.start : c.end] == c.text for c in chunks)


def test_chunk_spanning_two_pages_records_both(embedder) -> None:
    doc = _doc_with_pages([["Revenue grew in the north region."], ["Costs fell in the south."]])
    (chunk,) = _chunker(embedder).split(doc, content_hash="p")
    assert (chunk.page, chunk.page_end, chunk.pages) == (1, 2, [1, 2])


VOCAB = [
    "staff",
    "report",
    "their",
    "absence",
    "to",
    "the",
    "manager",
    "before",
    "nine",
    "and",
    "bring",
    "a",
    "note",
    "from",
    "a",
    "doctor",
    "after",
    "three",
    "days",
    "away",
]


def test_heading_is_the_section_holding_most_of_the_chunk(embedder) -> None:
    parts: list[tuple[str, dict]] = []
    sections = ["1. Scope", "2. Sick leave", "3. Travel", "4. Equipment"]
    for s in sections:
        parts.append((s, {"heading": s, "kind": "Title"}))
        # A section ends with short paragraphs, which the overlap carries into the next chunk.
        for p, n in enumerate([30, 30, 8]):
            words = " ".join(VOCAB[(w + p) % len(VOCAB)] for w in range(n))
            parts.append((f"{words}.", {"heading": s}))
        parts.append((f"End of {s}.", {"heading": s}))
    doc = _assemble(parts, "/docs/handbook.md", "md")
    starts = [doc.text.index(s) for s in sections] + [len(doc.text)]

    def majority(start: int, end: int) -> str:
        share = [min(end, b) - max(start, a) for a, b in itertools.pairwise(starts)]
        return sections[share.index(max(share))]

    chunks = _chunker(embedder, 100, 40).split(doc, content_hash="h")
    # The case the old labels got wrong: a chunk opening with the previous section's tail.
    straddling = [c for c in chunks if majority(c.start, c.end) != majority(c.start, c.start + 1)]
    assert straddling
    for c in chunks:
        assert c.heading == majority(c.start, c.end), (c.heading, c.text[:60])


def test_context_prefix_is_indexed_but_not_part_of_the_passage(embedder) -> None:
    doc = _doc_with_pages([["Employees report sick leave to their manager by 9 am."]])
    plain = _chunker(embedder).split(doc, content_hash="c")[0]
    assert plain.context == "" and plain.indexed_text == plain.text
    (chunk,) = _chunker(embedder, context_prefix=True).split(doc, content_hash="c")
    assert chunk.context == "report.pdf › Section 1"
    assert chunk.indexed_text == f"report.pdf › Section 1\n{chunk.text}"
    assert doc.text[chunk.start : chunk.end] == chunk.text
    assert chunk.id == plain.id  # ids depend on file, version and position only


def test_cli_cites_the_page_range_of_a_chunk_across_pages(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from deepsearcher.cli import app
    from tests.fixture_files import make_pdf

    docs = tmp_path / "docs"
    docs.mkdir()
    make_pdf(
        docs / "report.pdf",
        ["Revenue grew by nine percent in the north region.", "Costs fell in the south region."],
    )
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "q.db")}
    runner = CliRunner()
    res = runner.invoke(app, ["load", str(docs), "--collection", "docs"], env=env)
    assert res.exit_code == 0, res.output
    # No LLM configured: the query prints the retrieved passages with their citations.
    question = ["query", "How did revenue and costs change?", "--collection", "docs"]
    res = runner.invoke(app, question, env=env)
    assert res.exit_code == 0, res.output
    assert "report.pdf p. 1–2 [" in res.stdout
    (src,) = json.loads(runner.invoke(app, [*question, "--json"], env=env).stdout)["sources"]
    assert (src["page"], src["page_end"]) == (1, 2)
