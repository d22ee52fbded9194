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
