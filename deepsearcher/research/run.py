"""A research run: brief -> plan -> researchers (concurrent, one shared budget) -> draft ->
quality check -> gap-filling rounds and revision -> ``Report``.

Every stage is one parsed LLM call through ``agents.base.ask`` and degrades visibly: a failed
brief uses the request as its goal, an unusable plan becomes a one-section plan, a researcher
that fails leaves its section named as missing, a spent budget writes the report from what was
found and marks it cut short, a failed draft lists the findings as the researchers returned
them. Each researcher (``researcher.Researcher``) runs the deep-search loop on its subtask,
then a bounded tool loop and its hypotheses, and hands back findings (claim + evidence ids)."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from deepsearcher.agents.base import ask, escape_attribute, escape_document, messages_for
from deepsearcher.agents.citations import is_supported
from deepsearcher.agents.prompts import DOCUMENT
from deepsearcher.config import Settings
from deepsearcher.errors import BudgetExceeded, DeepSearcherError, LLMError
from deepsearcher.llm import ChatModel
from deepsearcher.research import prompts
from deepsearcher.research.budget import MIN_RESEARCHER_CALLS, WRITE_RESERVE_CALLS, CallGate
from deepsearcher.research.contradictions import (
    conflicts_text,
    find_contradictions,
    gap_query,
    merge_contradictions,
    parse_contradictions,
)
from deepsearcher.research.events import (
    BriefEvent,
    HypothesisEvent,
    PlanEvent,
    QualityEvent,
    ResearchDoneEvent,
    ResearcherFinishedEvent,
    ResearcherStartedEvent,
    ResearchEvent,
    ResearchNoteEvent,
    RevisionEvent,
)
from deepsearcher.research.models import (
    Contradiction,
    Evidence,
    Finding,
    Hypothesis,
    Plan,
    Quality,
    Report,
    ReportSection,
    ResearchBrief,
    ResearchRequest,
    SectionResult,
    Source,
    Subtask,
)
from deepsearcher.research.parsing import (
    parse_brief,
    parse_check,
    parse_draft,
    parse_hypotheses,
    parse_plan,
)
from deepsearcher.research.researcher import Researcher, ResearcherDeps
from deepsearcher.research.text import claim_of as _claim
from deepsearcher.research.text import norm as _norm
from deepsearcher.research.text import sentences as _sentences
from deepsearcher.research.text import terms_share as _terms_share
from deepsearcher.retrieval import Retriever
from deepsearcher.run_context import RunContext
from deepsearcher.tools.web import WebSearchTool
from deepsearcher.types import Usage

logger = logging.getLogger(__name__)

MAX_EVIDENCE_IN_PROMPT = 40
EVIDENCE_CHARS = 600
_EVIDENCE_REF = re.compile(r"\[\s*(E\d+(?:\s*[,;]\s*E\d+)*)\s*\]")
_EVIDENCE_ID = re.compile(r"E\d+")


class Components(Protocol):
    """What a run needs from the ``DeepSearcher`` facade (duck-typed: research sits below it)."""

    settings: Settings

    @property
    def llm(self) -> ChatModel | None: ...

    @property
    def retriever(self) -> Retriever: ...


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


@dataclass
class _Run:
    settings: Settings
    llm: ChatModel
    retriever: Retriever
    request: ResearchRequest
    emit: Callable[[ResearchEvent], None]
    web: WebSearchTool | None = None
    ctx: RunContext = field(init=False)
    limits: Limits = field(init=False)
    report: Report = field(init=False)
    evidence: dict[str, Evidence] = field(default_factory=dict)  # passage key -> E id'd
    findings: list[Finding] = field(default_factory=list)
    hypotheses: list[Hypothesis] = field(default_factory=list)  # the researchers', merged
    results: list[SectionResult] = field(default_factory=list)
    researchers_in_flight: int = 0
    contradictions: list[Contradiction] = field(default_factory=list)  # told to the writer
    researched_conflicts: set[frozenset[str]] = field(default_factory=set)
    conflicts_in_draft: int = 0
    max_researchers_in_flight: int = 0
    gate: CallGate = field(default_factory=CallGate)  # the researchers' calls, for one alone

    def __post_init__(self) -> None:
        self.ctx = budget_for(self.settings, self.request)
        self.limits = limits_for(self.settings, self.request)
        self.ctx.llm = self.llm
        self.report = Report(request=self.request.request)

    def spent(self, exc: Exception) -> None:
        """A stage refused by the run's budget: the report says it was cut short."""
        if isinstance(exc, BudgetExceeded):
            self.ctx.cut_short = self.ctx.cut_short or exc.message

    def note(self, message: str) -> None:
        self.ctx.note(message)
        self.emit(ResearchNoteEvent(message=message))

    async def execute(self) -> Report:
        started = time.perf_counter()
        brief = await self.make_brief()
        plan = await self.make_plan(brief)
        await self.research(plan.sections)
        draft = await self.write(brief)
        quality = self.check_structure(draft, brief)
        quality = await self.check(draft, brief, quality)
        self.emit(QualityEvent(quality=quality, round=0))
        rounds = 0
        while rounds < self.limits.max_revisions:
            gaps = self.gaps_of(quality)
            if not gaps:
                break
            try:
                self.ctx.check_budget(WRITE_RESERVE_CALLS + MIN_RESEARCHER_CALLS)
            except BudgetExceeded as exc:
                self.spent(exc)
                self.note(f"no revision: {exc.message}")
                break
            rounds += 1
            self.emit(RevisionEvent(round=rounds, gaps=list(gaps)))
            before = len(self.findings)
            await self.research([Subtask(f"Gap: {g}", g) for g in gaps[: self.limits.max_sections]])
            untold = len(self.contradictions) > self.conflicts_in_draft
            if len(self.findings) == before and not untold:
                self.note("gap research found nothing new; keeping the draft")
                break
            draft = await self.write(brief)
            quality = await self.check(draft, brief, self.check_structure(draft, brief))
            self.emit(QualityEvent(quality=quality, round=rounds))
        self.finish(draft, quality, rounds, brief, plan, started)
        self.add_hypotheses()
        self.emit(ResearchDoneEvent(report=self.report))
        return self.report

    def gaps_of(self, quality: Quality) -> list[str]:
        """What a revision researches: the check's gaps (or the questions it found
        unanswered) while the draft fails, and each contradiction not yet researched."""
        gaps = [] if quality.passed else list(quality.gaps or quality.missing_questions)
        for c in quality.contradictions:
            key = frozenset((*c.evidence_a, *c.evidence_b))
            if key not in self.researched_conflicts:
                self.researched_conflicts.add(key)
                gaps.append(gap_query(c))
        self.contradictions = list(quality.contradictions)
        return gaps

    # -- 1. brief ------------------------------------------------------------------------

    async def make_brief(self) -> ResearchBrief:
        request = self.request.request
        answered = self.request.clarification  # asked in an earlier turn (a chat, an API call)
        text = request
        if answered is not None:
            text = f"{request}\n(Asked: {answered[0]} The user answered: {answered[1]})"
        try:
            brief = await ask(
                self.ctx,
                messages_for(prompts.BRIEF.format(request=escape_document(text))),
                partial(parse_brief, request=request),
            )
        except (LLMError, BudgetExceeded) as exc:
            self.spent(exc)
            self.note(f"brief failed ({exc.message}); researching the request as asked")
            brief = ResearchBrief(goal=request, must_answer=[request])
        if answered is not None:
            brief.question = ""  # one question per run, and it was answered
            brief.assumptions.insert(0, f"clarified: {answered[0]} -> {answered[1]}")
        if brief.question:
            brief = await self.clarified(brief)
        if not brief.must_answer:
            brief.must_answer = [request]
        self.emit(BriefEvent(brief=brief))
        return brief

    async def clarified(self, brief: ResearchBrief) -> ResearchBrief:
        """The brief after the user answered its clarifying question (one more call); without
        a way to ask, or no reply, the brief as it was, saying what it did not ask."""
        question, request = brief.question, self.request.request
        reply = await self.request.clarify(question) if self.request.clarify else None
        if not reply:
            asked = "no reply" if self.request.clarify else "not asked (non-interactive)"
            brief.assumptions.append(f"{asked}: {question}")
            return brief
        clarified = f"{request}\n(Asked: {question} The user answered: {reply})"
        try:
            new = await ask(
                self.ctx,
                messages_for(prompts.BRIEF.format(request=escape_document(clarified))),
                partial(parse_brief, request=request),
            )
        except (LLMError, BudgetExceeded) as exc:
            self.note(f"brief after clarification failed ({exc.message}); keeping the first")
            brief.assumptions.append(f"clarified: {question} -> {reply}")
            return brief
        new.question = ""  # one question per run: the answer is in the brief now
        new.assumptions.insert(0, f"clarified: {question} -> {reply}")
        return new

    # -- 2. plan -------------------------------------------------------------------------

    async def make_plan(self, brief: ResearchBrief) -> Plan:
        max_sections = self.limits.max_sections
        try:
            sections = await ask(
                self.ctx,
                messages_for(
                    prompts.PLAN.format(max_sections=max_sections, brief=_brief_text(brief))
                ),
                partial(parse_plan, max_sections=max_sections),
            )
            plan = Plan(sections)
        except (LLMError, BudgetExceeded) as exc:
            self.spent(exc)
            message = f"plan failed ({exc.message}); researching one section"
            self.note(message)
            plan = Plan([Subtask(brief.goal, self.request.request, 2)], note=message)
        self.report.plan = plan
        self.emit(PlanEvent(plan=plan))
        return plan

    # -- 3. researchers, concurrently, each with its share of the one budget ---------------

    def shares(self, subtasks: Sequence[Subtask]) -> list[int]:
        left = self.ctx.max_llm_calls - self.ctx.usage.llm_calls - WRITE_RESERVE_CALLS
        total = sum(s.complexity for s in subtasks) or 1
        cap = self.settings.query.max_llm_calls  # no researcher spends more than a question
        return [min(cap, max(0, left) * s.complexity // total) for s in subtasks]

    async def research(self, subtasks: Sequence[Subtask]) -> None:
        gate = asyncio.Semaphore(self.limits.max_concurrency)

        async def one(subtask: Subtask, budget: int) -> SectionResult:
            if budget < MIN_RESEARCHER_CALLS:
                reason = f"budget spent before it was researched ({budget} call(s) left)"
                self.ctx.cut_short = self.ctx.cut_short or "research LLM-call budget spent"
                result = SectionResult(subtask, budget=budget, error=reason)
            else:
                async with gate:
                    result = await self.researcher(subtask, budget)
            self.emit(
                ResearcherFinishedEvent(
                    section=subtask.title,
                    findings=len(result.findings),
                    calls=result.calls,
                    error=result.error,
                    cut_short=result.cut_short,
                )
            )
            return result

        results = await asyncio.gather(
            *(one(s, b) for s, b in zip(subtasks, self.shares(subtasks), strict=True))
        )
        for result in results:  # merged in plan order: evidence ids do not depend on timing
            self.merge(result)

    async def researcher(self, subtask: Subtask, budget: int) -> SectionResult:
        self.emit(ResearcherStartedEvent(section=subtask.title, budget=budget))
        self.researchers_in_flight += 1
        self.max_researchers_in_flight = max(
            self.max_researchers_in_flight, self.researchers_in_flight
        )
        try:
            return await self._researcher(subtask, budget)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one section's failure must not lose the others
            if not isinstance(exc, DeepSearcherError):
                logger.exception("researcher for %r failed", subtask.title)
            message = exc.message if isinstance(exc, DeepSearcherError) else repr(exc)
            return SectionResult(subtask, budget=budget, error=f"researcher failed: {message}")
        finally:
            self.researchers_in_flight -= 1

    async def _researcher(self, subtask: Subtask, budget: int) -> SectionResult:
        tools = ResearcherDeps(
            self.settings,
            self.llm,
            self.retriever,
            self.request,
            self.ctx,
            self.emit,
            self.web,
            max_tool_steps=self.limits.max_tool_steps,
            max_hypotheses=self.limits.max_hypotheses,
            gate=self.gate,
        )
        return await Researcher(tools, subtask, budget).research()

    def merge(self, result: SectionResult) -> None:
        """Global evidence ids (E1...) for the result's passages, its findings de-duplicated
        against every earlier researcher's."""
        self.results.append(result)
        local: dict[str, str] = {}
        for ev in result.evidence:
            if ev.id not in self.evidence:
                ev_global = Evidence(**{**ev.__dict__, "id": f"E{len(self.evidence) + 1}"})
                self.evidence[ev.id] = ev_global
            local[ev.id] = self.evidence[ev.id].id
        seen = {_norm(f.claim): f for f in self.findings}
        for finding in result.findings:
            ids = [local[k] for k in finding.evidence if k in local]
            if (same := seen.get(_norm(finding.claim))) is not None:
                same.evidence += [i for i in ids if i not in same.evidence]
                continue
            merged = Finding(finding.claim, ids, finding.section, finding.expression)
            self.findings.append(merged)
            seen[_norm(merged.claim)] = merged
        known = {_norm(h.statement) for h in self.hypotheses}
        for h in result.hypotheses:
            if _norm(h.statement) not in known:
                known.add(_norm(h.statement))
                ids = [local[k] for k in h.evidence if k in local]
                self.hypotheses.append(Hypothesis(h.statement, h.status if ids else "open", ids))

    def add_hypotheses(self) -> None:
        """The researchers' tested hypotheses in the report, also those the draft left out,
        their evidence among the sources (numbered after the draft's citations)."""
        r = self.report
        listed = {_norm(h.statement) for h in r.hypotheses}
        by_id = {e.id: e for e in self.evidence.values()}
        numbered = {s.evidence_id for s in r.sources}
        for h in self.hypotheses:
            if _norm(h.statement) in listed:
                continue
            r.hypotheses.append(h)
            for eid in h.evidence:
                if eid in numbered:
                    continue
                numbered.add(eid)
                r.sources.append(Source(len(r.sources) + 1, by_id[eid]))

    # -- 4. draft ------------------------------------------------------------------------

    async def write(self, brief: ResearchBrief) -> dict[str, Any]:
        """The draft as parsed JSON (citations still evidence ids)."""
        if not self.findings:
            return _draft_without_findings(brief)
        evidence = list(self.evidence.values())[:MAX_EVIDENCE_IN_PROMPT]
        prompt = prompts.WRITE.format(
            brief=_brief_text(brief),
            findings=self.findings_for_writer(),
            evidence="\n\n".join(_render_evidence(e) for e in evidence),
        )
        try:
            # Not budgeted: the researchers left this call its reserve.
            draft = await ask(self.ctx, messages_for(prompt), parse_draft, budgeted=False)
        except (LLMError, BudgetExceeded) as exc:
            self.note(f"draft failed ({exc.message}); listing the findings as found")
            return _draft_from_findings(brief, self.findings, exc.message)
        known = {e.id for e in self.evidence.values()}
        texts = [str(draft.get("summary") or ""), *(s.text for s in _draft_sections(draft))]
        if not any(_cited_ids(sentence) & known for t in texts for sentence in _sentences(t)):
            # A draft that cites none of the evidence would hide every finding behind prose
            # the check can only fail.
            reason = "the draft cited none of the evidence"
            self.note(f"{reason}; listing the findings as found")
            return _draft_from_findings(brief, self.findings, reason)
        return draft

    def findings_for_writer(self) -> str:
        self.conflicts_in_draft = len(self.contradictions)
        text = _findings_text(self.findings) + _hypotheses_text(self.hypotheses)
        if self.contradictions:  # the writer says the sources disagree, not which one to trust
            text += "\n" + conflicts_text(self.contradictions)
        return text

    # -- 5. quality check ----------------------------------------------------------------

    def check_structure(self, draft: dict[str, Any], brief: ResearchBrief) -> Quality:
        """The cheap checks: sentences without a citation, citations whose passages do not
        contain the sentence's key terms, and figures or dates the sources disagree on."""
        quality = Quality()
        quality.contradictions = find_contradictions(self.findings, list(self.evidence.values()))
        for section in _draft_sections(draft):
            for sentence in _sentences(section.text):
                ids = _cited_ids(sentence)
                claim = _claim(sentence, _EVIDENCE_REF)
                if len(claim.split()) < 5:
                    continue  # headings and fragments
                if not ids:
                    quality.uncited_sentences.append(claim)
                    continue
                passages = " ".join(e.text for e in self.evidence.values() if e.id in ids)
                if not is_supported(claim, passages):
                    quality.weak_citations.append(claim)
        return quality

    async def check(self, draft: dict[str, Any], brief: ResearchBrief, quality: Quality) -> Quality:
        questions = brief.must_answer
        text = " ".join(s.text for s in _draft_sections(draft)) + " " + str(draft.get("summary"))
        covered: list[bool] | None = None
        if self.findings:
            try:
                reply = await ask(
                    self.ctx,
                    messages_for(
                        prompts.CHECK.format(
                            questions="\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1)),
                            findings=_findings_text(self.findings)[:6000],
                            draft=escape_document(text[:8000]),
                        )
                    ),
                    partial(parse_check, questions=len(questions)),
                )
                covered, quality.gaps, quality.llm_score = reply.covered, reply.gaps, reply.score
                known = [e.id for e in self.evidence.values()]
                said = parse_contradictions(reply.contradictions, self.findings, known)
                quality.contradictions = merge_contradictions(quality.contradictions, said)
            except (LLMError, BudgetExceeded) as exc:
                self.note(f"quality check failed ({exc.message}); using the structural check")
        if covered is None:  # the structural stand-in: most of a question's terms appear
            lower = text.lower()
            covered = [_terms_share(q, lower) >= 0.5 for q in questions]
        quality.missing_questions = [q for q, c in zip(questions, covered, strict=True) if not c]
        quality.coverage = sum(covered) / len(covered) if covered else 1.0
        quality.passed = (
            not quality.missing_questions
            and not quality.weak_citations
            and not quality.uncited_sentences
        )
        return quality

    # -- 6. the report -------------------------------------------------------------------

    def finish(
        self,
        draft: dict[str, Any],
        quality: Quality,
        rounds: int,
        brief: ResearchBrief,
        plan: Plan,
        started: float,
    ) -> None:
        r = self.report
        numbers: dict[str, int] = {}
        by_id = {e.id: e for e in self.evidence.values()}
        dropped = 0

        def cite(text: str) -> str:
            nonlocal dropped

            def one(m: re.Match[str]) -> str:
                nonlocal dropped
                refs = []
                for eid in _EVIDENCE_ID.findall(m.group(1)):
                    if eid not in by_id:
                        dropped += 1
                        continue
                    numbers.setdefault(eid, len(numbers) + 1)
                    refs.append(f"[{numbers[eid]}]")
                return "".join(refs)

            return _EVIDENCE_REF.sub(one, text)

        r.title = str(draft.get("title") or brief.goal)
        r.summary = cite(str(draft.get("summary") or ""))
        r.sections = [ReportSection(s.title, cite(s.text)) for s in _draft_sections(draft)]
        r.open_questions = [
            *(_texts_of(draft.get("open_questions"))),
            *(f"not answered by the documents found: {q}" for q in quality.missing_questions),
        ]
        for h in parse_hypotheses(draft.get("hypotheses")):
            known = [e for e in h.evidence if e in by_id]
            if h.status != "open" and not known:
                self.note(f"hypothesis marked {h.status} without evidence; kept as open")
                h = Hypothesis(h.statement, "open", [])
            for eid in known:
                numbers.setdefault(eid, len(numbers) + 1)
            r.hypotheses.append(Hypothesis(h.statement, h.status, known))
            self.emit(HypothesisEvent(hypothesis=r.hypotheses[-1]))
        for c in quality.contradictions:  # both sides of a conflict are listed as sources
            for eid in (*c.evidence_a, *c.evidence_b):
                if eid in by_id:
                    numbers.setdefault(eid, len(numbers) + 1)
        if dropped:
            self.note(f"removed {dropped} citation(s) of evidence ids no researcher returned")
        r.sources = [
            Source(n, by_id[eid]) for eid, n in sorted(numbers.items(), key=lambda kv: kv[1])
        ]
        r.brief, r.plan, r.quality, r.revisions = brief, plan, quality, rounds
        r.evidence = list(self.evidence.values())
        r.findings = list(self.findings)
        r.missing = [
            f"section '{res.subtask.title}': {res.error}" for res in self.results if res.error
        ]
        # A planned section that ran but found nothing it could cite is missing too, whatever
        # the check said about coverage (a weak model's check calls every question covered).
        r.missing += [
            f"section '{res.subtask.title}': no cited evidence found"
            for res in self.results
            if not res.error and not res.findings and res.subtask in plan.sections
        ]
        r.degraded = [
            f"section '{res.subtask.title}': {res.degraded}" for res in self.results if res.degraded
        ]
        r.cut_short = self.ctx.cut_short
        r.usage = Usage(**self.ctx.usage.to_dict())
        r.notes = list(self.ctx.notes)
        r.seconds = time.perf_counter() - started


# -- helpers -------------------------------------------------------------------------------


def _cited_ids(sentence: str) -> set[str]:
    return {i for m in _EVIDENCE_REF.findall(sentence) for i in _EVIDENCE_ID.findall(m)}


def _texts_of(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [" ".join(v.split()) for v in value if isinstance(v, str) and v.strip()]


def _draft_sections(draft: dict[str, Any]) -> list[ReportSection]:
    out = []
    for s in draft.get("sections") or []:
        if isinstance(s, dict) and isinstance(s.get("text"), str) and s["text"].strip():
            out.append(ReportSection(str(s.get("title") or "Findings"), s["text"].strip()))
    return out


def _brief_text(brief: ResearchBrief) -> str:
    lines = [f"Goal: {brief.goal}"]
    if brief.scope:
        lines.append(f"Scope: {brief.scope}")
    if brief.audience:
        lines.append(f"Audience: {brief.audience}")
    lines += [f"Must answer: {q}" for q in brief.must_answer]
    lines += [f"Constraint: {c}" for c in brief.constraints]
    lines += [f"Assumption: {a}" for a in brief.assumptions]
    return escape_document("\n".join(lines))


def _findings_text(findings: Sequence[Finding]) -> str:
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
    return DOCUMENT.format(attributes=attributes, text=escape_document(e.text[:EVIDENCE_CHARS]))


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


# -- entry points --------------------------------------------------------------------------


async def stream_research(
    settings: Settings,
    llm: ChatModel,
    retriever: Retriever,
    request: ResearchRequest,
    *,
    web: WebSearchTool | None = None,
) -> AsyncIterator[ResearchEvent]:
    """Yield the run's events as they happen (researchers run concurrently); the last is a
    ``ResearchDoneEvent`` carrying the ``Report``."""
    queue: asyncio.Queue[ResearchEvent | BaseException] = asyncio.Queue()
    run = _Run(settings, llm, retriever, request, queue.put_nowait, web)

    async def main() -> None:
        try:
            await run.execute()
        except BaseException as exc:
            queue.put_nowait(exc)
            raise

    task = asyncio.ensure_future(main())
    try:
        while True:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            yield item
            if item.type == "done":
                return
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def run_research(
    searcher: Components,
    request: ResearchRequest | str,
    *,
    on_event: Callable[[ResearchEvent], None] | None = None,
    web: WebSearchTool | None = None,
) -> Report:
    """A research ``Report`` from a ``DeepSearcher`` (or anything with its ``settings``,
    ``llm`` and ``retriever``)."""
    req = ResearchRequest(request) if isinstance(request, str) else request
    llm = searcher.llm
    if llm is None:
        raise LLMError(
            "research needs an LLM: none is configured",
            "set llm.base_url and llm.model in config.yaml",
        )
    retriever = await asyncio.to_thread(lambda: searcher.retriever)
    report: Report | None = None
    async for event in stream_research(searcher.settings, llm, retriever, req, web=web):
        if on_event is not None:
            on_event(event)
        if event.type == "done":
            report = event.report
    assert report is not None
    return report
