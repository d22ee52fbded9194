"""JSON and JSON Lines: one element per record, the text under ``loading.json_text_key``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from deepsearcher.types import Document
from loaders.base import Part, assemble_document
from loaders.sniff import file_type_of
from loaders.text import read_text

_TITLE_KEY = "title"


class JsonLoader:
    """Accepts a JSON list of objects (or strings), one object, or JSON Lines of either.

    Records without a non-empty string under the text key are skipped and counted in
    ``Document.metadata["records_skipped"]``; a ``title`` string becomes the element heading
    (the 2WikiMultiHopQA ``[{title, text}, ...]`` shape).
    """

    def load(self, path: Path, settings: LoadingSettings) -> Document:
        file_type = file_type_of(path) or "json"
        text, encoding = read_text(path)
        metadata: dict[str, Any] = {"encoding": encoding, "text_key": settings.json_text_key}
        if file_type == "jsonl":
            records, invalid = _parse_lines(text)
            if invalid:
                metadata["lines_invalid"] = invalid
            if not records and invalid:
                raise LoaderError(
                    f"not valid JSON Lines: none of {invalid} lines parsed",
                    "each line must hold one JSON object",
                )
        else:
            records = _parse_document(text)

        parts: list[Part] = []
        skipped = 0
        key = settings.json_text_key
        for record in records:
            part = _record_to_part(record, key)
            if part is None:
                skipped += 1
            else:
                parts.append(part)
        metadata["records"] = len(records)
        metadata["records_skipped"] = skipped
        if not parts:
            raise LoaderError(
                f"no text found: none of the {len(records)} records has a string {key!r} field",
                "set loading.json_text_key to the key that holds the text",
            )
        return assemble_document(path, parts, file_type, metadata)


def _parse_document(text: str) -> list[Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoaderError(
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            "fix the JSON, or name the file .jsonl if it holds one object per line",
        ) from None
    if isinstance(data, list):
        return data
    return [data]


def _parse_lines(text: str) -> tuple[list[Any], int]:
    records: list[Any] = []
    invalid = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            invalid += 1
    return records, invalid


def _record_to_part(record: Any, key: str) -> Part | None:
    if isinstance(record, str):
        return Part(record, kind="Record") if record.strip() else None
    if not isinstance(record, dict):
        return None
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    title = record.get(_TITLE_KEY)
    heading = " ".join(title.split()) if isinstance(title, str) and title.strip() else None
    return Part(value, kind="Record", heading=heading)
