"""The report from the last draft: evidence ids become numbered sources ([1], [2]...), an id
no researcher returned is dropped and counted, hypotheses keep only evidence that exists, and
every section that failed or found nothing is named as missing."""

from __future__ import annotations

import re
import time

from deepsearcher.research.events import HypothesisEvent
from deepsearcher.research.models import (
    Draft,
    Evidence,
    Hypothesis,
    Plan,
    Quality,
    Report,
    ReportSection,
    ResearchBrief,
    Source,
)
from deepsearcher.research.state import RunDeps, RunState, note
from deepsearcher.research.text import EVIDENCE_ID, EVIDENCE_REF, norm
from deepsearcher.types import Usage


class _Numbering:
    """Source numbers in order of first citation; citations of unknown ids are dropped."""

    def __init__(self, by_id: dict[str, Evidence]) -> None:
        self.by_id = by_id
        self.numbers: dict[str, int] = {}
        self.dropped = 0

    def number(self, eid: str) -> int:
        return self.numbers.setdefault(eid, len(self.numbers) + 1)

    def cite(self, text: str) -> str:
        def one(m: re.Match[str]) -> str:
            refs = []
            for eid in EVIDENCE_ID.findall(m.group(1)):
                if eid not in self.by_id:
                    self.dropped += 1
                    continue
                refs.append(f"[{self.number(eid)}]")
            return "".join(refs)

        return EVIDENCE_REF.sub(one, text)


def finish(
    state: RunState,
    deps: RunDeps,
    draft: Draft,
    quality: Quality,
    rounds: int,
    brief: ResearchBrief,
    plan: Plan,
    started: float,
) -> Report:
    r = Report(request=deps.request.request)
    sources = _Numbering({e.id: e for e in state.evidence.values()})
    r.title = draft.title or brief.goal
    r.summary = sources.cite(draft.summary)
    r.sections = [ReportSection(s.title, sources.cite(s.text)) for s in draft.sections]
    r.open_questions = [
        *draft.open_questions,
        *(f"not answered by the documents found: {q}" for q in quality.missing_questions),
    ]
    _hypotheses_of_draft(state, deps, r, draft, sources)
    for c in quality.contradictions:  # both sides of a conflict are listed as sources
        for eid in (*c.evidence_a, *c.evidence_b):
            if eid in sources.by_id:
                sources.number(eid)
    if sources.dropped:
        note(
            state,
            deps,
            f"removed {sources.dropped} citation(s) of evidence ids no researcher returned",
        )
    r.sources = [
        Source(n, sources.by_id[eid])
        for eid, n in sorted(sources.numbers.items(), key=lambda kv: kv[1])
    ]
    r.brief, r.plan, r.quality, r.revisions = brief, plan, quality, rounds
    r.evidence = list(state.evidence.values())
    r.findings = list(state.findings)
    _missing_and_degraded(state, r, plan)
    _add_hypotheses(state, r)
    r.cut_short = state.ctx.cut_short
    r.usage = Usage(**state.ctx.usage.to_dict())
    r.notes = list(state.ctx.notes)
    r.seconds = time.perf_counter() - started
    return r


def _hypotheses_of_draft(
    state: RunState, deps: RunDeps, r: Report, draft: Draft, sources: _Numbering
) -> None:
    for h in draft.hypotheses:
        known = [e for e in h.evidence if e in sources.by_id]
        if h.status != "open" and not known:
            note(state, deps, f"hypothesis marked {h.status} without evidence; kept as open")
            h = Hypothesis(h.statement, "open", [])
        for eid in known:
            sources.number(eid)
        r.hypotheses.append(Hypothesis(h.statement, h.status, known))
        deps.emit(HypothesisEvent(hypothesis=r.hypotheses[-1]))


def _missing_and_degraded(state: RunState, r: Report, plan: Plan) -> None:
    results = state.results
    r.missing = [f"section '{res.subtask.title}': {res.error}" for res in results if res.error]
    # A planned section that ran but found nothing it could cite is missing too, whatever
    # the check said about coverage (a weak model's check calls every question covered).
    r.missing += [
        f"section '{res.subtask.title}': no cited evidence found"
        for res in results
        if not res.error and not res.findings and res.subtask in plan.sections
    ]
    r.degraded = [
        f"section '{res.subtask.title}': {res.degraded}" for res in results if res.degraded
    ]


def _add_hypotheses(state: RunState, r: Report) -> None:
    """The researchers' tested hypotheses in the report, also those the draft left out,
    their evidence among the sources (numbered after the draft's citations)."""
    listed = {norm(h.statement) for h in r.hypotheses}
    by_id = {e.id: e for e in state.evidence.values()}
    numbered = {s.evidence_id for s in r.sources}
    for h in state.hypotheses:
        if norm(h.statement) in listed:
            continue
        r.hypotheses.append(h)
        for eid in h.evidence:
            if eid in numbered:
                continue
            numbered.add(eid)
            r.sources.append(Source(len(r.sources) + 1, by_id[eid]))
