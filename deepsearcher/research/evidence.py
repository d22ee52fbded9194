"""Evidence keyed by its passage, and the findings of a researcher's cited answer."""

from __future__ import annotations

from typing import Literal

from deepsearcher.research.models import Evidence, Finding
from deepsearcher.research.text import CITATION, claim_of, digest, sentences
from deepsearcher.types import Answer, Hit, Source


def findings_from_answer(answer: Answer, section: str) -> tuple[list[Finding], list[Evidence]]:
    """Each cited sentence of a researcher's answer as a finding; its citations as evidence
    (ids are passage keys here; ``_Run.merge`` gives them their E ids)."""
    by_n = {s.n: s for s in answer.sources}
    evidence: dict[str, Evidence] = {}
    findings: list[Finding] = []
    for sentence in sentences(answer.answer):
        keys = []
        for n in (int(x) for x in CITATION.findall(sentence)):
            if (src := by_n.get(n)) is None:
                continue
            ev = evidence_of(src)
            evidence.setdefault(ev.id, ev)
            if ev.id not in keys:
                keys.append(ev.id)
        claim = claim_of(sentence, CITATION)
        if keys and claim:
            findings.append(Finding(claim, keys, section))
    return findings, list(evidence.values())


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
    return Evidence(key, text, source, page, page_end, start, end, collection, kind)


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
