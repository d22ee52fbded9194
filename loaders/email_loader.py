"""E-mail (.eml) with the standard library's ``email`` package.

Not through unstructured: its ``partition_email`` keeps neither the Date header nor From/To in
the text, and joins the lines of a paragraph, so an ETA block or a bullet list runs together on
one line. Here the text starts with a header block (``From:``, ``To:``, ``Cc:``, ``Date:``,
``Subject:``), then the body's paragraphs with their line breaks. The text/plain part is
preferred; an HTML-only body is turned into text with its paragraphs, breaks and list items.
"""

from __future__ import annotations

import re
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document
from loaders.base import Part, assemble_document, describe_exception
from loaders.text import decode_text, normalize_newlines

_HEADER_FIELDS = (("from", "From"), ("to", "To"), ("cc", "Cc"), ("date", "Date"))
_PARAGRAPH_SPLIT_RE = re.compile(r"\n[ \t]*\n\s*")
_BULLET_RE = re.compile(r"^\s*(?:[-*•·–]|\d+[.)]|[a-z][.)])\s+")


class EmailLoader:
    """One ``EmailHeader`` part, then one part per body paragraph; every part's heading is the
    subject. ``Document.metadata`` holds ``from``, ``to``, ``cc``, ``date`` (ISO 8601 when the
    header parses), ``subject`` and ``attachments`` (file names; they are not parsed)."""

    def load(self, path: Path, settings: LoadingSettings) -> Document:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise LoaderError(f"could not read: {describe_exception(exc)}") from exc
        msg = BytesParser(policy=policy.default).parsebytes(data)
        assert isinstance(msg, EmailMessage)  # policy.default builds EmailMessage objects
        metadata = _header_metadata(msg)
        subject = metadata.get("subject") or None

        # The Date line as the sender's client wrote it (weekday, time zone); ISO in metadata.
        shown = {**metadata, "date": _header(msg, "date")}
        lines = [f"{label}: {shown[key]}" for key, label in _HEADER_FIELDS if shown.get(key)]
        if subject:
            lines.append(f"Subject: {subject}")
        attachments = [
            part.get_filename() or part.get_content_type() for part in msg.iter_attachments()
        ]
        if attachments:
            metadata["attachments"] = attachments
            lines.append(f"Attachments: {', '.join(attachments)}")
        parts = [Part("\n".join(lines), kind="EmailHeader", heading=subject)] if lines else []
        parts += [
            Part(para, kind=_paragraph_kind(para), heading=subject)
            for para in _PARAGRAPH_SPLIT_RE.split(_body_text(msg))
            if para.strip()
        ]
        return assemble_document(path, parts, "eml", metadata, "no text found (empty e-mail)")


def _header_metadata(msg: EmailMessage) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for key in ("from", "to", "cc", "subject"):
        value = _header(msg, key)
        if value:
            metadata[key] = value
    date = _header(msg, "date")
    if date:
        try:
            parsed = msg["date"].datetime  # None or raises when the header does not parse
        except (AttributeError, TypeError, ValueError):
            parsed = None
        metadata["date"] = parsed.isoformat() if parsed else date
    return metadata


def _header(msg: EmailMessage, name: str) -> str:
    try:
        value = msg[name]
    except (IndexError, ValueError, TypeError):  # a malformed header: keep its raw text
        raw = next((v for k, v in msg.raw_items() if k.lower() == name), "")
        value = raw
    return " ".join(str(value or "").split())


def _body_text(msg: EmailMessage) -> str:
    body = msg.get_body(preferencelist=("plain", "html"))
    if body is None:
        return ""
    try:
        content = body.get_content()
    except (LookupError, UnicodeError):  # unknown or wrong charset: guess it like a .txt
        payload = body.get_payload(decode=True)
        content = decode_text(payload)[0] if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return ""
    text = normalize_newlines(content)
    if body.get_content_subtype() == "html":
        text = html_to_text(text)
    return "\n".join(line.rstrip() for line in text.split("\n"))


def _paragraph_kind(paragraph: str) -> str:
    lines = paragraph.splitlines()
    return "ListItem" if all(_BULLET_RE.match(line) for line in lines) else "NarrativeText"


# ---------------------------------------------------------------------------------------------
# HTML-only bodies
# ---------------------------------------------------------------------------------------------

_BLOCK_TAGS = frozenset(
    [
        "p",
        "div",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "ul",
        "ol",
        "table",
        "blockquote",
        "pre",
        "section",
        "article",
        "header",
        "footer",
    ]
)
_SKIP_TAGS = frozenset({"script", "style", "head", "title"})


class _HtmlText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag in _BLOCK_TAGS:
            self.out.append("\n\n")
        elif tag in ("br", "tr"):
            self.out.append("\n")
        elif tag == "li":
            self.out.append("\n- ")
        elif tag in ("td", "th"):
            self.out.append(" | ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br":
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK_TAGS:
            self.out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            # Source line breaks in HTML are spaces; only tags break lines.
            self.out.append(re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> str:
    """Text of an HTML body with paragraphs as blank-line blocks, ``<br>`` as line breaks and
    list items as ``- `` lines."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    text = "".join(parser.out)
    text = "\n".join(line.strip().removeprefix("| ").strip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()
