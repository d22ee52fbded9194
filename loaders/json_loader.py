"""JSON and JSON Lines: one ``Record`` element per record.

A record with a non-empty string under ``loading.json_text_key`` is that text (the
2WikiMultiHopQA ``[{title, text}, ...]`` shape). Any other record is rendered as
``key: value`` lines, nested keys dotted (``customer.name: Acme``), lists of scalars joined
with commas and nested lists of objects indexed (``items[0].sku: A1``), so exports, tickets and
config files load without configuration. What counts as a record:

- a JSON list, or JSON Lines: each item;
- an object whose one list of objects holds the data (``{"tickets": [...], "exported": ...}``):
  each item, the other fields a record of their own;
- an object whose values are objects with keys in common (``{"T-1": {...}, "T-2": {...}}``):
  each value, its key the record id and the prefix of its lines;
- any other object (a config, an SLA): one record.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document
from loaders.base import Part, assemble_document
from loaders.sniff import file_type_of
from loaders.text import read_text

_TITLE_KEYS = ("title", "name", "subject", "headline", "summary")
# ``id``, ``ticket_id``, ``ticket-id``; camelCase ``ticketId``/``TicketID`` (not ``paid``).
_ID_KEY_RE = re.compile(r"^(?:id|.+[_\-\s]id)$", re.IGNORECASE)
_CAMEL_ID_KEY_RE = re.compile(r"^.*[a-z0-9](?:Id|ID)$")
_OTHER_ID_KEYS = ("key", "uuid", "number", "code", "slug")


@dataclass
class _Record:
    value: Any
    index: int
    key: str | None = None  # the record's key in an object of records (its lines' prefix)


class JsonLoader:
    """Accepts any JSON document, or JSON Lines; see the module docstring for the records.

    ``Document.metadata`` counts ``records`` and ``records_skipped`` (records with no text at
    all: ``{}``, ``null``); JSON Lines also count ``lines_invalid``.
    """

    def load(self, path: Path, settings: LoadingSettings) -> Document:
        file_type = file_type_of(path) or "json"
        text, encoding = read_text(path)
        metadata: dict[str, Any] = {"encoding": encoding, "text_key": settings.json_text_key}
        if file_type == "jsonl":
            values, invalid = _parse_lines(text)
            if invalid:
                metadata["lines_invalid"] = invalid
            if not values and invalid:
                raise LoaderError(
                    f"not valid JSON Lines: none of {invalid} lines parsed",
                    "each line must hold one JSON object",
                )
            records = [_Record(v, i) for i, v in enumerate(values)]
        else:
            records = split_records(_parse_document(text), settings.json_text_key)

        parts: list[Part] = []
        for record in records:
            part = record_to_part(record, settings.json_text_key)
            if part is not None:
                parts.append(part)
        metadata["records"] = len(records)
        metadata["records_skipped"] = len(records) - len(parts)
        return assemble_document(
            path, parts, file_type, metadata, "no text found (every record is empty)"
        )


def _parse_document(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoaderError(
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            "fix the JSON, or name the file .jsonl if it holds one object per line",
        ) from None


def _parse_lines(text: str) -> tuple[list[Any], int]:
    values: list[Any] = []
    invalid = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError:
            invalid += 1
    return values, invalid


def split_records(data: Any, text_key: str) -> list[_Record]:
    """The records of a parsed JSON document (rules in the module docstring)."""
    if isinstance(data, list):
        return [_Record(v, i) for i, v in enumerate(data)]
    if not isinstance(data, dict) or isinstance(data.get(text_key), str):
        return [_Record(data, 0)]
    lists = [k for k, v in data.items() if _is_list_of_objects(v)]
    rest = {k: v for k, v in data.items() if k not in lists}
    if len(lists) == 1 and all(not isinstance(v, dict | list) for v in rest.values()):
        items = data[lists[0]]
        records = [_Record(rest, 0)] if rest else []
        return records + [_Record(v, len(records) + i) for i, v in enumerate(items)]
    values = list(data.values())
    if (
        len(values) >= 2
        and all(isinstance(v, dict) and v for v in values)
        and set.intersection(*(set(v) for v in values))
    ):
        return [_Record(v, i, key=str(k)) for i, (k, v) in enumerate(data.items())]
    return [_Record(data, 0)]


def _is_list_of_objects(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def record_to_part(record: _Record, text_key: str) -> Part | None:
    value = record.value
    if isinstance(value, dict):
        title = _title_of(value) or record.key
        record_id = _id_of(value) or record.key or str(record.index)
        body = value.get(text_key)
        if isinstance(body, str) and body.strip():
            text = body
        else:
            text = "\n".join(flatten(value, record.key or ""))
    elif isinstance(value, list):
        title, record_id = None, str(record.index)
        text = "\n".join(flatten(value, record.key or ""))
    else:
        title, record_id = None, str(record.index)
        text = "" if value is None else _scalar(value)
    if not text.strip():
        return None
    return Part(text, kind="Record", heading=title, title=title, record_id=record_id)


def flatten(value: Any, prefix: str = "") -> list[str]:
    """``key: value`` lines for a JSON value; ``null`` and empty values leave no line."""
    if isinstance(value, dict):
        lines: list[str] = []
        for k, v in value.items():
            lines += flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return lines
    if isinstance(value, list):
        if not value:
            return []
        if all(not isinstance(v, dict | list) for v in value):
            joined = ", ".join(_scalar(v) for v in value if v is not None and _scalar(v))
            return [f"{prefix}: {joined}" if prefix else joined] if joined else []
        lines = []
        for i, v in enumerate(value):
            lines += flatten(v, f"{prefix}[{i}]")
        return lines
    if value is None:
        return []
    text = _scalar(value)
    if not text.strip():
        return []
    return [f"{prefix}: {text}" if prefix else text]


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value.strip()
    return str(value)


def _title_of(record: dict[str, Any]) -> str | None:
    lowered = {str(k).lower(): v for k, v in record.items()}
    for key in _TITLE_KEYS:
        value = lowered.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


def _id_of(record: dict[str, Any]) -> str | None:
    """The value of ``id``, else of the first ``*_id``/``*Id`` key, else of ``key``, ``uuid``..."""
    candidates = [k for k in record if str(k).lower() == "id"]
    candidates += [
        k
        for k in record
        if (_ID_KEY_RE.match(str(k)) or _CAMEL_ID_KEY_RE.match(str(k))) and k not in candidates
    ]
    lowered = {str(k).lower(): k for k in record}
    candidates += [lowered[k] for k in _OTHER_ID_KEYS if k in lowered]
    for key in candidates:
        value = record[key]
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return None
