"""Stage 6, the report from the last draft: evidence ids become numbered sources ([1], [2]...)
in order of first citation (an id no researcher returned is dropped and counted), the
researchers' hypotheses with the passages for and against them, every section that failed or
cites nothing named as missing, and every stage that fell back (a brief or plan the model did
not write in its format, a section whose answer failed) named as degraded."""

from __future__ import annotations

import re
import time

from deepsearcher.research.models import (
    Draft,
    Evidence,
    Plan,
    Quality,
    Report,
    ReportSection,
    ResearchBrief,
    Source,
)
from deepsearcher.research.state import RunDeps, RunState, note
from deepsearcher.research.text import EVIDENCE_ID, EVIDENCE_REF
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
    r.sections = [
        ReportSection(s.title, sources.cite(s.text), list(s.unsupported)) for s in draft.sections
    ]
    r.summary = sources.cite(draft.summary)
    r.open_questions = [
        *draft.open_questions,
        *(f"not answered by the documents found: {q}" for q in quality.missing_questions),
    ]
    for c in quality.contradictions:  # both sides of a conflict are listed as sources
        for eid in (*c.evidence_a, *c.evidence_b):
            if eid in sources.by_id:
                sources.number(eid)
    for h in state.hypotheses:  # the researchers' tested hypotheses, their passages too
        for eid in (*h.evidence, *h.against):
            sources.number(eid)
    r.hypotheses = list(state.hypotheses)
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
    # The passages the report refers to; what the researchers read and nothing cites stays
    # out, as it is out of the sources.
    referred = {*sources.numbers, *(e for f in state.findings for e in f.evidence)}
    r.evidence = [e for e in state.evidence.values() if e.id in referred]
    r.findings = list(state.findings)
    r.missing, r.degraded = _missing_and_degraded(state, draft, brief, plan)
    r.cut_short = state.ctx.cut_short
    r.usage = Usage(**state.ctx.usage.to_dict())
    r.notes = list(state.ctx.notes)
    r.seconds = time.perf_counter() - started
    return r


def _missing_and_degraded(
    state: RunState, draft: Draft, brief: ResearchBrief, plan: Plan
) -> tuple[list[str], list[str]]:
    results = state.results
    missing = [f"section '{res.subtask.title}': {res.error}" for res in results if res.error]
    # A planned section that ran but cites nothing is missing too, whatever the check made
    # of its words.
    cited = {s.title for s in draft.sections if EVIDENCE_REF.search(s.text)}
    missing += [
        f"section '{res.subtask.title}': no cited evidence found"
        for res in results
        if not res.error and res.subtask in plan.sections and res.subtask.title not in cited
    ]
    # What the model did not follow, so a reader knows what the report is.
    degraded = [
        f"{what}: {why}" for what, why in (("brief", brief.note), ("plan", plan.note)) if why
    ]
    degraded += [
        f"section '{res.subtask.title}': {res.degraded}" for res in results if res.degraded
    ]
    return missing, degraded
