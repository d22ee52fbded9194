"""Checking an answer's citations against the passages they point to, without an LLM.

A cited sentence is *supported* when its passage holds enough of the sentence's key terms
(words of four letters or more, numbers). It is the cheap check that catches a citation
pointing at the wrong passage, not a proof; research's quality check uses it on its drafts too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

CITATION = re.compile(r"\[(\d{1,3})\]")
# How models write citations besides [1]: [1, 2], [1; 3], [Source 2], [source 1, 2].
LOOSE_CITATION = re.compile(
    r"\[\s*(?:sources?\s*)?(\d{1,3}(?:\s*[,;]\s*(?:sources?\s*)?\d{1,3})*)\s*\]", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CITE_AFTER_END = re.compile(r"([.!?])\s*((?:\[[^\]\n]{1,40}\])+)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.!?,;:])")
_MARKER = re.compile(r"^\s*(?:[-*•+]\s+|\d{1,3}[.)]\s+)")
_WORD = re.compile(r"[a-z0-9][a-z0-9.%-]*[a-z0-9%]|[0-9]", re.IGNORECASE)
# Words too common to tell one claim from another (research's contradiction check adds its own).
_STOP_TEXT = (
    "the and for are was were with that this from have has had not but its their they "
    "them what which when where who whom will would could should about into than then "
    "there these those been being also such each other more most some any all our your "
    "does did"
)
STOP_WORDS = frozenset(_STOP_TEXT.split())
# Below this share of its key terms in the cited passages, a claim counts as unsupported;
# claims with fewer than MIN_TERMS terms are too short to judge.
MIN_SHARE = 0.34
MIN_TERMS = 3


def canonical_citations(text: str) -> str:
    """``text`` with every loose citation written as ``[1][2]``, so one strict pattern finds
    them all (small models write ``[Source 1]`` or ``[1, 2]`` as often as ``[1]``)."""

    def one_each(m: re.Match[str]) -> str:
        return "".join(f"[{n}]" for n in re.findall(r"\d{1,3}", m.group(1)))

    return LOOSE_CITATION.sub(one_each, text)


def sentences(text: str) -> list[str]:
    """The sentences (and list items) of ``text``, each with the citations that follow it."""
    # A citation after the full stop ("... lab. [2]") belongs to the sentence it follows.
    text = _CITE_AFTER_END.sub(r" \2\1", text)
    return [s for s in (_MARKER.sub("", p).strip() for p in _SENTENCE_END.split(text)) if s]


def claim_of(sentence: str, citation: re.Pattern[str]) -> str:
    """The sentence without its citations (and the space they leave before punctuation)."""
    return _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(citation.sub("", sentence).split()))


def key_terms(text: str) -> list[str]:
    """The words that carry a claim: four letters or more, or numbers; lower case, once each."""
    words = [w.lower().rstrip(".") for w in _WORD.findall(text)]
    return [w for w in dict.fromkeys(words) if (len(w) >= 4 or w.isdigit()) and w not in STOP_WORDS]


def is_supported(claim: str, passages_text: str) -> bool:
    """Whether ``passages_text`` holds enough of ``claim``'s key terms (short claims pass)."""
    terms = key_terms(claim)
    if len(terms) < MIN_TERMS:
        return True
    lower = passages_text.lower()
    found = sum(1 for t in terms if t in lower)
    return found / len(terms) >= MIN_SHARE


def unsupported_citations(answer: str, passages: Sequence[str]) -> list[str]:
    """The sentences of ``answer`` whose ``[n]`` passages (``passages[n - 1]``) do not hold
    them, as written (with their citations)."""
    out = []
    for sentence in sentences(answer):
        numbers = {int(n) for n in CITATION.findall(sentence)}
        cited = [passages[n - 1] for n in sorted(numbers) if 1 <= n <= len(passages)]
        if cited and not is_supported(claim_of(sentence, CITATION), " ".join(cited)):
            out.append(sentence)
    return out
