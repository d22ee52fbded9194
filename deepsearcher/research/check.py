"""Stage 5, the quality check: the cheap structural checks (uncited sentences, citations whose
passages lack the sentence's key terms, figures the sources disagree on), then one call that
says which of the brief's questions the draft answers, its gaps and contradictions. A failed
call leaves the structural stand-in: most of a question's terms appear in the draft."""

from __future__ import annotations

from functools import partial

from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.prompting import ask, escape_document, messages_for
from deepsearcher.research import prompts
from deepsearcher.research.contradictions import (
    find_contradictions,
    gap_query,
    merge_contradictions,
    parse_contradictions,
)
from deepsearcher.research.models import Draft, Quality, ResearchBrief
from deepsearcher.research.parsing import parse_check
from deepsearcher.research.render import findings_text
from deepsearcher.research.state import RunDeps, RunState, note
from deepsearcher.research.text import (
    EVIDENCE_REF,
    cited_ids,
    claim_of,
    is_supported,
    sentences,
    terms_share,
)


def check_structure(state: RunState, draft: Draft) -> Quality:
    """The cheap checks: sentences without a citation, citations whose passages do not
    contain the sentence's key terms, and figures or dates the sources disagree on."""
    quality = Quality()
    quality.contradictions = find_contradictions(state.findings, list(state.evidence.values()))
    for section in draft.sections:
        for sentence in sentences(section.text):
            ids = cited_ids(sentence)
            claim = claim_of(sentence, EVIDENCE_REF)
            if len(claim.split()) < 5:
                continue  # headings and fragments
            if not ids:
                quality.uncited_sentences.append(claim)
                continue
            passages = " ".join(e.text for e in state.evidence.values() if e.id in ids)
            if not is_supported(claim, passages):
                quality.weak_citations.append(claim)
    return quality


async def check(state: RunState, deps: RunDeps, draft: Draft, brief: ResearchBrief) -> Quality:
    """The structural checks and the model's: coverage of the brief's questions, gaps, and
    contradictions; ``passed`` when no question is missing and every sentence is cited."""
    quality = check_structure(state, draft)
    questions = brief.must_answer
    text = draft.text()
    covered: list[bool] | None = None
    if state.findings:
        try:
            reply = await ask(
                state.ctx,
                messages_for(
                    prompts.CHECK.format(
                        questions="\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1)),
                        findings=findings_text(state.findings)[:6000],
                        draft=escape_document(text[:8000]),
                    )
                ),
                partial(parse_check, questions=len(questions)),
            )
            covered, quality.gaps, quality.llm_score = reply.covered, reply.gaps, reply.score
            known = [e.id for e in state.evidence.values()]
            said = parse_contradictions(reply.contradictions, state.findings, known)
            quality.contradictions = merge_contradictions(quality.contradictions, said)
        except (LLMError, BudgetExceeded) as exc:
            note(state, deps, f"quality check failed ({exc.message}); using the structural check")
    if covered is None:  # the structural stand-in: most of a question's terms appear
        lower = text.lower()
        covered = [terms_share(q, lower) >= 0.5 for q in questions]
    quality.missing_questions = [q for q, c in zip(questions, covered, strict=True) if not c]
    quality.coverage = sum(covered) / len(covered) if covered else 1.0
    quality.passed = (
        not quality.missing_questions
        and not quality.weak_citations
        and not quality.uncited_sentences
    )
    return quality


def gaps_of(state: RunState, quality: Quality) -> list[str]:
    """What a revision researches: the check's gaps (or the questions it found unanswered)
    while the draft fails, and each contradiction not yet researched."""
    gaps = [] if quality.passed else list(quality.gaps or quality.missing_questions)
    for c in quality.contradictions:
        key = frozenset((*c.evidence_a, *c.evidence_b))
        if key not in state.researched_conflicts:
            state.researched_conflicts.add(key)
            gaps.append(gap_query(c))
    state.contradictions = list(quality.contradictions)
    return gaps
