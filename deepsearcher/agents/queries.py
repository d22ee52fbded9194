"""Search queries the model did not write well: sub-queries that point back into the question
("Who is that office's manager?") are made standalone."""

from __future__ import annotations

import re

from deepsearcher.llm import JsonSchema

QUERIES_SCHEMA = JsonSchema(
    "queries",
    {
        "type": "object",
        "properties": {"queries": {"type": "array", "items": {"type": "string"}}},
        "required": ["queries"],
        "additionalProperties": False,
    },
)

# A pronoun, or a demonstrative before a noun ("that office", "these rules"): words that only
# mean something next to the question they came from. "that" before a verb starts a relative
# clause ("the film that was shot in Leland"), which points nowhere.
_NOT_A_NOUN = (
    r"(?!(?:was|is|were|are|has|had|have|will|would|can|could|did|does|do|may|might|must|"
    r"should|shall|be|been)\b)"
)
_BACK_REFERENCE = re.compile(
    r"\b(?:he|she|it|they|him|them|his|its|their|theirs|hers)\b"
    rf"|\b(?:that|this|these|those|the same|said|the former|the latter)\s+{_NOT_A_NOUN}[a-z][\w-]*",
    re.IGNORECASE,
)
_DEMONSTRATIVE = re.compile(
    rf"\b(?:that|this|these|those|said)\s+{_NOT_A_NOUN}(?=[a-z])", re.IGNORECASE
)
_WORD = re.compile(r"[\w][\w.'%-]*[\w%]|\w", re.UNICODE)
_FILLER_WORDS = """a an the and or of in on at to for by with from as is are was were be been being do does
    did what which who whom whose when where why how that this these those it its their there
    any all some can could would should will shall may might must about into than then also
    please tell me us give list show find name named our your my i we you he she they them his
    her s"""
_FILLER = frozenset(_FILLER_WORDS.split())


def key_words(text: str) -> list[str]:
    """The words of ``text`` that carry meaning, in order and spelling, each once."""
    seen: set[str] = set()
    out = []
    for w in _WORD.findall(text):
        w = w.strip("'")
        key = w.casefold()
        if key in _FILLER or key in seen or (len(w) < 3 and not w.isdigit()):
            continue
        seen.add(key)
        out.append(w)
    return out


def standalone(query: str, question: str) -> str:
    """``query`` with its back-references made harmless: the demonstrative dropped ("that
    office's manager" -> "office's manager") and the question's key words it lacks added, so
    the search still knows whom or what the query is about. Unchanged when it has none, or
    when it is the question itself."""
    if query.strip().casefold() == question.strip().casefold():
        return query
    if not _BACK_REFERENCE.search(query):
        return query
    base = _DEMONSTRATIVE.sub("", query).strip()
    have = {w.casefold() for w in key_words(base)}
    missing = [w for w in key_words(question) if w.casefold() not in have]
    if not missing:
        return base
    return f"{base.rstrip(' ?.')} ({' '.join(missing)})"
