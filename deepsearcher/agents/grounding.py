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


def holds(text: str, answer: str) -> bool:
    """Whether a passage states ``answer``: the answer itself, or all its numbers and most of
    its words ("Northwind plant in Austin, Texas" against "assembled in Austin, Texas").
    Numbers and short words count whole: "2–8 °C" is not in a table of "3,412" and "98.2"."""
    passage, wanted = _fold(text), _fold(answer)
    if _unspaced(wanted):
        if wanted in passage:
            return True
    elif re.search(rf"(?<![\w.,]){re.escape(wanted)}(?![\w]|[.,]\d)", passage):
        return True
    numbers = set(_NUMBER.findall(passage))
    if any(n not in numbers for n in _NUMBER.findall(wanted)):
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
