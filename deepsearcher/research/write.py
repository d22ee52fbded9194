"""Stage 4, the draft: one call writes the report from the findings and the evidence they
cite (citations still evidence ids). A failed draft, or one citing none of the evidence,
lists the findings as the researchers returned them."""

from __future__ import annotations

from collections.abc import Sequence

from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.prompting import ask, messages_for
from deepsearcher.research import prompts
from deepsearcher.research.contradictions import conflicts_text
from deepsearcher.research.models import Draft, Finding, ReportSection, ResearchBrief
from deepsearcher.research.parsing import parse_draft
from deepsearcher.research.render import (
    brief_text,
    evidence_block,
    findings_text,
    hypotheses_text,
)
from deepsearcher.research.state import RunDeps, RunState, note
from deepsearcher.research.text import cited_ids, sentences

MAX_EVIDENCE_IN_PROMPT = 40


async def write_draft(state: RunState, deps: RunDeps, brief: ResearchBrief) -> Draft:
    """The draft, its citations still evidence ids."""
    if not state.findings:
        return _draft_without_findings(brief)
    evidence = list(state.evidence.values())[:MAX_EVIDENCE_IN_PROMPT]
    findings = findings_text(state.findings) + hypotheses_text(state.hypotheses)
    if state.contradictions:  # the writer says the sources disagree, not which one to trust
        findings += "\n" + conflicts_text(state.contradictions)
    prompt = prompts.WRITE.format(
        brief=brief_text(brief),
        findings=findings,
        evidence="\n\n".join(evidence_block(e) for e in evidence),
    )
    told = len(state.contradictions)
    try:
        # Not budgeted: the researchers left this call its reserve.
        draft = await ask(state.ctx, messages_for(prompt), parse_draft, budgeted=False)
    except (LLMError, BudgetExceeded) as exc:
        note(state, deps, f"draft failed ({exc.message}); listing the findings as found")
        return _draft_from_findings(brief, state.findings, exc.message, told)
    draft.title = draft.title or brief.goal
    draft.conflicts_told = told
    known = {e.id for e in state.evidence.values()}
    texts = [draft.summary, *(s.text for s in draft.sections)]
    if not any(cited_ids(sentence) & known for t in texts for sentence in sentences(t)):
        # A draft that cites none of the evidence would hide every finding behind prose
        # the check can only fail.
        reason = "the draft cited none of the evidence"
        note(state, deps, f"{reason}; listing the findings as found")
        return _draft_from_findings(brief, state.findings, reason, told)
    return draft


def _draft_from_findings(
    brief: ResearchBrief, findings: Sequence[Finding], reason: str, told: int
) -> Draft:
    sections: dict[str, list[str]] = {}
    for f in findings:
        refs = "".join(f"[{e}]" for e in f.evidence)
        sections.setdefault(f.section, []).append(f"- {f.claim} {refs}")
    return Draft(
        title=brief.goal,
        summary=f"No written report: {reason}. The findings as the researchers returned them.",
        sections=[ReportSection(t, "\n".join(lines)) for t, lines in sections.items()],
        conflicts_told=told,
    )


def _draft_without_findings(brief: ResearchBrief) -> Draft:
    return Draft(
        title=brief.goal,
        summary="The researchers found no cited evidence in the documents for this request.",
    )
