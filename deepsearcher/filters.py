"""``Filter``: metadata conditions that narrow a search (source path glob, file type, modified
date, page range, loader metadata), ANDed. Parsed from the CLI's ``--filter EXPR`` strings or
from a request's JSON ``filter``, validated here, and compiled by the store into its own query
language; a value is never pasted into an expression as text (see ``store/milvus_filter.py``).

String form, one condition each::

    source=hr/**        path glob (``path=`` too); relative globs match after any ``/``
    type=pdf,docx       file type (extension family as loaded: pdf, docx, md, txt, eml, ...)
    modified>=2025-01-01  the file's modification time (UTC), also > < <= = with a date
    page>=2  page<=5    chunks that touch these pages (PDF pages, slides)
    meta.date>=2025-03-01  loader metadata: e-mail from/to/cc/subject/date, ...
    meta.from~alice     ``~`` contains (strings); ``!=`` not equal

JSON form: the same strings in a list, or an object such as
``{"source": "hr/**", "type": ["pdf"], "modified": {"gte": "2025-01-01", "lt": "2026-01-01"},
"page": {"gte": 2}, "meta": {"date": {"gte": "2025-03-01"}, "from": {"contains": "alice"}}}``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from deepsearcher.errors import DeepSearcherError

FILTER_HINT = (
    "write KEY OP VALUE, e.g. source=hr/**, type=pdf,docx, modified>=2025-01-01, page<=5, "
    "meta.date>=2025-03-01, meta.from~alice (keys: source|path, type, modified, page, meta.NAME; "
    "ops: = != > >= < <= ~)"
)

Scalar = str | int | float
# The JSON forms a request's ``filter`` may take, named in every refusal of its shape.
ACCEPTED_FORMS = (
    'a list of condition strings ["source=hr/**", "page<=5"], one such string, or an object '
    '{"source": "hr/**", "modified": {"gte": "2025-01-01"}}'
)


class FilterError(DeepSearcherError):
    default_hint = FILTER_HINT


@dataclass(frozen=True)
class Condition:
    """One validated condition. ``field`` is ``source``, ``type``, ``modified``, ``page`` or
    ``meta.NAME`` (NAME matches ``[A-Za-z_][A-Za-z0-9_]*``); ``op`` is ``glob`` (source),
    ``in``/``not in`` (type), or ``== != > >= < <= contains``."""

    field: str
    op: str
    value: Scalar | tuple[str, ...]

    def __str__(self) -> str:
        value = ",".join(self.value) if isinstance(self.value, tuple) else self.value
        op = {"glob": "=", "in": "=", "not in": "!=", "==": "=", "contains": "~"}.get(
            self.op, self.op
        )
        return f"{self.field}{op}{value}"


@dataclass(frozen=True)
class Filter:
    """Conditions that all must hold (AND). Frozen and hashable: part of ``QueryOptions``."""

    conditions: tuple[Condition, ...]

    def __str__(self) -> str:
        return " AND ".join(str(c) for c in self.conditions)

    def __bool__(self) -> bool:
        return bool(self.conditions)

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(c.field for c in self.conditions)

    @classmethod
    def parse(cls, expressions: Iterable[str]) -> Filter:
        """From CLI strings (``--filter`` repeated), one condition each."""
        conditions: list[Condition] = []
        for expr in expressions:
            if not isinstance(expr, str):
                shown = repr(expr)[:60]
                raise FilterError(
                    f"a filter condition must be a string, not {shown}; a filter is "
                    + ACCEPTED_FORMS
                )
            conditions += _parse_one(expr)
        return cls(tuple(conditions))

    @classmethod
    def from_json(cls, value: object) -> Filter | None:
        """From a request's ``filter``: a list of condition strings, a single string, or an
        object (see the module docstring); None or empty means no filter."""
        if value is None:
            return None
        if isinstance(value, Filter):
            return value or None
        if isinstance(value, str):
            return cls.parse([value]) or None
        if isinstance(value, Sequence) and not isinstance(value, bytes):
            return cls.parse(value) or None
        if isinstance(value, Mapping):
            return cls(tuple(_from_object(value))) or None
        raise FilterError(f"filter must be {ACCEPTED_FORMS}, not {type(value).__name__}")


# -- parsing ----------------------------------------------------------------------------------

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TYPE_RE = re.compile(r"[a-z0-9]{1,16}")
_EXPR_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(>=|<=|!=|==|=|>|<|~)\s*(.*?)\s*$", re.S)
_OPS = {
    "=": "==",
    "==": "==",
    "!=": "!=",
    ">": ">",
    ">=": ">=",
    "<": "<",
    "<=": "<=",
    "~": "contains",
}
_JSON_OPS = {
    "eq": "==",
    "ne": "!=",
    "gt": ">",
    "gte": ">=",
    "lt": "<",
    "lte": "<=",
    "contains": "contains",
}
_NUMBER_RE = re.compile(r"-?\d+(\.\d+)?")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MAX_VALUE = 1000
_ORDER_OPS = (">", ">=", "<", "<=")


def _parse_one(expr: str) -> list[Condition]:
    m = _EXPR_RE.match(expr)
    if not m:
        raise FilterError(f"cannot read filter '{_shorten(expr)}'")
    key, op, raw = m.group(1), _OPS[m.group(2)], _unquote(m.group(3))
    return _condition(key, op, raw, expr)


def _from_object(obj: Mapping[object, object]) -> list[Condition]:
    out: list[Condition] = []
    for key, spec in obj.items():
        if not isinstance(key, str):
            raise FilterError(f"filter key {key!r} is not a string")
        if key == "meta":
            if not isinstance(spec, Mapping):
                raise FilterError('filter "meta" must be an object of NAME: condition')
            for name, sub in spec.items():
                out += _object_conditions(f"meta.{name}", sub)
        else:
            out += _object_conditions(key, spec)
    return out


def _object_conditions(key: str, spec: object) -> list[Condition]:
    if isinstance(spec, Mapping):
        out: list[Condition] = []
        for op_name, raw in spec.items():
            op = _JSON_OPS.get(str(op_name))
            if op is None:
                raise FilterError(
                    f"unknown filter operator '{op_name}' for {key}",
                    f"operators: {', '.join(_JSON_OPS)}",
                )
            out += _condition(key, op, _json_scalar(key, raw), f"{key} {op_name} {raw!r}")
        return out
    if isinstance(spec, list) and key == "type":
        return _condition(key, "==", ",".join(str(v) for v in spec), f"type {spec!r}")
    return _condition(key, "==", _json_scalar(key, spec), f"{key} {spec!r}")


def _json_scalar(key: str, raw: object) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise FilterError(f"filter value for {key} must be a string or a number, not {raw!r}")
    return str(raw)


def _condition(key: str, op: str, raw: str, expr: str) -> list[Condition]:
    if not raw:
        raise FilterError(f"filter '{_shorten(expr)}' has no value")
    if len(raw) > _MAX_VALUE:
        raise FilterError(f"filter value for {key} is longer than {_MAX_VALUE} characters")
    if any(ord(ch) < 32 for ch in raw):
        raise FilterError(f"filter value for {key} holds a control character")
    if key in ("source", "path"):
        if op != "==":
            raise FilterError(f"source takes a glob with '=', not '{op}'", "e.g. source=hr/**")
        return [Condition("source", "glob", raw)]
    if key == "type":
        if op not in ("==", "!="):
            raise FilterError(f"type takes '=' or '!=', not '{op}'", "e.g. type=pdf,docx")
        types = tuple(sorted({t.strip().lower().lstrip(".") for t in raw.split(",")} - {""}))
        bad = [t for t in types if not _TYPE_RE.fullmatch(t)]
        if bad or not types:
            raise FilterError(f"invalid file type '{_shorten(raw)}'", "e.g. type=pdf,docx,md")
        return [Condition("type", "in" if op == "==" else "not in", types)]
    if key == "modified":
        if op in ("!=", "contains"):
            raise FilterError(f"modified takes = > >= < <=, not '{op}'")
        return _date_range("modified", op, _valid_date(raw, key))
    if key == "page":
        if op in ("!=", "contains"):
            raise FilterError(f"page takes = > >= < <=, not '{op}'")
        if not raw.isdigit() or int(raw) < 1:
            raise FilterError(f"page must be a whole number from 1, not '{_shorten(raw)}'")
        n = int(raw)
        if op == "==":
            return [Condition("page", ">=", n), Condition("page", "<=", n)]
        return [Condition("page", op, n)]
    if key.startswith("meta."):
        name = key[len("meta.") :]
        if not _NAME_RE.fullmatch(name):
            raise FilterError(
                f"invalid metadata name '{_shorten(name)}'",
                "metadata names are letters, digits and _, e.g. meta.date, meta.from",
            )
        field = f"meta.{name}"
        if op == "contains":
            return [Condition(field, op, raw)]
        if _DATE_RE.fullmatch(raw):
            return _date_range(field, op, _valid_date(raw, key))
        if _NUMBER_RE.fullmatch(raw) and op in _ORDER_OPS:
            return [Condition(field, op, float(raw) if "." in raw else int(raw))]
        return [Condition(field, op, raw)]
    raise FilterError(f"unknown filter key '{_shorten(key)}'")


def _date_range(field: str, op: str, value: str) -> list[Condition]:
    """Stored dates are ISO text (``2025-03-01T10:00:00+00:00``), which sorts as time does;
    a bare day means the whole day, so ``<= D`` is ``< D+1`` and ``= D`` is ``[D, D+1)``."""
    if not _DATE_RE.fullmatch(value):
        return [Condition(field, op, value)]
    next_day = (date.fromisoformat(value) + timedelta(days=1)).isoformat()
    if op == "==":
        return [Condition(field, ">=", value), Condition(field, "<", next_day)]
    if op == "!=":
        return [Condition(field, "!=", value)]
    if op == "<=":
        return [Condition(field, "<", next_day)]
    if op == ">":
        return [Condition(field, ">=", next_day)]
    return [Condition(field, op, value)]


def _valid_date(raw: str, key: str) -> str:
    try:
        if _DATE_RE.fullmatch(raw):
            return date.fromisoformat(raw).isoformat()
        return datetime.fromisoformat(raw).isoformat()
    except ValueError:
        raise FilterError(
            f"{key} needs a date like 2025-01-01 (or 2025-01-01T09:00), not '{_shorten(raw)}'"
        ) from None


def _unquote(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw


def _shorten(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- source globs -------------------------------------------------------------------------------


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The exact meaning of a source glob: ``*`` and ``?`` stay within one path segment, ``**``
    crosses segments (``a/**/b`` matches ``a/b`` too); a pattern not starting with ``/`` or a
    URL scheme matches after any ``/`` (``hr/**`` matches ``/data/hr/x.pdf``)."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    body = "".join(out)
    prefix = "" if is_anchored(pattern) else "(?:.*/)?"
    return re.compile(f"{prefix}{body}", re.S)


def is_anchored(pattern: str) -> bool:
    return pattern.startswith("/") or bool(re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", pattern))
