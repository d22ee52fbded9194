"""Whether a passage states a lookup's answer, and which passage does: the check that keeps
an answer the model made up (a name or number no passage holds) out of the chain.

Matching is lenient where small models are (word order, inflections, "Austin, Texas" for
"Austin") and strict where they slip: numbers and short words count whole, and an answer
translated from a passage in another script is grounded there only by the embedder's word.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence

from deepsearcher.agents.attribution import Attributor
from deepsearcher.types import Hit

logger = logging.getLogger(__name__)

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"\w+", re.UNICODE)
_SMALL = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "at",
        "on",
        "to",
        "for",
        "and",
        "or",
        "by",
        "is",
        "are",
        "was",
        "were",
        "de",
        "la",
        "le",
    ]
)


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3}\b)", "", text)


def _unspaced(text: str) -> bool:
    """Whether ``text`` has letters of a script written without spaces between words
    (Chinese, Japanese, Thai): there a word is any run of its letters."""
    return any("\u0e00" <= c <= "\u0eff" or "\u2e80" <= c <= "\ud7ff" for c in text)


def _has_word(passage: str, words: set[str], word: str) -> bool:
    # "sensor" is in "sensors" and "approv" in "approved"; "c" (of "°C") is not in "cell".
    if _unspaced(word):
        return word in passage
    return word in words or (len(word) >= 4 and any(w.startswith(word) for w in words))


_MONTHS = {
    m: i
    for i, names in enumerate(
        [
            "january jan januari janvier januar enero",
            "february feb februari février februar febrero",
            "march mar mars märz marzo",
            "april apr avril abril",
            "may maj mai mayo",
            "june jun juni juin junio",
            "july jul juli juillet julio",
            "august aug augusti août agosto",
            "september sep sept septembre septiembre",
            "october oct oktober octobre octubre okt",
            "november nov novembre noviembre",
            "december dec december décembre dezember diciembre dez",
        ],
        start=1,
    )
    for m in names.split()
}
_MONTH = r"([^\W\d_]{3,10})\.?"
_ISO_DATE = re.compile(r"(?<![\w-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\w-])")
_DAY_MONTH_YEAR = re.compile(rf"(?<![\w.])(\d{{1,2}})\.?\s+{_MONTH}\s+(\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
_NUMERIC_DATE = re.compile(r"(?<![\w.:/-])(\d{1,2})[./](\d{1,2})[./](\d{4})(?![\w./-])")
_DATE_FORMS = (_ISO_DATE, _DAY_MONTH_YEAR, _MONTH_DAY_YEAR, _NUMERIC_DATE)


def dates(text: str) -> set[tuple[int, int, int]]:
    """The calendar dates ``text`` states in full, as (year, month, day), however written:
    "2025-05-14", "14 May 2025", "May 14, 2025", "14.05.2025" (and 05/14/2025 read both
    ways, since the order of day and month is not written down)."""
    text = _fold(text)
    found = {(int(y), int(m), int(d)) for y, m, d in _ISO_DATE.findall(text)}
    for d, month, y in _DAY_MONTH_YEAR.findall(text):
        if month in _MONTHS:
            found.add((int(y), _MONTHS[month], int(d)))
    for month, d, y in _MONTH_DAY_YEAR.findall(text):
        if month in _MONTHS:
            found.add((int(y), _MONTHS[month], int(d)))
    for a, b, y in _NUMERIC_DATE.findall(text):
        found |= {(int(y), int(b), int(a)), (int(y), int(a), int(b))}
    return {(y, m, d) for y, m, d in found if 1 <= m <= 12 and 1 <= d <= 31}


def numbers(text: str) -> set[str]:
    """The numbers ``text`` states, as ``holds`` compares them ("3,412" is 3412)."""
    return set(_NUMBER.findall(_fold(text)))


def holds(text: str, answer: str) -> bool:
    """Whether a passage states ``answer``: the answer itself, or all its numbers and most of
    its words ("Northwind plant in Austin, Texas" against "assembled in Austin, Texas").
    Numbers and short words count whole: "2–8 °C" is not in a table of "3,412" and "98.2";
    a date counts as a date, in any of the ways ``dates`` reads."""
    passage, wanted = _fold(text), _fold(answer)
    if _unspaced(wanted):
        if wanted in passage:
            return True
    elif re.search(rf"(?<![\w.,]){re.escape(wanted)}(?![\w]|[.,]\d)", passage):
        return True
    # A date is stated as that date: "2025-03-14" is not made of "FSN-2025-03" and "14 May".
    said = dates(wanted)
    if not said <= dates(passage):
        return False
    if said:  # held; the rest of the answer ("on 14 May 2025 at 08:42") is checked alone
        for form in _DATE_FORMS:
            wanted = form.sub(" ", wanted)
        if not [w for w in _WORD.findall(wanted) if w not in _SMALL]:
            return True
    stated = set(_NUMBER.findall(passage))
    if any(n not in stated for n in _NUMBER.findall(wanted)):
        return False
    words = [w for w in _WORD.findall(wanted) if w not in _SMALL]
    if not words:
        return False
    present = set(_WORD.findall(passage))
    found = sum(1 for w in words if _has_word(passage, present, w))
    return found / len(words) >= 0.6


def ground(answer: str, hits: Sequence[Hit], n: int) -> Hit | None:
    """The passage that holds ``answer``: passage ``n`` (1-based) when it does, else the first
    that does; None when none does."""
    if 1 <= n <= len(hits) and holds(hits[n - 1].text, answer):
        return hits[n - 1]
    return next((h for h in hits if holds(h.text, answer)), None)


def _latin_share(text: str) -> float | None:
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return None
    latin = sum(1 for c in letters if c.isascii() or unicodedata.name(c, "").startswith("LATIN"))
    return latin / len(letters)


def other_script(answer: str, passage: str) -> bool:
    """Whether ``answer`` and ``passage`` are written in different scripts: a Latin-letter
    answer read from a passage whose letters are mostly not (a Chinese contract), or the
    reverse. No string match can ground such an answer; the model translated it."""
    a, p = _latin_share(answer), _latin_share(passage)
    return a is not None and p is not None and abs(a - p) >= 0.5


async def translated(
    answer: str, hits: Sequence[Hit], n: int, attributor: Attributor
) -> Hit | None:
    """Passage ``n`` (1-based) for an ``answer`` the model translated from it ("Shanghai
    International Arbitration Center" from "上海国际仲裁中心"): only when it is in another script
    than the answer, the answer matches it better than any other passage of the round (the
    project's multilingual embedder, as attribution scores a sentence), and reaches the
    attribution threshold. A name the model made up, or read from another passage, does not."""
    if not 1 <= n <= len(hits) or not other_script(answer, hits[n - 1].text):
        return None
    scores, _fact = await attributor.scores([answer], [h.text for h in hits])
    row = scores[0]
    best = int(row.argmax())
    if best != n - 1 or row[best] < attributor.threshold:
        return None
    logger.debug("answer %r taken as a translation of passage %d (%.3f)", answer, n, row[best])
    return hits[best]
