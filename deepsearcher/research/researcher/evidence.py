"""Evidence keyed by its passage; a researcher's answer as findings and as its section's prose."""

from __future__ import annotations

import re
from typing import Literal

from deepsearcher.research.models import Evidence, Finding
from deepsearcher.research.text import (
    CITATION,
    LOOSE_CITATION,
    cited_numbers,
    claim_of,
    digest,
    sentences,
)
from deepsearcher.types import Answer, Hit, Source

# How an answer the agent wrote from its passages, without the model, begins
# (``agents.answer.fallback_answer``): its lines quote the passages, "[n] excerpt".
_QUOTED = "No generated answer:"


def findings_from_answer(answer: Answer, section: str) -> tuple[list[Finding], list[Evidence]]:
    """Each cited sentence of a researcher's answer as a finding; its citations as evidence
    (ids are passage keys here; ``RunState.merge`` gives them their E ids). Citations count in
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


def answer_passages(answer: Answer) -> list[Evidence]:
    """The passages the answer was written from, cited or not, in the order of its [n]."""
    by_n = {s.n: s for s in [*answer.sources, *answer.retrieved]}
    return [evidence_of(by_n[n]) for n in sorted(by_n)]


def section_text(answer: Answer) -> str:
    """The answer as its section's prose, [n] citing the n-th of ``answer_passages``. An
    answer the model did not write (the agent quoted its passages instead) becomes the
    passages quoted, each with its citation; the section says it is degraded elsewhere."""
    numbers = sorted({s.n for s in [*answer.sources, *answer.retrieved]})
    position = {n: i for i, n in enumerate(numbers, start=1)}
    text = answer.answer
    if text.startswith(_QUOTED):
        quotes = re.findall(r"^\[(\d{1,3})\] (.+)$", text, re.MULTILINE)
        text = "\n".join(f"“{q.strip()}” [{n}]" for n, q in quotes)

    def renumber(m: re.Match[str]) -> str:
        n = int(m.group(1))
        return f"[{position[n]}]" if n in position else ""

    return CITATION.sub(renumber, text).strip()


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
