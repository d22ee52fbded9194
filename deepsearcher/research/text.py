"""Text helpers shared by the run and its researchers: sentences with their citations, a
claim without them, evidence ids and their citations, the stop words, and the keys that
de-duplicate claims and passages."""

from __future__ import annotations

import hashlib
import re

# Sentences, claims and key terms are found the way the answer's citation check finds them.
from deepsearcher.agents.citations import (
    CITATION,
    LOOSE_CITATION,
    STOP_WORDS,
    claim_of,
    is_supported,
    key_terms,
    sentences,
)

__all__ = [
    "CITATION",
    "EVIDENCE_ID",
    "EVIDENCE_REF",
    "LOOSE_CITATION",
    "STOP_WORDS",
    "cited_ids",
    "cited_numbers",
    "claim_of",
    "digest",
    "is_question",
    "is_supported",
    "key_terms",
    "norm",
    "sentences",
    "terms_share",
]

# An evidence id (E1, E12) and a citation of one or more of them: [E1], [E1, E2], [E1; E3].
EVIDENCE_ID = re.compile(r"E\d+")
EVIDENCE_REF = re.compile(r"\[\s*(E\d+(?:\s*[,;]\s*E\d+)*)\s*\]")


def cited_ids(sentence: str) -> set[str]:
    """The evidence ids a sentence cites."""
    return {i for m in EVIDENCE_REF.findall(sentence) for i in EVIDENCE_ID.findall(m)}


def digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def norm(text: str) -> str:
    """A claim's de-duplication key: lower case, no punctuation, single spaces."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def cited_numbers(text: str) -> list[int]:
    """The source numbers ``text`` cites, in any of the forms ``LOOSE_CITATION`` knows."""
    found = (re.findall(r"\d{1,3}", m) for m in LOOSE_CITATION.findall(text))
    return list(dict.fromkeys(int(n) for ns in found for n in ns))


# How a question starts when its writer forgot the question mark.
_ASKING = re.compile(
    r"^(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could|"
    r"should|will|would|has|have|had|may|might)\b",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    """Whether ``text`` asks rather than states: it ends with "?" or starts the way a
    question does ("Is there any other information about ...")."""
    flat = text.strip().strip("\"'“”")
    return flat.endswith("?") or _ASKING.match(flat) is not None


def terms_share(text: str, passages: str) -> float:
    """The share of ``text``'s key terms that ``passages`` (lower case) holds; 1.0 without
    terms."""
    terms = key_terms(text)
    return sum(1 for t in terms if t in passages) / len(terms) if terms else 1.0
