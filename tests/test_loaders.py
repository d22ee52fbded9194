"""Loaders on real files generated into tmp_path: formats, bad files, discovery, offline."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document
from loaders import SUPPORTED_EXTENSIONS, UnstructuredLoader, discover_files, parse_file
from tests.fixture_files import (
    make_docx,
    make_eml,
    make_html,
    make_pdf,
    make_pptx,
    make_xlsx,
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


def test_jsonl_with_custom_text_key_counts_skipped(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(
        '{"body": "The first record.", "title": "One"}\n'
        '{"text": "wrong key"}\n'
        "\n"
        '{"body": "The second record."}\n'
        "not json\n",
        encoding="utf-8",
    )
    doc = parse_file(path, LoadingSettings(json_text_key="body"))
    assert_well_formed(doc)
    assert element_texts(doc) == ["The first record.", "The second record."]
    assert [e.heading for e in doc.elements] == ["One", None]
    assert doc.metadata["records"] == 3
    assert doc.metadata["records_skipped"] == 1
    assert doc.metadata["lines_invalid"] == 1

    message = load_error(path, LoadingSettings(json_text_key="content"))
    assert "no text found" in message and "'content'" in message


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
    assert [e.heading for e in doc.elements] == ["Teutberga", "Theodred II"]
    assert doc.metadata["records_skipped"] == 1
    single = tmp_path / "one.json"
    single.write_text('{"text": "Just one object."}', encoding="utf-8")
    assert parse_file(single, SETTINGS).text == "Just one object."


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
