"""Text helpers shared by the run and its researchers: sentences with their citations, a
claim without them, and the keys that de-duplicate claims and passages."""

from __future__ import annotations

import hashlib
import re

CITATION = re.compile(r"\[(\d{1,3})\]")
# How models write citations besides [1]: [1, 2], [1; 3], [Source 2], [source 1, 2].
LOOSE_CITATION = re.compile(
    r"\[\s*(?:sources?\s*)?(\d{1,3}(?:\s*[,;]\s*(?:sources?\s*)?\d{1,3})*)\s*\]", re.IGNORECASE
)
_WORD = re.compile(r"[a-z0-9][a-z0-9.%-]*[a-z0-9%]|[0-9]", re.IGNORECASE)
_STOP_WORDS = (
    "the and for are was were with that this from have has had not but its their they "
    "them what which when where who whom will would could should about into than then "
    "there these those been being also such each other more most some any all our your "
    "does did"
)
_STOP = frozenset(_STOP_WORDS.split())
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


def cited_numbers(text: str) -> list[int]:
    """The source numbers ``text`` cites, in any of the forms ``LOOSE_CITATION`` knows."""
    found = (re.findall(r"\d{1,3}", m) for m in LOOSE_CITATION.findall(text))
    return list(dict.fromkeys(int(n) for ns in found for n in ns))


def key_terms(text: str) -> list[str]:
    """The words a passage must hold to support a sentence: not stop words, 4+ letters or
    a number."""
    words = [w.lower().rstrip(".") for w in _WORD.findall(text)]
    return [w for w in dict.fromkeys(words) if (len(w) >= 4 or w.isdigit()) and w not in _STOP]


def terms_share(text: str, passages: str) -> float:
    """The share of ``text``'s key terms that ``passages`` (lower case) holds; 1.0 without
    terms."""
    terms = key_terms(text)
    return sum(1 for t in terms if t in passages) / len(terms) if terms else 1.0


def claim_of(sentence: str, citation: re.Pattern[str]) -> str:
    """The sentence without its citations (and the space they leave before punctuation)."""
    return _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(citation.sub("", sentence).split()))
