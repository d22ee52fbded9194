"""Generators for small real documents (pdf, docx, pptx, xlsx, html, text in odd encodings).

Reused by several test modules; every function writes ``path`` and returns it.
"""

from __future__ import annotations

import html as _html
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def make_pdf(path: Path, pages: Sequence[str]) -> Path:
    """A text PDF with one page per string.

    Lines split on newlines; a blank line leaves a paragraph gap; a line starting with ``# `` is
    drawn as a bold 16 pt heading.
    """
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    path = Path(path)
    c = canvas.Canvas(str(path), pagesize=letter)
    for page in pages:
        y = 720.0
        for line in page.split("\n"):
            if line.startswith("# "):
                y -= 8
                c.setFont("Helvetica-Bold", 16)
                c.drawString(72, y, line[2:])
                y -= 26
            elif line.strip():
                c.setFont("Helvetica", 11)
                c.drawString(72, y, line)
                y -= 14
            else:
                y -= 14
        c.showPage()
    c.save()
    return path


def make_docx(path: Path, heading: str, paragraphs: Sequence[str]) -> Path:
    """A Word document with one level-1 heading followed by paragraphs."""
    import docx

    path = Path(path)
    d = docx.Document()
    d.add_heading(heading, level=1)
    for p in paragraphs:
        d.add_paragraph(p)
    d.save(str(path))
    return path


def make_pptx(path: Path, slides: Sequence[tuple[str, str]]) -> Path:
    """A PowerPoint deck with one (title, body) slide per tuple."""
    from pptx import Presentation

    path = Path(path)
    prs = Presentation()
    layout = prs.slide_layouts[1]  # "Title and Content"
    for title, body in slides:
        slide = prs.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    prs.save(str(path))
    return path


def make_xlsx(path: Path, rows: Sequence[Sequence[Any]]) -> Path:
    """A workbook with one sheet holding ``rows`` (the first row is usually a header)."""
    from openpyxl import Workbook

    path = Path(path)
    wb = Workbook()
    ws = wb.active
    assert ws is not None
    ws.title = "Sheet1"
    for row in rows:
        ws.append(list(row))
    wb.save(str(path))
    return path


def make_html(path: Path, title: str, body_paragraphs: Sequence[str]) -> Path:
    """An HTML page with nav, script, style and footer boilerplate around an article."""
    path = Path(path)
    paras = "\n".join(f"    <p>{_html.escape(p)}</p>" for p in body_paragraphs)
    page = f"""<!DOCTYPE html>
<html>
<head>
  <meta charset="utf-8">
  <title>{_html.escape(title)}</title>
  <style>body {{ font-family: sans-serif; }} .navlink {{ color: red; }}</style>
  <script>var trackingBoilerplate = "window.analytics.track('pageview')";</script>
</head>
<body>
  <nav><ul>
    <li><a href="/">Home</a></li><li><a href="/about">About us</a></li>
    <li><a href="/contact">Contact</a></li><li><a href="/login">Sign in</a></li>
  </ul></nav>
  <main><article>
    <h1>{_html.escape(title)}</h1>
{paras}
  </article></main>
  <footer><p>Copyright 2024 Example Corp. All rights reserved. Privacy policy.</p></footer>
  <script>console.log("footer script boilerplate");</script>
</body>
</html>
"""
    path.write_text(page, encoding="utf-8")
    return path


def write_gbk(path: Path, text: str) -> Path:
    """Write ``text`` encoded as GBK (simplified Chinese legacy encoding)."""
    path = Path(path)
    path.write_bytes(text.encode("gbk"))
    return path


def write_latin1(path: Path, text: str) -> Path:
    """Write ``text`` encoded as Latin-1."""
    path = Path(path)
    path.write_bytes(text.encode("latin-1"))
    return path


def make_eml(path: Path, subject: str, body: str, sender: str = "alice@example.com") -> Path:
    """A plain-text RFC 822 email."""
    from email.message import EmailMessage

    path = Path(path)
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = "bob@example.com"
    msg["Subject"] = subject
    msg["Date"] = "Mon, 01 Jan 2024 10:00:00 +0000"
    msg.set_content(body)
    path.write_bytes(bytes(msg))
    return path


# ---------------------------------------------------------------------------------------------
# Shapes from real team folders: tables with a header row, notes on slides, quoted-printable
# e-mail, JSON exports without a ``text`` field.
# ---------------------------------------------------------------------------------------------


def write_csv(
    path: Path,
    rows: Sequence[Sequence[Any]],
    delimiter: str = ";",
    encoding: str = "utf-8-sig",
) -> Path:
    """A CSV file as spreadsheet programs save it (``;`` and a BOM by default, as Excel does in
    locales with a decimal comma)."""
    import csv
    import io

    path = Path(path)
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    path.write_bytes(buf.getvalue().encode(encoding))
    return path


def make_workbook(path: Path, sheets: dict[str, Sequence[Sequence[Any]]]) -> Path:
    """A workbook with one sheet per entry. Cells may be ``(value, number_format)`` pairs;
    ``None`` leaves a cell empty."""
    from openpyxl import Workbook

    path = Path(path)
    wb = Workbook()
    first = wb.active
    assert first is not None
    wb.remove(first)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for r, row in enumerate(rows, start=1):
            for c, value in enumerate(row, start=1):
                fmt = None
                if isinstance(value, tuple):
                    value, fmt = value
                if value is None:
                    continue
                cell = ws.cell(row=r, column=c, value=value)
                if fmt:
                    cell.number_format = fmt
    wb.save(str(path))
    return path


def make_pptx_with_notes(path: Path, slides: Sequence[tuple[str, str, str | None]]) -> Path:
    """A deck with one (title, body, speaker notes or None) slide per tuple."""
    from pptx import Presentation

    path = Path(path)
    prs = Presentation()
    layout = prs.slide_layouts[1]
    for title, body, notes in slides:
        slide = prs.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        if notes is not None:
            slide.notes_slide.notes_text_frame.text = notes
    prs.save(str(path))
    return path


def make_qp_eml(
    path: Path, subject: str, body: str, html_only: bool = False, cc: str | None = None
) -> Path:
    """A quoted-printable e-mail (UTF-8) with From, To, optional Cc, Date and Subject; with
    ``html_only`` the body is an HTML part only, paragraphs and ``<ul>`` lists as a mail client
    writes them."""
    from email.message import EmailMessage

    path = Path(path)
    msg = EmailMessage()
    msg["From"] = "Dana Ops <dana.ops@example.com>"
    msg["To"] = "Lee Buyer <lee@customer.example>"
    if cc:
        msg["Cc"] = cc
    msg["Date"] = "Tue, 05 Mar 2024 14:30:00 +0100"
    msg["Subject"] = subject
    if html_only:
        html_parts = []
        for para in body.split("\n\n"):
            lines = para.split("\n")
            if all(line.startswith("- ") for line in lines):
                items = "".join(f"<li>{_html.escape(line[2:])}</li>" for line in lines)
                html_parts.append(f"<ul>{items}</ul>")
            else:
                html_parts.append("<p>" + "<br>".join(_html.escape(x) for x in lines) + "</p>")
        msg.set_content(
            "<html><body>" + "\n".join(html_parts) + "</body></html>",
            subtype="html",
            cte="quoted-printable",
        )
    else:
        msg.set_content(body, cte="quoted-printable")
    path.write_bytes(bytes(msg))
    return path


def make_html_with_table(
    path: Path, heading: str, caption: str | None, rows: Sequence[Sequence[str]]
) -> Path:
    """An HTML page: a heading, an intro paragraph, then a table whose first row is ``<th>``."""
    path = Path(path)
    head = "".join(f"<th>{_html.escape(c)}</th>" for c in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{_html.escape(c)}</td>" for c in row) + "</tr>" for row in rows[1:]
    )
    cap = f"<caption>{_html.escape(caption)}</caption>" if caption else ""
    page = (
        f"<html><body><h1>{_html.escape(heading)}</h1>"
        "<p>The figures below are the ones agreed with the customer last quarter.</p>"
        f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        "</body></html>"
    )
    path.write_text(page, encoding="utf-8")
    return path


def make_docx_with_table(path: Path, heading: str, rows: Sequence[Sequence[str]]) -> Path:
    """A Word document: a level-1 heading, a paragraph, a table (first row = header), then a
    second heading with a paragraph."""
    import docx

    path = Path(path)
    d = docx.Document()
    d.add_heading(heading, level=1)
    d.add_paragraph("The table lists every site and its contact.")
    table = d.add_table(rows=len(rows), cols=len(rows[0]))
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            table.cell(i, j).text = value
    d.add_heading("Escalation", level=1)
    d.add_paragraph("Escalate to the duty manager after two hours.")
    d.save(str(path))
    return path
