"""Loaders on real files generated into tmp_path: formats, bad files, discovery, offline."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document, Element
from loaders import SUPPORTED_EXTENSIONS, UnstructuredLoader, discover_files, parse_file
from tests.fixture_files import (
    make_docx,
    make_docx_with_table,
    make_eml,
    make_html,
    make_html_with_table,
    make_pdf,
    make_pptx,
    make_pptx_with_notes,
    make_qp_eml,
    make_workbook,
    make_xlsx,
    write_csv,
    write_gbk,
    write_latin1,
)

SETTINGS = LoadingSettings()
REPO = Path(__file__).resolve().parents[1]


def element_texts(doc: Document) -> list[str]:
    return [doc.text[e.start : e.end] for e in doc.elements]


def assert_well_formed(doc: Document) -> None:
    """Non-empty text, elements in order, spans exact and joined by blank lines."""
    assert doc.text.strip()
    assert doc.elements
    assert "\n\n".join(element_texts(doc)) == doc.text
    for e in doc.elements:
        span = doc.text[e.start : e.end]
        assert span and span == span.strip()


def load_error(path: Path, settings: LoadingSettings = SETTINGS) -> str:
    with pytest.raises(LoaderError) as info:
        parse_file(path, settings)
    message = info.value.message
    assert "\n" not in message and message == str(info.value)
    assert info.value.hint
    return message


# ---------------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------------


def test_pdf_elements_carry_pages_and_headings(tmp_path: Path) -> None:
    path = make_pdf(
        tmp_path / "report.pdf",
        [
            "# Introduction\nThe alpha value is 42 and it is\nwrapped over two lines.\n\n"
            "A second paragraph here.",
            "# Methods\nBeta text on page two.",
            "Gamma on page three.",
        ],
    )
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    assert doc.file_type == "pdf" and doc.source == str(path.resolve())
    assert doc.metadata["pages"] == 3
    assert sorted({e.page for e in doc.elements}) == [1, 2, 3]
    by_text = {doc.text[e.start : e.end]: e for e in doc.elements}
    assert by_text["Introduction"].kind == "Title"
    intro = by_text["The alpha value is 42 and it is\nwrapped over two lines."]
    assert (intro.page, intro.heading) == (1, "Introduction")
    assert by_text["A second paragraph here."].page == 1
    beta = by_text["Beta text on page two."]
    assert (beta.page, beta.heading) == (2, "Methods")
    assert by_text["Gamma on page three."].page == 3


def test_docx_heading_heads_paragraphs(tmp_path: Path) -> None:
    path = make_docx(
        tmp_path / "q.docx",
        "Quarterly Report",
        ["Revenue grew by ten percent.", "Costs were flat."],
    )
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    assert element_texts(doc) == [
        "Quarterly Report",
        "Revenue grew by ten percent.",
        "Costs were flat.",
    ]
    assert doc.elements[0].kind == "Title"
    assert {e.heading for e in doc.elements} == {"Quarterly Report"}


def test_pptx_one_page_per_slide_titled_by_slide(tmp_path: Path) -> None:
    path = make_pptx(
        tmp_path / "deck.pptx",
        [("Roadmap", "Ship the loader in March"), ("Risks", "Offline machines")],
    )
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    pages = {doc.text[e.start : e.end]: (e.page, e.heading) for e in doc.elements}
    assert pages["Ship the loader in March"] == (1, "Roadmap")
    assert pages["Offline machines"] == (2, "Risks")


def test_xlsx_and_csv_keep_rows(tmp_path: Path) -> None:
    xlsx = make_xlsx(tmp_path / "fruit.xlsx", [["name", "count"], ["apples", 3], ["pears", 7]])
    doc = parse_file(xlsx, SETTINGS)
    assert_well_formed(doc)
    assert "apples | 3\npears | 7" in doc.text
    assert doc.elements[0].kind == "Table"
    assert doc.elements[0].heading == "Sheet1" and doc.elements[0].page == 1

    csv = tmp_path / "cities.csv"
    csv.write_text("city,population\nParis,2100000\nRome,2800000\n", encoding="utf-8")
    doc = parse_file(csv, SETTINGS)
    assert_well_formed(doc)
    assert "Paris | 2100000" in doc.text and "Rome | 2800000" in doc.text


def test_html_drops_nav_footer_and_scripts(tmp_path: Path) -> None:
    path = make_html(
        tmp_path / "tea.html",
        "Green Tea Facts",
        ["Green tea is made from Camellia sinensis leaves.", "It contains caffeine."],
    )
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    assert "Camellia sinensis" in doc.text and "It contains caffeine." in doc.text
    for boilerplate in ("About us", "Sign in", "All rights reserved", "analytics", "console"):
        assert boilerplate not in doc.text
    body = next(e for e in doc.elements if "Camellia" in doc.text[e.start : e.end])
    assert body.heading == "Green Tea Facts"


def test_markdown_headings(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(
        "# Setup\n\nInstall the package first.\n\n## Usage\n\nRun the command with a path.\n",
        encoding="utf-8",
    )
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    heading_of = {doc.text[e.start : e.end]: e.heading for e in doc.elements}
    assert heading_of["Install the package first."] == "Setup"
    assert heading_of["Run the command with a path."] == "Usage"


def test_email_subject_and_body(tmp_path: Path) -> None:
    path = make_eml(
        tmp_path / "note.eml", "Launch date", "Hello Bob,\n\nThe launch moves to Friday.\n"
    )
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    assert doc.elements[0].kind == "EmailHeader"
    assert "Subject: Launch date" in doc.text and "From: alice@example.com" in doc.text
    assert "The launch moves to Friday." in doc.text
    assert {e.heading for e in doc.elements} == {"Launch date"}


CHINESE = "北京是中国的首都，也是全国的政治和文化中心。\n\n这是一个使用国标码保存的中文文本文件。"
FRENCH = "Café crème brûlée à la façon de Noël.\n\nLe garçon était naïf, déjà à Besançon."


@pytest.mark.parametrize(
    ("name", "write", "expected"),
    [
        ("gbk.txt", lambda p: write_gbk(p, CHINESE), CHINESE),
        ("latin1.txt", lambda p: write_latin1(p, FRENCH), FRENCH),
        ("bom.txt", lambda p: p.write_bytes(b"\xef\xbb\xbf" + FRENCH.encode()), FRENCH),
        ("utf16.txt", lambda p: p.write_bytes(FRENCH.encode("utf-16")), FRENCH),
        ("plain.txt", lambda p: p.write_text(FRENCH, encoding="utf-8"), FRENCH),
    ],
)
def test_text_encodings_decode(tmp_path: Path, name: str, write, expected: str) -> None:
    path = tmp_path / name
    write(path)
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    assert doc.text == expected
    assert len(doc.elements) == 2


def test_gbk_markdown_and_unstructured_text_path(tmp_path: Path) -> None:
    md = write_gbk(tmp_path / "zh.md", "# 首都\n\n" + CHINESE)
    doc = parse_file(md, SETTINGS)
    assert "北京是中国的首都" in doc.text
    assert doc.elements[-1].heading == "首都"
    # The .txt route through unstructured (kept for re-mapping) decodes the same way.
    txt = write_gbk(tmp_path / "zh.txt", CHINESE)
    doc = UnstructuredLoader().load(txt, SETTINGS)
    assert_well_formed(doc)
    assert doc.text == CHINESE


def test_txt_title_line_heads_paragraph(tmp_path: Path) -> None:
    path = tmp_path / "passage.txt"
    path.write_text("Demon Dice\n\nDemon Dice is a collectible dice game.\n", encoding="utf-8")
    doc = parse_file(path, SETTINGS)
    assert [e.kind for e in doc.elements] == ["Title", "NarrativeText"]
    assert doc.elements[1].heading == "Demon Dice"


def test_jsonl_text_key_wins_and_other_records_become_lines(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(
        '{"body": "The first record.", "title": "One"}\n'
        '{"text": "wrong key"}\n'
        "\n"
        '{"body": "The second record."}\n'
        "{}\n"
        "not json\n",
        encoding="utf-8",
    )
    doc = parse_file(path, LoadingSettings(json_text_key="body"))
    assert_well_formed(doc)
    # A record without the text key is loaded as its fields, not skipped.
    assert element_texts(doc) == ["The first record.", "text: wrong key", "The second record."]
    assert [e.heading for e in doc.elements] == ["One", None, None]
    assert [e.record_id for e in doc.elements] == ["0", "1", "2"]
    assert {e.kind for e in doc.elements} == {"Record"}
    assert doc.metadata["records"] == 4
    assert doc.metadata["records_skipped"] == 1  # the empty object
    assert doc.metadata["lines_invalid"] == 1


def test_json_list_of_title_text(tmp_path: Path) -> None:
    path = tmp_path / "corpus.json"
    path.write_text(
        '[{"title": "Teutberga", "text": "Teutberga was a queen of Lotharingia."},'
        ' {"title": "Empty", "text": ""},'
        ' {"title": "Theodred II", "text": "Theodred II was a medieval bishop."}]',
        encoding="utf-8",
    )
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    assert element_texts(doc) == [
        "Teutberga was a queen of Lotharingia.",
        "title: Empty",
        "Theodred II was a medieval bishop.",
    ]
    assert [e.heading for e in doc.elements] == ["Teutberga", "Empty", "Theodred II"]
    single = tmp_path / "one.json"
    single.write_text('{"text": "Just one object."}', encoding="utf-8")
    assert parse_file(single, SETTINGS).text == "Just one object."


# ---------------------------------------------------------------------------------------------
# Evidence in real folders: tables keep their header, records their ids, slides their notes,
# e-mails their header block and line breaks
# ---------------------------------------------------------------------------------------------


def element_with(doc: Document, needle: str) -> Element:
    found = [e for e in doc.elements if needle in doc.text[e.start : e.end]]
    assert len(found) == 1, f"{needle!r} in {len(found)} elements"
    return found[0]


def test_csv_semicolons_bom_200_rows_one_table_with_header(tmp_path: Path) -> None:
    header = ["order_id", "customer", "city", "amount_eur", "status"]
    rows = [header] + [
        [f"O-{i:04d}", f"Müller & Söhne {i}", "Köln", f"{i * 10},50", "shipped"]
        for i in range(1, 201)
    ]
    doc = parse_file(write_csv(tmp_path / "orders_2024.csv", rows), SETTINGS)
    assert_well_formed(doc)
    table = element_with(doc, "O-0150 | Müller & Söhne 150 | Köln | 1500,50 | shipped")
    assert table.kind == "Table"
    assert table.table_header == "order_id | customer | city | amount_eur | status"
    assert doc.text[table.start : table.end].startswith(table.table_header + "\n")
    assert table.title == "orders_2024"
    assert doc.text[table.start : table.end].count("\n") == 200  # header + one line per row
    assert doc.metadata["delimiter"] == ";"


@pytest.mark.parametrize("delimiter", [",", "\t", "|"])
def test_csv_other_delimiters_and_legacy_encoding(tmp_path: Path, delimiter: str) -> None:
    rows = [
        ["Stadt", "Einwohner", "Bundesland"],
        ["Zürich", "421878", ""],
        ["Graz", "", "Steiermark"],
    ]
    path = write_csv(tmp_path / "staedte.csv", rows, delimiter=delimiter, encoding="cp1252")
    doc = parse_file(path, SETTINGS)
    [table] = doc.elements
    assert table.table_header == "Stadt | Einwohner | Bundesland"
    # Empty cells keep their column: the values stay under the right header.
    assert doc.text.splitlines()[1:] == ["Zürich | 421878 |", "Graz |  | Steiermark"]


def test_xlsx_every_sheet_a_titled_table_with_displayed_values(tmp_path: Path) -> None:
    orders = [
        ["Open orders, exported 2024-03-04"],  # a title typed above the header
        [],
        ["Order", "Shipped", None, "Amount", "Discount"],
        ["A-17", (dt.datetime(2024, 3, 1), "yyyy-mm-dd"), None, (1234.5, "#,##0.00"), (0.125, "0.0%")],
        [],
        ["A-18", (dt.datetime(2024, 3, 2), "d mmm yyyy"), None, (99, '"$"#,##0.00'), (0.2, "0%")],
    ]  # fmt: skip
    contacts = [["Name", "Phone"], ["Ann Lee", "+44 20 7946 0000"]]
    path = make_workbook(tmp_path / "book.xlsx", {"Orders": orders, "Contacts": contacts})
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    tables = [e for e in doc.elements if e.kind == "Table"]
    assert [(t.title, t.page) for t in tables] == [("Orders", 1), ("Contacts", 2)]
    assert tables[0].table_header == "Order | Shipped | Amount | Discount"  # empty column gone
    assert doc.text[tables[0].start : tables[0].end].splitlines()[1:] == [
        "A-17 | 2024-03-01 | 1,234.50 | 12.5%",
        "A-18 | 2 Mar 2024 | $99.00 | 20%",
    ]
    assert "Open orders, exported 2024-03-04" in doc.text
    assert "00:00:00" not in doc.text
    assert tables[1].table_header == "Name | Phone" and "Ann Lee | +44 20 7946 0000" in doc.text
    assert doc.metadata["sheets"] == ["Orders", "Contacts"]


def test_html_table_header_and_caption(tmp_path: Path) -> None:
    rows = [["Plan", "Monthly price", "Seats"], ["Basic", "19 EUR", "3"], ["Pro", "49 EUR", "10"]]
    doc = parse_file(
        make_html_with_table(tmp_path / "p.html", "Pricing", "Plans 2024", rows), SETTINGS
    )
    table = element_with(doc, "Pro | 49 EUR | 10")
    assert (table.kind, table.table_header) == ("Table", "Plan | Monthly price | Seats")
    assert table.title == "Plans 2024" and table.heading == "Pricing"
    assert doc.text[table.start : table.end].startswith("Plan | Monthly price | Seats\n")

    no_caption = make_html_with_table(tmp_path / "q.html", "Pricing", None, rows)
    assert element_with(parse_file(no_caption, SETTINGS), "Pro | 49 EUR").title == "Pricing"


def test_docx_table_header_and_title_from_heading(tmp_path: Path) -> None:
    rows = [["Site", "Contact", "Phone"], ["Berlin", "Ann", "030 123"], ["Paris", "Bob", "01 456"]]
    doc = parse_file(make_docx_with_table(tmp_path / "sites.docx", "Sites", rows), SETTINGS)
    assert_well_formed(doc)
    table = element_with(doc, "Paris | Bob | 01 456")
    assert (table.kind, table.table_header, table.title) == (
        "Table",
        "Site | Contact | Phone",
        "Sites",
    )
    assert element_with(doc, "duty manager").heading == "Escalation"


def test_pptx_speaker_notes_on_their_slide(tmp_path: Path) -> None:
    path = make_pptx_with_notes(
        tmp_path / "deck.pptx",
        [
            ("Roadmap", "Ship the loader in March", "Mention the budget risk.\nAsk for two hires."),
            ("Risks", "Offline machines", None),
            ("Close", "Questions", "Budget owner is Priya"),
        ],
    )
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    notes = [e for e in doc.elements if e.kind == "SpeakerNotes"]
    assert [(e.page, doc.text[e.start : e.end]) for e in notes] == [
        (1, "Speaker notes: Mention the budget risk.\nAsk for two hires."),
        (3, "Speaker notes: Budget owner is Priya"),
    ]
    # Each slide's notes follow its own text, before the next slide.
    pages = [e.page for e in doc.elements]
    assert pages == sorted(pages)
    assert notes[0].heading == "Roadmap"


EMAIL_BODY = (
    "Hi Lee,\n\n"
    "The shipment for order 4471 is delayed at the Rotterdam terminal because of a customs "
    "inspection — we expect it to clear tomorrow morning. New plan:\n"
    "ETA: 12 March 2024\n"
    "Carrier: DHL Freight\n"
    "Tracking: JD014600006281\n\n"
    "What we will do:\n"
    "- expedite customs clearance\n"
    "- refund the shipping fee\n"
    "- call you on Friday\n\n"
    "Best regards,\nDana"
)


@pytest.mark.parametrize("html_only", [False, True])
def test_email_header_block_date_and_line_breaks(tmp_path: Path, html_only: bool) -> None:
    path = make_qp_eml(
        tmp_path / "eta.eml",
        "Order 4471: new ETA",
        EMAIL_BODY,
        html_only=html_only,
        cc="ops@ex.com",
    )
    assert b"quoted-printable" in path.read_bytes()
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    header = doc.elements[0]
    assert header.kind == "EmailHeader"
    assert doc.text[header.start : header.end] == (
        "From: Dana Ops <dana.ops@example.com>\n"
        "To: Lee Buyer <lee@customer.example>\n"
        "Cc: ops@ex.com\n"
        "Date: Tue, 05 Mar 2024 14:30:00 +0100\n"
        "Subject: Order 4471: new ETA"
    )
    assert doc.metadata["date"] == "2024-03-05T14:30:00+01:00"
    assert doc.metadata["from"] == "Dana Ops <dana.ops@example.com>"
    assert doc.metadata["to"] == "Lee Buyer <lee@customer.example>"
    assert (doc.metadata["cc"], doc.metadata["subject"]) == ("ops@ex.com", "Order 4471: new ETA")
    # The long line survives quoted-printable soft breaks; the ETA block and the list keep
    # their lines.
    assert "customs inspection — we expect it to clear tomorrow morning." in doc.text
    assert "ETA: 12 March 2024\nCarrier: DHL Freight\nTracking: JD014600006281" in doc.text
    assert (
        "- expedite customs clearance\n- refund the shipping fee\n- call you on Friday" in doc.text
    )
    assert {e.heading for e in doc.elements} == {"Order 4471: new ETA"}


def test_jsonl_export_without_text_field(tmp_path: Path) -> None:
    path = tmp_path / "tickets.jsonl"
    tickets = [
        {
            "ticket_id": f"T-{1000 + i}",
            "subject": f"Badge reader {i} offline",
            "customer": {"name": "Acme GmbH", "tier": "gold"},
            "tags": ["hardware", "access"],
            "assignee": None,
        }
        for i in range(10)
    ]
    path.write_text("\n".join(json.dumps(t) for t in tickets), encoding="utf-8")
    doc = parse_file(path, SETTINGS)
    assert_well_formed(doc)
    assert [e.record_id for e in doc.elements] == [f"T-{1000 + i}" for i in range(10)]
    assert {e.kind for e in doc.elements} == {"Record"}
    record = doc.elements[7]
    assert record.title == "Badge reader 7 offline"
    assert doc.text[record.start : record.end] == (
        "ticket_id: T-1007\n"
        "subject: Badge reader 7 offline\n"
        "customer.name: Acme GmbH\n"
        "customer.tier: gold\n"
        "tags: hardware, access"
    )
    assert doc.metadata["records_skipped"] == 0


def test_json_objects_become_records(tmp_path: Path) -> None:
    sla = {
        "contract": "SLA-2024-ACME",
        "customer": {"name": "Acme GmbH", "contact": {"email": "it@acme.example"}},
        "response_times": {"p1": {"first_response": "1h", "resolution": "8h"}},
        "service_credits": [{"priority": "p1", "credit_pct": 10}],
        "support_hours": ["Mon-Fri", "08:00-18:00 CET"],
        "active": True,
    }
    path = tmp_path / "sla.json"
    path.write_text(json.dumps(sla, indent=2), encoding="utf-8")
    doc = parse_file(path, SETTINGS)
    [record] = doc.elements
    assert record.kind == "Record"
    assert doc.text.splitlines() == [
        "contract: SLA-2024-ACME",
        "customer.name: Acme GmbH",
        "customer.contact.email: it@acme.example",
        "response_times.p1.first_response: 1h",
        "response_times.p1.resolution: 8h",
        "service_credits[0].priority: p1",
        "service_credits[0].credit_pct: 10",
        "support_hours: Mon-Fri, 08:00-18:00 CET",
        "active: true",
    ]

    by_key = tmp_path / "sites.json"
    by_key.write_text(
        json.dumps({"BER": {"city": "Berlin", "desks": 40}, "PAR": {"city": "Paris", "desks": 25}}),
        encoding="utf-8",
    )
    doc = parse_file(by_key, SETTINGS)
    assert [e.record_id for e in doc.elements] == ["BER", "PAR"]
    assert element_texts(doc) == [
        "BER.city: Berlin\nBER.desks: 40",
        "PAR.city: Paris\nPAR.desks: 25",
    ]

    export = tmp_path / "export.json"
    export.write_text(
        json.dumps({"exported": "2024-05-01", "items": [{"sku": "A1", "qty": 3}, {"sku": "B2"}]}),
        encoding="utf-8",
    )
    doc = parse_file(export, SETTINGS)
    assert element_texts(doc) == ["exported: 2024-05-01", "sku: A1\nqty: 3", "sku: B2"]


def test_json_with_nothing_in_it_is_reported(tmp_path: Path) -> None:
    for name, content in (("a.json", "[]"), ("b.json", "{}"), ("c.jsonl", "{}\nnull\n")):
        (tmp_path / name).write_text(content, encoding="utf-8")
        assert load_error(tmp_path / name).startswith("no text found")


SECTIONS = [("Scope", "The policy covers laptops."), ("Passwords", "Use fourteen characters.")]


@pytest.mark.parametrize("suffix", ["md", "html", "docx", "pdf", "txt"])
def test_each_element_carries_the_heading_it_is_under(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"policy.{suffix}"
    if suffix == "md":
        path.write_text("".join(f"# {h}\n\n{p}\n\n" for h, p in SECTIONS), encoding="utf-8")
    elif suffix == "html":
        body = "".join(f"<h2>{h}</h2><p>{p}</p>" for h, p in SECTIONS)
        path.write_text(f"<html><body>{body}</body></html>", encoding="utf-8")
    elif suffix == "docx":
        import docx

        d = docx.Document()
        for h, p in SECTIONS:
            d.add_heading(h, level=1)
            d.add_paragraph(p)
        d.save(str(path))
    elif suffix == "pdf":
        make_pdf(path, ["\n".join(f"# {h}\n{p}\n" for h, p in SECTIONS)])
    else:
        path.write_text("".join(f"{h}\n\n{p}\n\n" for h, p in SECTIONS), encoding="utf-8")
    doc = parse_file(path, SETTINGS)
    heading_of = {doc.text[e.start : e.end]: e.heading for e in doc.elements}
    for h, p in SECTIONS:
        assert heading_of[h] == h  # a heading heads itself, not the section before
        assert heading_of[p] == h


# ---------------------------------------------------------------------------------------------
# Bad files: one-line LoaderError each
# ---------------------------------------------------------------------------------------------


def test_corrupt_pdfs(tmp_path: Path) -> None:
    fake = tmp_path / "fake.pdf"
    fake.write_text("this is not a pdf", encoding="utf-8")
    assert load_error(fake) == "not a PDF (bad header)"
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes(b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog")
    assert load_error(truncated).startswith("could not parse: PdfiumError")


def test_password_protected_pdf(tmp_path: Path) -> None:
    import pikepdf

    plain = make_pdf(tmp_path / "plain.pdf", ["secret text"])
    with pikepdf.open(plain) as pdf:
        pdf.save(tmp_path / "locked.pdf", encryption=pikepdf.Encryption(owner="o", user="u"))
        pdf.save(tmp_path / "owner.pdf", encryption=pikepdf.Encryption(owner="o", user=""))
    assert load_error(tmp_path / "locked.pdf") == "encrypted PDF (a password is required)"
    assert parse_file(tmp_path / "owner.pdf", SETTINGS).text == "secret text"


def test_empty_and_blank_files(tmp_path: Path) -> None:
    for name in ("zero.txt", "zero.pdf", "zero.docx", "zero.json"):
        (tmp_path / name).write_bytes(b"")
        assert load_error(tmp_path / name) == "empty file"
    blank = tmp_path / "blank.txt"
    blank.write_text("  \n\n\t\n", encoding="utf-8")
    assert load_error(blank) == "no text found"


def test_binary_junk_in_text_files(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_bytes(os.urandom(20_000))
    assert load_error(junk).startswith("binary content in a text file")
    controls = tmp_path / "controls.md"
    controls.write_bytes(bytes(range(1, 32)) * 300)
    assert load_error(controls).startswith("binary content in a text file")
    pdf_named_txt = tmp_path / "report.txt"
    make_pdf(tmp_path / "real.pdf", ["hello"])
    pdf_named_txt.write_bytes((tmp_path / "real.pdf").read_bytes())
    assert "binary content in a text file" in load_error(pdf_named_txt)


def test_broken_office_files(tmp_path: Path) -> None:
    not_zip = tmp_path / "plain.xlsx"
    not_zip.write_text("just text", encoding="utf-8")
    assert load_error(not_zip) == "not a valid XLSX file (not a zip archive)"
    bad_zip = tmp_path / "broken.docx"
    bad_zip.write_bytes(b"PK\x03\x04 then garbage")
    assert load_error(bad_zip).startswith("not a valid DOCX file (corrupt zip")
    wrong_zip = tmp_path / "deck.pptx"
    make_docx(wrong_zip, "A docx", ["renamed to .pptx"])
    assert "zip without ppt/presentation.xml" in load_error(wrong_zip)


def test_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"text": "a",}', encoding="utf-8")
    assert load_error(path).startswith("not valid JSON:")


def test_html_with_only_a_script_has_no_text(tmp_path: Path) -> None:
    path = tmp_path / "app.html"
    path.write_text(
        "<html><head><script>var greeting = 'hello world';</script></head>"
        "<body><script>document.write(greeting)</script></body></html>",
        encoding="utf-8",
    )
    assert load_error(path).startswith("no text found")


def test_five_mb_single_line_loads_quickly(tmp_path: Path) -> None:
    path = tmp_path / "one_line.txt"
    path.write_text("lorem ipsum dolor sit amet " * 200_000, encoding="utf-8")
    assert path.stat().st_size > 5_000_000
    started = time.perf_counter()
    doc = parse_file(path, SETTINGS)
    assert time.perf_counter() - started < 5
    assert len(doc.text) == 5_399_999 and len(doc.elements) == 1


def test_parse_file_enforces_size_cap_and_type(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_bytes(b"a" * (2 * 2**20))
    assert load_error(path, LoadingSettings(max_file_mb=1)) == (
        "skipped: 2.0 MB exceeds loading.max_file_mb=1"
    )
    other = tmp_path / "image.png"
    other.write_bytes(b"\x89PNG")
    assert load_error(other).startswith("unsupported file type .png")


# ---------------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------------


def _touch(path: Path, text: str = "some text") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _names(paths: list[Path], root: Path) -> list[str]:
    return [p.relative_to(root.resolve()).as_posix() for p in paths]


def test_discovery_skips_hidden_and_unsupported(tmp_path: Path) -> None:
    for rel in ("a.txt", "sub/b.md", "sub/deeper/c.PDF", ".hidden.txt", ".git/d.txt", "e.png"):
        _touch(tmp_path / rel)
    files, failures = discover_files([tmp_path], SETTINGS)
    assert _names(files, tmp_path) == ["a.txt", "sub/b.md", "sub/deeper/c.PDF"]
    assert all(p.is_absolute() for p in files)
    assert failures == []
    # Given twice, or as a file inside an already given folder: no duplicates.
    again, _ = discover_files([tmp_path, tmp_path / "a.txt", str(tmp_path)], SETTINGS)
    assert again == files


def test_discovery_include_exclude_globs(tmp_path: Path) -> None:
    for rel in ("a.md", "b.txt", "docs/c.md", "docs/drafts/d.md", "notes/e.md"):
        _touch(tmp_path / rel)
    only_md = LoadingSettings(include=["*.md"], exclude=["drafts"])
    files, _ = discover_files([tmp_path], only_md)
    assert _names(files, tmp_path) == ["a.md", "docs/c.md", "notes/e.md"]
    by_rel_path = LoadingSettings(include=["docs/*"], exclude=["**/d.md"])
    files, _ = discover_files([tmp_path], by_rel_path)
    assert _names(files, tmp_path) == ["docs/c.md"]


def test_discovery_survives_symlink_loop(tmp_path: Path) -> None:
    _touch(tmp_path / "root/a.txt")
    _touch(tmp_path / "root/sub/b.txt")
    (tmp_path / "root/sub/loop").symlink_to(tmp_path / "root", target_is_directory=True)
    (tmp_path / "root/self").symlink_to(tmp_path / "root/sub", target_is_directory=True)
    files, _ = discover_files([tmp_path / "root"], SETTINGS)
    assert _names(files, tmp_path / "root") == ["a.txt", "sub/b.txt"]


def test_discovery_follows_directory_symlinks(tmp_path: Path) -> None:
    _touch(tmp_path / "elsewhere/x.txt")
    (tmp_path / "root").mkdir()
    (tmp_path / "root/link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    files, _ = discover_files([tmp_path / "root"], SETTINGS)
    assert files == [(tmp_path / "elsewhere/x.txt").resolve()]


def test_discovery_reports_files_over_size_cap(tmp_path: Path) -> None:
    _touch(tmp_path / "small.txt")
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * int(1.5 * 2**20))
    files, failures = discover_files([tmp_path], LoadingSettings(max_file_mb=1))
    assert _names(files, tmp_path) == ["small.txt"]
    assert len(failures) == 1
    assert failures[0].path == str(big.resolve())
    assert failures[0].reason == "skipped: 1.5 MB exceeds loading.max_file_mb=1"


def test_discovery_explicit_files(tmp_path: Path) -> None:
    hidden = _touch(tmp_path / ".notes.md")
    image = _touch(tmp_path / "photo.png")
    files, failures = discover_files([hidden, image], LoadingSettings(exclude=["*.md"]))
    assert files == [hidden.resolve()]  # named directly: taken despite the dot and the glob
    assert [f.path for f in failures] == [str(image)]
    assert failures[0].reason.startswith("unsupported file type .png")


def test_discovery_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(LoaderError) as info:
        discover_files([tmp_path / "nope"], SETTINGS)
    assert "path not found" in info.value.message and info.value.hint


def test_supported_extensions_cover_brief() -> None:
    assert set(SUPPORTED_EXTENSIONS.values()) == {
        "txt", "md", "html", "pdf", "docx", "pptx", "xlsx", "csv", "eml", "json", "jsonl",
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Offline: unstructured must not reach for the network (spaCy download, telemetry)
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_unstructured_paths_work_offline(tmp_path: Path) -> None:
    make_html(tmp_path / "page.html", "Title", ["A paragraph of narrative text for spaCy."])
    (tmp_path / "doc.md").write_text("# Head\n\nSome narrative text here.\n", encoding="utf-8")
    script = textwrap.dedent(
        f"""
        import sys
        attempts = []
        def record(event, args):
            # Recorded, not raised: unstructured swallows exceptions around its telemetry.
            if event in ("socket.connect", "socket.getaddrinfo", "urllib.Request",
                         "subprocess.Popen"):
                attempts.append(f"{{event}} {{args!r:.80}}")
        sys.addaudithook(record)
        from pathlib import Path
        from deepsearcher.config import LoadingSettings
        from loaders import parse_file, UnstructuredLoader
        assert "unstructured" not in sys.modules  # imported lazily, after the opt-outs are set
        s = LoadingSettings()
        for name in ("page.html", "doc.md"):
            assert parse_file(Path({str(tmp_path)!r}) / name, s).text
        UnstructuredLoader().load(Path({str(tmp_path)!r}) / "doc.md", s)
        from unstructured.nlp import tokenize
        assert tokenize._get_nlp.cache_info().currsize == 1  # spaCy really ran
        print("ok" if not attempts else attempts)
        """
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DO_NOT_TRACK", "SCARF_NO_ANALYTICS", "UNSTRUCTURED_DISABLE_NOTICE")
    }
    env.update(HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"


# ---------------------------------------------------------------------------------------------
# The file-type table: one row per format
# ---------------------------------------------------------------------------------------------


def test_every_file_type_names_a_loader_that_loads() -> None:
    from loaders import FILE_TYPES, LOADERS

    for file_type in FILE_TYPES:
        loader = LOADERS[file_type.name]()
        assert callable(getattr(loader, "load", None)), file_type
