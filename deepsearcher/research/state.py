"""What the stages of a research run share: the components and event channel a run is given
(``RunDeps``), the state the stages build up (``RunState``), and the run's limits and budget."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from deepsearcher.config import Settings
from deepsearcher.errors import BudgetExceeded
from deepsearcher.llm import ChatModel
from deepsearcher.research.budget import CallGate
from deepsearcher.research.events import ResearchEvent, ResearchNoteEvent
from deepsearcher.research.models import (
    Evidence,
    Finding,
    Gathered,
    Hypothesis,
    ResearchRequest,
    SectionResult,
)
from deepsearcher.research.text import CITATION, norm
from deepsearcher.retrieval import Retriever
from deepsearcher.run_context import RunContext
from deepsearcher.tools.web import WebSearchTool


@dataclass(frozen=True)
class Limits:
    """A request's limits with the ``research.*`` settings filled in where it gave none."""

    max_sections: int
    max_revisions: int
    max_concurrency: int
    max_tool_steps: int
    max_hypotheses: int


def limits_for(settings: Settings, request: ResearchRequest) -> Limits:
    r = settings.research

    def given(value: int | None, default: int) -> int:
        return default if value is None else value

    return Limits(
        max_sections=max(1, given(request.max_sections, r.max_sections)),
        max_revisions=max(0, given(request.max_revisions, r.max_revisions)),
        max_concurrency=max(1, given(request.max_concurrency, r.max_concurrency)),
        max_tool_steps=max(0, given(request.max_tool_steps, r.max_tool_steps)),
        max_hypotheses=max(0, given(request.max_hypotheses, r.max_hypotheses)),
    )


def budget_for(settings: Settings, request: ResearchRequest) -> RunContext:
    """The run's one budget: the request's, else ``research.*``'s, else
    ``research.budget_factor`` times one question's (``query.*``)."""
    q, r = settings.query, settings.research
    factor = r.budget_factor
    seconds = request.timeout_s or r.timeout_s or q.timeout_s * factor
    ctx = RunContext.create(settings, None, seconds, request.budget_name or "research time budget")
    ctx.max_llm_calls = request.max_llm_calls or r.max_llm_calls or int(q.max_llm_calls * factor)
    ctx.max_tokens = request.max_tokens or r.max_tokens or int(q.max_tokens * factor)
    return ctx


@dataclass(frozen=True)
class RunDeps:
    """What a run is given: its components, the request and where its events go."""

    settings: Settings
    llm: ChatModel
    retriever: Retriever
    request: ResearchRequest
    emit: Callable[[ResearchEvent], None]
    web: WebSearchTool | None = None


@dataclass
class RunState:
    """What the stages build up: the budget, the evidence (passage key -> E-numbered
    evidence), the merged findings and hypotheses, each researcher's result, and what the
    revision rounds have been told and have researched."""

    ctx: RunContext
    limits: Limits
    evidence: dict[str, Evidence] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    hypotheses: list[Hypothesis] = field(default_factory=list)  # the researchers', merged
    results: list[SectionResult] = field(default_factory=list)
    researched: set[str] = field(default_factory=set)  # the revision rounds' searches
    gate: CallGate = field(default_factory=CallGate)  # the researchers' calls, for one alone

    @classmethod
    def start(cls, deps: RunDeps) -> RunState:
        ctx = budget_for(deps.settings, deps.request)
        ctx.llm = deps.llm
        return cls(ctx, limits_for(deps.settings, deps.request))

    def merge(self, gathered: Gathered) -> None:
        """The researchers' results into the run: global evidence ids (E1...) for their
        passages, in plan order, and their findings and hypotheses de-duplicated against
        every earlier researcher's."""
        for result in gathered.results:
            self._merge_one(result)

    def _merge_one(self, result: SectionResult) -> None:
        self.results.append(result)
        local: dict[str, str] = {}
        for ev in result.evidence:
            if ev.id not in self.evidence:
                ev_global = Evidence(**{**ev.__dict__, "id": f"E{len(self.evidence) + 1}"})
                self.evidence[ev.id] = ev_global
            local[ev.id] = self.evidence[ev.id].id
        # The result speaks the run's ids from here on, like everything the stages read.
        result.text = _with_run_ids(result.text, [local[e.id] for e in result.evidence])
        result.findings = [
            Finding(f.claim, [local[k] for k in f.evidence if k in local], f.section, f.expression)
            for f in result.findings
        ]
        seen = {norm(f.claim): f for f in self.findings}
        for finding in result.findings:
            ids = list(finding.evidence)
            if (same := seen.get(norm(finding.claim))) is not None:
                same.evidence += [i for i in ids if i not in same.evidence]
                continue
            merged = Finding(finding.claim, ids, finding.section, finding.expression)
            self.findings.append(merged)
            seen[norm(merged.claim)] = merged
        known = {norm(h.statement) for h in self.hypotheses}
        for h in result.hypotheses:
            if norm(h.statement) not in known:
                known.add(norm(h.statement))
                ids = [local[k] for k in h.evidence if k in local]
                against = [local[k] for k in h.against if k in local]
                status = h.status if ids or against else "open"
                self.hypotheses.append(Hypothesis(h.statement, status, ids, against))


def _with_run_ids(text: str, ids: list[str]) -> str:
    """A researcher's text whose [n] cite its n-th passage, citing the run's evidence ids."""

    def one(m: re.Match[str]) -> str:
        n = int(m.group(1))
        return f"[{ids[n - 1]}]" if 1 <= n <= len(ids) else ""

    return CITATION.sub(one, text)


def note(state: RunState, deps: RunDeps, message: str) -> None:
    """A note in the report and an event for whoever watches the run."""
    state.ctx.note(message)
    deps.emit(ResearchNoteEvent(message=message))


def spent(state: RunState, exc: Exception) -> None:
    """A stage refused by the run's budget: the report says it was cut short."""
    if isinstance(exc, BudgetExceeded):
        state.ctx.cut_short = state.ctx.cut_short or exc.message
