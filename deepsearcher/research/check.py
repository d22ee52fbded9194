"""Stage 5, the quality check, without an LLM: the sentences no passage holds (the draft marked
them), citations whose passages lack the sentence's key terms, the contradictions between
sources (``contradictions``: same entity, same measure, same period, different values), and
which must-answer questions the draft covers: a question is covered when a cited sentence holds
most of its key terms, or when the section researched for it cites something.

A small model's verdict on coverage was no better than this (it called a report that answered
one question of two complete) and its contradictions were the invented ones; the check costs
no call, and a revision round is spent only on what it finds."""

from __future__ import annotations

from deepsearcher.research.contradictions import find_contradictions, gap_query
from deepsearcher.research.models import Draft, DraftSection, Quality, ResearchBrief
from deepsearcher.research.state import RunState
from deepsearcher.research.text import (
    EVIDENCE_REF,
    cited_ids,
    claim_of,
    is_supported,
    key_terms,
    sentences,
    terms_share,
)

# The share of a question's key terms a cited sentence (or a section's question) must hold
# for the question to count as covered.
COVERED_SHARE = 0.5


def check(state: RunState, draft: Draft, brief: ResearchBrief) -> Quality:
    """The draft checked; ``passed`` when every question is covered and every sentence
    stands on passages that hold it."""
    quality = Quality()
    quality.contradictions = find_contradictions(state.findings, list(state.evidence.values()))
    quality.uncited_sentences = [u for s in draft.sections for u in s.unsupported]
    texts = {e.id: e.text for e in state.evidence.values()}
    for section in draft.sections:
        for sentence in sentences(section.text):
            ids = cited_ids(sentence)
            claim = claim_of(sentence, EVIDENCE_REF)
            if ids and not is_supported(claim, " ".join(texts.get(i, "") for i in ids)):
                quality.weak_citations.append(claim)
    covered = [_covered(q, draft.sections) for q in brief.must_answer]
    quality.missing_questions = [
        q for q, c in zip(brief.must_answer, covered, strict=True) if not c
    ]
    quality.gaps = list(quality.missing_questions)
    quality.coverage = sum(covered) / len(covered) if covered else 1.0
    quality.passed = (
        not quality.missing_questions
        and not quality.weak_citations
        and not quality.uncited_sentences
    )
    return quality


def _covered(question: str, sections: list[DraftSection]) -> bool:
    if not key_terms(question):
        return True
    for section in sections:
        cited = [s for s in sentences(section.text) if cited_ids(s)]
        if not cited:
            continue
        if terms_share(question, f"{section.title} {section.question}".lower()) >= COVERED_SHARE:
            return True
        if any(terms_share(question, s.lower()) >= COVERED_SHARE for s in cited):
            return True
    return False


def gaps_of(state: RunState, quality: Quality) -> list[str]:
    """What a revision researches: the questions the draft does not cover, and each
    contradiction not researched yet."""
    gaps = []
    for query in [*quality.gaps, *(gap_query(c) for c in quality.contradictions)]:
        if query not in state.researched:
            state.researched.add(query)
            gaps.append(query)
    return gaps
