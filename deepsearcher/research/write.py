"""Stage 4, the draft, built in code: the title is the request, the sections are the plan's,
each section's prose is what its researcher's model wrote for it (the deep-search answer to
the section's question, written with the passages first and the task after them), and the
summary is each section's first cited sentence. No LLM call: a small model only ever writes
prose, never a report's structure.

Every sentence then cites the one to three passages that hold it, through the attribution
``query`` answers get (``agents.attribution.Attributor``, the run's embedder and the calibrated
``query.attribution_threshold``): a citation the model wrote stands when its passages hold the
sentence, anything else is attributed, and a sentence no passage holds is marked
``[not in sources]`` instead of cited. A sentence citing more passages than three is
attributed afresh: a citation that points at everything checks nothing."""

from __future__ import annotations

import re
from collections.abc import Sequence

from deepsearcher.agents.attribution import (
    Attributor,
    SentenceSupport,
    holds_claim,
    with_citations,
)
from deepsearcher.agents.citations import sentence_spans
from deepsearcher.research.models import (
    Draft,
    DraftSection,
    Evidence,
    Finding,
    Plan,
    SectionResult,
    Subtask,
)
from deepsearcher.research.state import RunDeps, RunState
from deepsearcher.research.text import (
    EVIDENCE_REF,
    cited_ids,
    claim_of,
    is_question,
    key_terms,
    norm,
    sentences,
)

NOT_IN_SOURCES = "[not in sources]"
MAX_CITED = 3  # passages one sentence may cite
_EMPTY_ITEM = re.compile(r"^[ \t]*(?:[-*•+]|\d{1,3}[.)])?[ \t]*(?:\n|$)", re.MULTILINE)
_DOUBLE_STOP = re.compile(r"(\])\.\.(?!\.)")


async def write_draft(state: RunState, deps: RunDeps, plan: Plan) -> Draft:
    """The draft of every section researched so far, its citations evidence ids."""
    attributor = Attributor(deps.retriever.embedder, deps.settings.query.attribution_threshold)
    sections: list[DraftSection] = []
    for subtask, results in _by_section(plan, state.results):
        evidence = _evidence_of(state, results)
        text = "\n\n".join(_prose(r, evidence) for r in results if r.text or r.findings)
        if not text.strip():
            continue  # nothing researched: the report names the section as missing
        section = await _cited(attributor, subtask, text.strip(), evidence)
        # A figure the calculator derived is in no passage; it cites the passages its
        # numbers come from (the calculator checked that each one appears there).
        derived = [_sentence(f, evidence) for r in results for f in r.findings if f.expression]
        section.text = " ".join([section.text, *derived])
        sections.append(section)
    asked = [q for r in state.results for q in r.open_questions]
    return Draft(
        title=deps.request.request,
        summary=" ".join(s for s in (_first_cited(x) for x in sections) if s),
        sections=sections,
        open_questions=list(dict.fromkeys(asked)),
    )


def _by_section(
    plan: Plan, results: Sequence[SectionResult]
) -> list[tuple[Subtask, list[SectionResult]]]:
    """The plan's sections in order, each with its researcher's result and the gap rounds'
    results that belong to it (the section whose question shares most key terms with the
    gap's; one sharing none stands as a section of its own)."""
    planned: dict[int, tuple[Subtask, list[SectionResult]]] = {
        id(s): (s, []) for s in plan.sections
    }
    extra: list[tuple[Subtask, list[SectionResult]]] = []
    for result in results:
        if id(result.subtask) in planned:
            planned[id(result.subtask)][1].append(result)
            continue
        home = _closest(result.subtask, plan.sections)
        if home is None:
            extra.append((result.subtask, [result]))
        else:
            planned[id(home)][1].append(result)
    return [*planned.values(), *extra]


def _closest(gap: Subtask, sections: Sequence[Subtask]) -> Subtask | None:
    asked = set(key_terms(gap.question))
    scored = [(len(asked & set(key_terms(f"{s.title} {s.question}"))), s) for s in sections]
    best = max(scored, key=lambda t: t[0], default=(0, None))
    return best[1] if best[0] else None


def _evidence_of(state: RunState, results: Sequence[SectionResult]) -> list[Evidence]:
    """The run's evidence the section's researchers brought, each once."""
    ids = {state.evidence[e.id].id: state.evidence[e.id] for r in results for e in r.evidence}
    return list(ids.values())


def _prose(result: SectionResult, evidence: Sequence[Evidence]) -> str:
    """A researcher's prose, and its findings the prose does not state (the tool loop's,
    the calculator's) as sentences of their own."""
    said = norm(EVIDENCE_REF.sub(" ", result.text))
    extra = [
        _sentence(f, evidence)
        for f in result.findings
        if not f.expression and norm(f.claim) not in said
    ]
    return " ".join([result.text, *extra]).strip()


def _sentence(finding: Finding, evidence: Sequence[Evidence]) -> str:
    known = {e.id for e in evidence}
    refs = "".join(f"[{e}]" for e in finding.evidence if e in known)
    return f"{finding.claim.rstrip('.')} {refs}."


async def _cited(
    attributor: Attributor, subtask: Subtask, text: str, evidence: Sequence[Evidence]
) -> DraftSection:
    ids = [e.id for e in evidence]
    text = _without_fragments(text)

    def cited(sentence: str) -> list[int]:
        written = [ids.index(i) + 1 for i in cited_ids(sentence) if i in ids]
        return written if len(written) <= MAX_CITED else []  # a blanket list: attribute afresh

    supports = await attributor.support(
        text,
        [e.text for e in evidence],
        cited=cited,
        citation=EVIDENCE_REF,
        question=subtask.question,
    )
    passages = [e.text for e in evidence]
    marked = [_narrowed(s, text, passages) for s in supports]
    unsupported = [
        claim_of(text[s.start : s.end], EVIDENCE_REF) for s in supports if not s.supported
    ]

    def marker(n: int) -> str:
        return NOT_IN_SOURCES if n == 0 else f"[{ids[n - 1]}]"

    cited_text = with_citations(text, marked, marker=marker, citation=EVIDENCE_REF)
    # "Co., Ltd. [1]." leaves "Ltd [1].." once the citation moved inside the sentence.
    cited_text = _DOUBLE_STOP.sub(r"\1.", cited_text)
    return DraftSection(subtask.title, subtask.question, cited_text, unsupported, ids)


def _without_fragments(text: str) -> str:
    """``text`` without the citations standing in for text: a heading word or two followed
    by citations ("Actions [3][4]"), which cites passages for nothing a reader can check."""
    kept, pos = [], 0
    for a, b in sentence_spans(text):
        piece = text[a:b]
        claim = claim_of(piece, EVIDENCE_REF).strip(" .:-")
        if EVIDENCE_REF.search(piece) and len(claim.split()) <= 2 and len(key_terms(claim)) < 2:
            kept.append(text[pos:a].rstrip(" "))
            pos = b
    kept.append(text[pos:])
    return _EMPTY_ITEM.sub("", "".join(kept)).strip()


def _narrowed(s: SentenceSupport, text: str, passages: Sequence[str]) -> SentenceSupport:
    """The sentence's support as the report cites it. Written citations of several passages
    keep those that hold the sentence on their own, when one does (a sentence that joins two
    passages' facts keeps both); a sentence none holds loses what it cited and carries the
    mark instead ("attributed" to passage 0, which the marker writes as the mark)."""
    if not s.supported:
        return SentenceSupport(s.start, s.end, s.written, (0,), True, False)
    if s.attributed or len(s.cited) < 2:
        return s
    claim = claim_of(text[s.start : s.end], EVIDENCE_REF)
    holding = tuple(n for n in s.cited if holds_claim(claim, passages[n - 1]))
    if not holding or holding == s.cited:
        return s
    return SentenceSupport(s.start, s.end, s.written, holding, True, True)


def _first_cited(section: DraftSection) -> str:
    """The section's first cited statement: not a question, not a line that opens a list."""
    for sentence in sentences(section.text):
        claim = claim_of(sentence, EVIDENCE_REF)
        if cited_ids(sentence) and not is_question(claim) and not claim.endswith(":"):
            return sentence
    return ""
