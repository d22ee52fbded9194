"""Text helpers shared by the run and its researchers: sentences with their citations, a
claim without them, and the keys that de-duplicate claims and passages."""

from __future__ import annotations

import hashlib
import re

CITATION = re.compile(r"\[(\d{1,3})\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CITE_AFTER_END = re.compile(r"([.!?])\s*((?:\[[^\]\n]{1,40}\])+)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.!?,;:])")
_MARKER = re.compile(r"^\s*(?:[-*•+]\s+|\d{1,3}[.)]\s+)")


def digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def norm(text: str) -> str:
    """A claim's de-duplication key: lower case, no punctuation, single spaces."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def sentences(text: str) -> list[str]:
    # A citation after the full stop ("... lab. [2]") belongs to the sentence it follows.
    text = _CITE_AFTER_END.sub(r" \2\1", text)
    return [s for s in (_MARKER.sub("", p).strip() for p in _SENTENCE_END.split(text)) if s]


def claim_of(sentence: str, citation: re.Pattern[str]) -> str:
    """The sentence without its citations (and the space they leave before punctuation)."""
    return _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(citation.sub("", sentence).split()))
