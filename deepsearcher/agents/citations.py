"""Checking an answer's citations against the passages they point to, without an LLM.

A cited sentence is *supported* when its passage holds enough of the sentence's key terms
(words of four letters or more, numbers). It is the cheap check that catches a citation
pointing at the wrong passage, not a proof; research's quality check uses it on its drafts too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from deepsearcher.types import Hit

CITATION = re.compile(r"\[(\d{1,3})\]")
# How models write citations besides [1]: [1, 2], [1; 3], [Source 2], [source 1, 2].
LOOSE_CITATION = re.compile(
    r"\[\s*(?:sources?\s*)?(\d{1,3}(?:\s*[,;]\s*(?:sources?\s*)?\d{1,3})*)\s*\]", re.IGNORECASE
)
_CLOSING = ".!?。！？"  # a sentence's closing punctuation, which its citations go before
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CITE_AFTER_END = re.compile(r"([.!?])\s*((?:\[[^\]\n]{1,40}\])+)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.!?,;:])")
_MARKER = re.compile(r"^\s*(?:[-*•+]\s+|\d{1,3}[.)]\s+)")
_REPEATED_MARKER = re.compile(r"(\[\d{1,3}\])(?:\s*\1)+")
_WORD = re.compile(r"[a-z0-9][a-z0-9.%-]*[a-z0-9%]|[0-9]", re.IGNORECASE)
# Words too common to tell one claim from another (research's contradiction check adds its own).
_STOP_TEXT = (
    "the and for are was were with that this from have has had not but its their they "
    "them what which when where who whom will would could should about into than then "
    "there these those been being also such each other more most some any all our your "
    "does did"
)
STOP_WORDS = frozenset(_STOP_TEXT.split())
# Words an answer uses about its sources ("according to the documents provided"): they say
# nothing a passage should hold.
_META_TEXT = (
    "document documents passage passages information provided according based source sources "
    "states stated mentioned mentions given text context answer question"
)
META_WORDS = frozenset(_META_TEXT.split())
# Below this share of its key terms in the cited passages, a claim counts as unsupported;
# claims with fewer than MIN_TERMS terms are too short to judge.
MIN_SHARE = 0.34
MIN_TERMS = 3


def canonical_citations(text: str) -> str:
    """``text`` with every loose citation written as ``[1][2]``, so one strict pattern finds
    them all (small models write ``[Source 1]`` or ``[1, 2]`` as often as ``[1]``)."""

    def one_each(m: re.Match[str]) -> str:
        return "".join(f"[{n}]" for n in re.findall(r"\d{1,3}", m.group(1)))

    # "2–8 °C [2] [2]": a small model repeats the marker it just wrote.
    return _REPEATED_MARKER.sub(r"\1", LOOSE_CITATION.sub(one_each, text))


def citations_inside(text: str) -> str:
    """``text`` with each citation written after a full stop ("... lab. [2]") moved before it
    ("... lab [2]."), so it stays with the sentence it belongs to."""
    return _CITE_AFTER_END.sub(r" \2\1", text)


def sentences(text: str) -> list[str]:
    """The sentences (and list items) of ``text``, each with the citations that follow it."""
    text = citations_inside(text)
    return [s for s in (_MARKER.sub("", p).strip() for p in _SENTENCE_END.split(text)) if s]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Where each sentence (or list item) of ``text`` starts and ends, list markers and
    surrounding space left out; run ``citations_inside`` first so citations stay inside."""
    spans = []
    start = 0
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = len(text) if m is None else m.start()
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip())
        marker = _MARKER.match(piece[lead:])
        lead += marker.end() if marker else 0
        if piece[lead:].strip():
            spans.append((start + lead, start + len(piece.rstrip())))
        if m is not None:
            start = m.end()
    return spans


# A sentence that says the documents hold no answer: nothing to cite, nothing unsupported.
NOT_STATED = re.compile(
    r"(do(?:es)? not (?:state|mention|contain|say|specify|provide|include|give)|no information"
    r"|not (?:stated|mentioned|specified|provided|found|available|given)"
    r"|cannot (?:be )?(?:found|answer|determin)|could not find|unable to (?:find|determine))",
    re.IGNORECASE,
)

# A citation standing where the sentence's fact belongs: after a verb or preposition at the end
# of the sentence ("The firmware release that fixed it is [3].").
_FACT_AS_MARKER = re.compile(
    r"\b(?:is|are|was|were|be|been|being|of|at|in|on|to|from|by|for|as|with|under|into|than|"
    r"named|called|titled)\s*:?\s*((?:\[\d{1,3}\]\s*)+)[.!?]?\s*$",
    re.IGNORECASE,
)
# A citation in the middle of what a verb says ("… is [2][3] June 2025."): it belongs at the end.
_MARKER_MID_CLAUSE = re.compile(
    r"\b(is|are|was|were)\s+((?:\[\d{1,3}\])+)\s+(?=[\w(\"'])", re.IGNORECASE
)


def fact_is_marker(sentence: str) -> bool:
    """Whether a citation stands in the sentence where its fact belongs."""
    return _FACT_AS_MARKER.search(sentence.strip()) is not None


def markers_to_end(sentence: str) -> str:
    """A sentence whose citation sits between a verb and what it says, with the citation
    moved to the end: "… is [2] June 2025." -> "… is June 2025 [2]."."""
    m = _MARKER_MID_CLAUSE.search(sentence)
    if m is None:
        return sentence
    rest = sentence[: m.start(2)] + sentence[m.end(2) :].lstrip()
    return cite_at_end(" ".join(rest.split()), m.group(2))


def claim_of(sentence: str, citation: re.Pattern[str]) -> str:
    """The sentence without its citations (and the space they leave before punctuation)."""
    return _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(citation.sub("", sentence).split()))


def key_terms(text: str) -> list[str]:
    """The words that carry a claim: four letters or more, or numbers; lower case, once each."""
    words = [w.lower().rstrip(".") for w in _WORD.findall(text)]
    return [
        w
        for w in dict.fromkeys(words)
        if (len(w) >= 4 or w.isdigit()) and w not in STOP_WORDS and w not in META_WORDS
    ]


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


def cited_sources(answer_text: str, passages: Sequence[Hit]) -> tuple[str, list[int], int]:
    """The passage numbers the answer cites, in order. Citations pointing at no passage are
    removed from the text and counted, so every [n] left has a source."""
    cited: list[int] = []
    invalid = 0

    def keep(m: re.Match[str]) -> str:
        nonlocal invalid
        n = int(m.group(1))
        if 1 <= n <= len(passages):
            if n not in cited:
                cited.append(n)
            return m.group(0)
        invalid += 1
        return ""

    text = CITATION.sub(keep, canonical_citations(answer_text))
    return text, sorted(cited), invalid


def tidy(text: str) -> str:
    """Citations kept inside their sentence and after what a verb says; sentences that only
    say where the answer was found left out (``talks_about_sources``)."""
    text = citations_inside(text)
    out, pos = [], 0
    for a, b in sentence_spans(text):
        out += [text[pos:a], markers_to_end(text[a:b])]
        pos = b
    return without_source_talk("".join(out) + text[pos:])


# "This information can be found in document 1, which …", "This is stated directly in
# document [3].": a small model's closing sentence about where the answer came from.
_SOURCE_TALK = re.compile(
    r"^(?:this|that|these|the\s+(?:above\s+)?(?:information|answer|facts?|details?|data))\b"
    r"[^.!?]*?\b(?:is|are|was|were|can\s+be|could\s+be|may\s+be)\s+(?:\w+\s+)?"
    r"(?:found|stated|mentioned|given|listed|provided|shown|confirmed|taken|obtained|seen)\s+"
    r"(?:directly\s+)?(?:in|from)\s+(?:the\s+)?(?:\w+\s+)?"
    r"(?:documents?|passages?|sources?|files?|tables?|records?)\b",
    re.IGNORECASE,
)
_DOCUMENT_NUMBER = re.compile(
    r"\b(?:documents?|passages?|sources?)\s+\d+(?:\s*(?:,|and)\s*\d+)*", re.IGNORECASE
)
_NAME_OR_NUMBER = re.compile(r"\d|(?<!^)(?<![.!?]\s)\b(?!Documents?\b)[A-Z]")


def talks_about_sources(sentence: str) -> bool:
    """Whether ``sentence`` only says where the answer was found: no number or name of its
    own, so it states nothing a reader could check."""
    bare = _DOCUMENT_NUMBER.sub("document", CITATION.sub("", sentence)).strip()
    return bool(_SOURCE_TALK.match(bare)) and not _NAME_OR_NUMBER.search(bare[1:])


def without_source_talk(text: str) -> str:
    """``text`` without its sentences that only say where the answer was found; their
    citations go to the sentence before when it has none (they are its source). The first
    sentence stays: nothing comes before it."""
    spans = sentence_spans(text)
    drop = {i for i, (a, b) in enumerate(spans) if i > 0 and talks_about_sources(text[a:b])}
    if not drop:
        return text
    out, pos = [], 0
    for i, (a, b) in enumerate(spans):
        if i in drop:
            out.append(text[pos:a].rstrip(" "))
        else:
            sentence = text[a:b]
            if i + 1 in drop and not CITATION.search(sentence):
                talk = text[spans[i + 1][0] : spans[i + 1][1]]
                marks = "".join(m.group(0) for m in CITATION.finditer(talk))
                sentence = cite_at_end(sentence, marks)
            out += [text[pos:a], sentence]
        pos = b
    return ("".join(out) + text[pos:]).strip()


def cite_at_end(sentence: str, markers: str) -> str:
    """``sentence`` with ``markers`` ("[2][3]") before its closing punctuation; unchanged when
    there are none."""
    if not markers:
        return sentence
    end = sentence[-1] if sentence[-1:] in _CLOSING else ""
    return f"{sentence[: len(sentence) - len(end)].rstrip()} {markers}{end}"
