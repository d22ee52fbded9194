"""Evidence keyed by its passage, and the findings of a researcher's cited answer."""

from __future__ import annotations

import re
from typing import Literal

from deepsearcher.research.models import Evidence, Finding
from deepsearcher.research.text import (
    LOOSE_CITATION,
    cited_numbers,
    claim_of,
    digest,
    sentences,
    terms_share,
)
from deepsearcher.types import Answer, Hit, Source

# The least share of an answer's key terms its passages must hold for the whole answer to
# stand as one finding when no sentence of it carries a citation.
ANSWER_SUPPORT_SHARE = 0.5
# An answer that says the documents are silent is no finding, whatever words it shares.
_SILENT = re.compile(
    r"\b(?:do(?:es)? not (?:state|say|mention|contain|specify|provide)|no (?:information|mention)"
    r"|not (?:stated|mentioned|specified)|no generated answer|no answer)\b",
    re.IGNORECASE,
)


def findings_from_answer(answer: Answer, section: str) -> tuple[list[Finding], list[Evidence]]:
    """Each cited sentence of a researcher's answer as a finding; its citations as evidence
    (ids are passage keys here; ``gather.merge`` gives them their E ids). Citations count in
    the forms models write them ([1], [1, 2], [Source 1])."""
    by_n = {s.n: s for s in answer.sources}
    evidence: dict[str, Evidence] = {}
    findings: list[Finding] = []
    for sentence in sentences(answer.answer):
        keys = []
        for n in cited_numbers(sentence):
            if (src := by_n.get(n)) is None:
                continue
            ev = evidence_of(src)
            evidence.setdefault(ev.id, ev)
            if ev.id not in keys:
                keys.append(ev.id)
        claim = claim_of(sentence, LOOSE_CITATION)
        if keys and claim:
            findings.append(Finding(claim, keys, section))
    return findings, list(evidence.values())


def answer_as_finding(answer: Answer, section: str) -> tuple[list[Finding], list[Evidence]]:
    """The whole answer as one finding, when no sentence of it carries a usable citation but
    its sources hold most of its key terms (a small model that writes a right answer and
    forgets the [n]); nothing when they do not (an answer saying the documents are silent)."""
    text = claim_of(" ".join(sentences(answer.answer)), LOOSE_CITATION)
    # An answer that cites nothing lists its passages under ``retrieved``, not ``sources``.
    given = answer.sources or answer.retrieved
    if not text or not given or _SILENT.search(text):
        return [], []
    passages = " ".join(s.text for s in given).lower()
    if terms_share(text, passages) < ANSWER_SUPPORT_SHARE:
        return [], []
    supporting = [s for s in given if terms_share(text, s.text.lower()) > 0]
    evidence = [evidence_of(s) for s in supporting]
    return [Finding(text, [e.id for e in evidence], section)], evidence


def passage_evidence(
    collection: str | None,
    source: str,
    start: int | None,
    end: int | None,
    text: str,
    *,
    page: int | None = None,
    page_end: int | None = None,
    kind: Literal["doc", "web"] = "doc",
) -> Evidence:
    """Evidence keyed by the passage (the same passage from two researchers is one item)."""
    key = "|".join(str(v) for v in (collection, source, start, end, digest(text)))
    return Evidence(
        key,
        text,
        source,
        collection,
        start=start,
        end=end,
        page=page,
        page_end=page_end,
        kind=kind,
    )


def evidence_of(passage: Hit | Source) -> Evidence:
    """The evidence for a retrieved passage or an answer's cited source (same fields)."""
    return passage_evidence(
        passage.collection,
        passage.source,
        passage.start,
        passage.end,
        passage.text,
        page=passage.page,
        page_end=passage.page_end,
        kind=passage.kind,
    )
