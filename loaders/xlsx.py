"""Excel workbooks with openpyxl: every sheet one ``Table`` (see ``loaders.tables``).

Not through unstructured: its ``partition_xlsx`` goes through pandas, which shows a date as
``2024-03-01 00:00:00``, a percentage as ``0.125`` and an amount as ``1234.5``, and its table
text loses the header. Here each cell is shown the way its number format shows it in Excel
(``2024-03-01``, ``12.5%``, ``$1,234.50``), for the formats people use; anything else falls
back to the plain value.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from deepsearcher.config import LoadingSettings
from deepsearcher.types import Document
from loaders.base import Part, assemble_document
from loaders.tables import table_parts

# Locale tags ([$-409], [$€-407]), colours ([Red]) and conditions ([<1000]) do not print;
# elapsed-time brackets ([h]) are handled as plain h.
_BRACKET_RE = re.compile(r"\[[^\]]*\]")
_CURRENCY_TAG_RE = re.compile(r"\[\$([^\]-]+)(?:-[0-9A-Fa-f]+)?\]")
_DATE_TOKEN_RE = re.compile(
    r'"[^"]*"|\\.|yyyy|yy|mmmmm|mmmm|mmm|mm|m|dddd|ddd|dd|d|hh|h|ss|s|AM/PM|am/pm|A/P|a/p|\.0+|.',
    re.IGNORECASE,
)
_MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
# Excel's built-in short date (format 14): shown in the reader's locale, so the ISO form.
_LOCALE_DATE_FORMATS = {"mm-dd-yy", "m/d/yy", "m/d/yyyy", "general", ""}


class XlsxLoader:
    """Every worksheet (hidden ones too) as a ``Table`` titled by the sheet name; page = sheet
    number. Empty rows and columns are dropped; a title typed above the header stays text."""

    def load(self, path: Path, settings: LoadingSettings) -> Document:
        from openpyxl import load_workbook  # lazy: only .xlsx files need it

        # read_only streams the sheet XML (a 50 MB workbook would not fit otherwise);
        # data_only gives a formula's last computed value, as Excel shows it.
        wb = load_workbook(path, read_only=True, data_only=True)
        parts: list[Part] = []
        sheets: list[str] = []
        try:
            for number, ws in enumerate(wb.worksheets, start=1):
                sheets.append(ws.title)
                if hasattr(ws, "reset_dimensions"):
                    ws.reset_dimensions()  # stored dimensions are often wrong; read every row
                rows = [[format_cell(cell) for cell in row] for row in ws.iter_rows()]
                parts += table_parts(rows, title=ws.title, heading=ws.title, page=number)
        finally:
            wb.close()
        return assemble_document(
            path, parts, "xlsx", {"sheets": sheets}, "no text found (every sheet is empty)"
        )


def format_cell(cell: Any) -> str:
    """The cell's value as Excel displays it under its number format."""
    value = getattr(cell, "value", None)
    if value is None:
        return ""
    fmt = str(getattr(cell, "number_format", None) or "General")
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return format_datetime(value, fmt)
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, int | float):
        return format_number(value, fmt)
    return str(value)


def format_datetime(value: dt.datetime | dt.date | dt.time, fmt: str) -> str:
    section = fmt.split(";")[0]
    plain = _BRACKET_RE.sub("", section).strip().lower()
    if plain in _LOCALE_DATE_FORMATS or not re.search(r"[ymdhs]", plain):
        if isinstance(value, dt.datetime) and value.time() == dt.time(0):
            return value.date().isoformat()
        if isinstance(value, dt.datetime):
            return value.isoformat(sep=" ", timespec="seconds")
        if isinstance(value, dt.time):
            return value.isoformat(timespec="seconds")
        return value.isoformat()
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time(0))
    elif isinstance(value, dt.time):
        value = dt.datetime.combine(dt.date(1900, 1, 1), value)
    return _render_date_tokens(value, _BRACKET_RE.sub("", section))


def _render_date_tokens(value: dt.datetime, fmt: str) -> str:
    tokens = _DATE_TOKEN_RE.findall(fmt)
    twelve_hour = any(t.lower() in ("am/pm", "a/p") for t in tokens)
    out: list[str] = []
    for i, token in enumerate(tokens):
        low = token.lower()
        if low.startswith('"'):
            out.append(token[1:-1])
        elif low.startswith("\\"):
            out.append(token[1:])
        elif low in ("m", "mm") and _is_minutes(tokens, i):
            out.append(f"{value.minute:02d}" if low == "mm" else str(value.minute))
        elif low == "yyyy":
            out.append(f"{value.year:04d}")
        elif low == "yy":
            out.append(f"{value.year % 100:02d}")
        elif low == "mmmmm":
            out.append(_MONTHS[value.month - 1][0])
        elif low == "mmmm":
            out.append(_MONTHS[value.month - 1])
        elif low == "mmm":
            out.append(_MONTHS[value.month - 1][:3])
        elif low == "mm":
            out.append(f"{value.month:02d}")
        elif low == "m":
            out.append(str(value.month))
        elif low == "dddd":
            out.append(_DAYS[value.weekday()])
        elif low == "ddd":
            out.append(_DAYS[value.weekday()][:3])
        elif low == "dd":
            out.append(f"{value.day:02d}")
        elif low == "d":
            out.append(str(value.day))
        elif low in ("hh", "h"):
            hour = (value.hour % 12 or 12) if twelve_hour else value.hour
            out.append(f"{hour:02d}" if low == "hh" else str(hour))
        elif low in ("ss", "s"):
            out.append(f"{value.second:02d}" if low == "ss" else str(value.second))
        elif low in ("am/pm", "a/p"):
            marker = "AM" if value.hour < 12 else "PM"
            out.append(marker if low == "am/pm" else marker[0])
        elif low.startswith(".0"):
            out.append("." + f"{value.microsecond:06d}"[: len(low) - 1])
        else:
            out.append(token)
    return "".join(out).strip()


def _is_minutes(tokens: list[str], i: int) -> bool:
    """``m``/``mm`` means minutes right after an hour or right before seconds (Excel's rule)."""
    for j in range(i - 1, -1, -1):
        low = tokens[j].lower()
        if low in ("h", "hh"):
            return True
        if low[0] in "ymd":
            break
    for j in range(i + 1, len(tokens)):
        low = tokens[j].lower()
        if low in ("s", "ss"):
            return True
        if low[0] in "ymdh":
            break
    return False


def format_number(value: float, fmt: str) -> str:
    section = fmt.split(";")[0]
    tag = _CURRENCY_TAG_RE.search(section)
    unbracketed = _BRACKET_RE.sub("", section)
    plain = re.sub(r'"[^"]*"|\\.|_.|\*.', "", unbracketed)  # literals, padding and fill
    symbol = tag.group(1) if tag else next((c for c in "$€£¥" if c in unbracketed), "")
    # Where the symbol stands: "$#,##0.00" vs "#,##0.00 €".
    first_digit = re.search(r"[0#?]", section)
    symbol_at = section.find(tag.group(0) if tag else symbol) if symbol else -1
    suffix = bool(symbol) and first_digit is not None and symbol_at > first_digit.start()
    prefix_symbol, suffix_symbol = ("", f" {symbol}") if suffix else (symbol, "")
    if plain.strip().lower() in ("general", "", "@") or not re.search(r"[0#?]", plain):
        return _general(value)
    if "e+" in plain.lower() or "e-" in plain.lower():
        mantissa = plain.lower().split("e")[0]
        return f"{value:.{_decimals(mantissa)}E}"
    if "/" in plain:  # fractions: the plain value reads better than a guessed fraction
        return _general(value)
    decimals = _decimals(plain)
    if "%" in plain:
        return f"{value * 100:.{decimals}f}%"
    text = f"{abs(value):,.{decimals}f}" if "," in plain else f"{abs(value):.{decimals}f}"
    sign = "-" if value < 0 and float(text.replace(",", "")) != 0 else ""
    return f"{sign}{prefix_symbol}{text}{suffix_symbol}"


def _decimals(number_format: str) -> int:
    if "." not in number_format:
        return 0
    return len(re.match(r"[0#?]*", number_format.split(".", 1)[1]).group())  # type: ignore[union-attr]


def _general(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.15g}" if isinstance(value, float) else str(value)
