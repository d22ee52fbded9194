"""Stage 4, the draft: one call writes the report from the findings and the evidence they
cite (citations still evidence ids). A failed draft, or one citing none of the evidence,
lists the findings as the researchers returned them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.prompting import (
    ask,
    document_block,
    escape_attribute,
    escape_document,
    messages_for,
)
from deepsearcher.research import prompts
from deepsearcher.research.brief import brief_text
from deepsearcher.research.contradictions import conflicts_text
from deepsearcher.research.models import (
    Evidence,
    Finding,
    Hypothesis,
    ReportSection,
    ResearchBrief,
)
from deepsearcher.research.parsing import parse_draft
from deepsearcher.research.state import RunDeps, RunState, note
from deepsearcher.research.text import cited_ids, sentences

MAX_EVIDENCE_IN_PROMPT = 40
EVIDENCE_CHARS = 600


async def write_draft(state: RunState, deps: RunDeps, brief: ResearchBrief) -> dict[str, Any]:
    """The draft as parsed JSON (citations still evidence ids)."""
    if not state.findings:
        return _draft_without_findings(brief)
    evidence = list(state.evidence.values())[:MAX_EVIDENCE_IN_PROMPT]
    prompt = prompts.WRITE.format(
        brief=brief_text(brief),
        findings=_findings_for_writer(state),
        evidence="\n\n".join(_render_evidence(e) for e in evidence),
    )
    try:
        # Not budgeted: the researchers left this call its reserve.
        draft = await ask(state.ctx, messages_for(prompt), parse_draft, budgeted=False)
    except (LLMError, BudgetExceeded) as exc:
        note(state, deps, f"draft failed ({exc.message}); listing the findings as found")
        return _draft_from_findings(brief, state.findings, exc.message)
    known = {e.id for e in state.evidence.values()}
    texts = [str(draft.get("summary") or ""), *(s.text for s in draft_sections(draft))]
    if not any(cited_ids(sentence) & known for t in texts for sentence in sentences(t)):
        # A draft that cites none of the evidence would hide every finding behind prose
        # the check can only fail.
        reason = "the draft cited none of the evidence"
        note(state, deps, f"{reason}; listing the findings as found")
        return _draft_from_findings(brief, state.findings, reason)
    return draft


def _findings_for_writer(state: RunState) -> str:
    state.conflicts_in_draft = len(state.contradictions)
    text = findings_text(state.findings) + _hypotheses_text(state.hypotheses)
    if state.contradictions:  # the writer says the sources disagree, not which one to trust
        text += "\n" + conflicts_text(state.contradictions)
    return text


def draft_sections(draft: dict[str, Any]) -> list[ReportSection]:
    """The draft's sections that have text."""
    out = []
    for s in draft.get("sections") or []:
        if isinstance(s, dict) and isinstance(s.get("text"), str) and s["text"].strip():
            out.append(ReportSection(str(s.get("title") or "Findings"), s["text"].strip()))
    return out


def findings_text(findings: Sequence[Finding]) -> str:
    """The findings by section, each with its evidence ids, as prompts show them."""
    lines: list[str] = []
    section = None
    for f in findings:
        if f.section != section:
            section = f.section
            lines.append(f"## {escape_document(section)}")
        refs = "".join(f"[{e}]" for e in f.evidence)
        lines.append(f"- {escape_document(f.claim)} {refs}")
    return "\n".join(lines)


def _hypotheses_text(hypotheses: Sequence[Hypothesis]) -> str:
    if not hypotheses:
        return ""
    lines = ["", "## Hypotheses the researchers tested"]
    for h in hypotheses:
        refs = "".join(f"[{e}]" for e in h.evidence)
        lines.append(f"- {escape_document(h.statement)}: {h.status} {refs}".rstrip())
    return "\n".join(lines)


def _render_evidence(e: Evidence) -> str:
    attributes = f'id="{e.id}" source="{escape_attribute(e.label)}"'
    return document_block(attributes, e.text[:EVIDENCE_CHARS])


def _draft_from_findings(
    brief: ResearchBrief, findings: Sequence[Finding], reason: str
) -> dict[str, Any]:
    sections: dict[str, list[str]] = {}
    for f in findings:
        refs = "".join(f"[{e}]" for e in f.evidence)
        sections.setdefault(f.section, []).append(f"- {f.claim} {refs}")
    return {
        "title": brief.goal,
        "summary": f"No written report: {reason}. The findings as the researchers returned them.",
        "sections": [{"title": t, "text": "\n".join(lines)} for t, lines in sections.items()],
    }


def _draft_without_findings(brief: ResearchBrief) -> dict[str, Any]:
    return {
        "title": brief.goal,
        "summary": "The researchers found no cited evidence in the documents for this request.",
        "sections": [],
    }
