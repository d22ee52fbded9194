"""The ``Loader`` role and the one way every loader turns its pieces into a ``Document``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document, Element

ELEMENT_SEPARATOR = "\n\n"


class Loader(Protocol):
    """Parses one file into a ``Document``. Blocking; raises ``LoaderError`` for a bad file."""

    def load(self, path: Path, settings: LoadingSettings) -> Document: ...


@dataclass(frozen=True)
class Part:
    """One element's text before it is placed in ``Document.text``.

    ``table_header``, ``title`` and ``record_id`` are the structured fields of
    ``deepsearcher.types.Element`` (tables, records); a table's text must start with its header.
    """

    text: str
    kind: str = "NarrativeText"
    page: int | None = None
    heading: str | None = None
    table_header: str | None = None
    title: str | None = None
    record_id: str | None = None


def assemble_document(
    path: Path,
    parts: Iterable[Part],
    file_type: str,
    metadata: dict[str, Any] | None = None,
    empty_reason: str = "no text found",
) -> Document:
    """Join the non-blank parts with blank lines; each ``Element`` spans its part exactly.

    Raises ``LoaderError(empty_reason)`` when nothing is left, so no caller ever sees a
    ``Document`` with empty text.
    """
    pieces: list[str] = []
    elements: list[Element] = []
    pos = 0
    for part in parts:
        text = part.text.strip()
        if not text:
            continue
        if pieces:
            pieces.append(ELEMENT_SEPARATOR)
            pos += len(ELEMENT_SEPARATOR)
        pieces.append(text)
        elements.append(
            Element(
                start=pos,
                end=pos + len(text),
                page=part.page,
                heading=part.heading,
                kind=part.kind,
                table_header=part.table_header,
                title=part.title,
                record_id=part.record_id,
            )
        )
        pos += len(text)
    if not elements:
        raise LoaderError(empty_reason)
    return Document(
        source=str(path),
        text="".join(pieces),
        elements=elements,
        file_type=file_type,
        metadata=dict(metadata or {}),
    )


def describe_exception(exc: BaseException, limit: int = 160) -> str:
    """``ExcClass: first line of the message``, shortened: one line for a user to read."""
    lines = str(exc).strip().splitlines()
    msg = lines[0].strip() if lines else ""
    if len(msg) > limit:
        msg = msg[: limit - 3].rstrip() + "..."
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
