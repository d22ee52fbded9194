"""The run's typed pieces as the stages' prompts show them (escaped): the brief, the findings
by section, the hypotheses tested, an evidence passage. Shared here so no stage imports
another stage."""

from __future__ import annotations

from collections.abc import Sequence

from deepsearcher.prompting import document_block, escape_attribute, escape_document
from deepsearcher.research.models import Evidence, Finding, Hypothesis, ResearchBrief

EVIDENCE_CHARS = 600


def brief_text(brief: ResearchBrief) -> str:
    """The brief as the later stages' prompts show it (escaped)."""
    lines = [f"Goal: {brief.goal}"]
    if brief.scope:
        lines.append(f"Scope: {brief.scope}")
    if brief.audience:
        lines.append(f"Audience: {brief.audience}")
    lines += [f"Must answer: {q}" for q in brief.must_answer]
    lines += [f"Constraint: {c}" for c in brief.constraints]
    lines += [f"Assumption: {a}" for a in brief.assumptions]
    return escape_document("\n".join(lines))


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


def hypotheses_text(hypotheses: Sequence[Hypothesis]) -> str:
    if not hypotheses:
        return ""
    lines = ["", "## Hypotheses the researchers tested"]
    for h in hypotheses:
        refs = "".join(f"[{e}]" for e in h.evidence)
        lines.append(f"- {escape_document(h.statement)}: {h.status} {refs}".rstrip())
    return "\n".join(lines)


def evidence_block(e: Evidence, chars: int = EVIDENCE_CHARS) -> str:
    """A passage in its ``<document>`` tag, with its evidence id and source label."""
    attributes = f'id="{e.id}" source="{escape_attribute(e.label)}"'
    return document_block(attributes, e.text[:chars])
