"""The typed pieces of a research run: the request, the brief, the plan, the evidence and
findings researchers hand back, hypotheses, the quality check and the final ``Report``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from deepsearcher.config import ResearchSettings
from deepsearcher.options import check_as_settings
from deepsearcher.types import Located, Usage

HypothesisStatus = Literal["supported", "refuted", "open"]
HYPOTHESIS_STATUSES: tuple[HypothesisStatus, ...] = ("supported", "refuted", "open")


# The request's limits, each named as the research.* setting it overrides.
_LIMITS = (
    "max_sections",
    "max_revisions",
    "max_concurrency",
    "max_llm_calls",
    "max_tokens",
    "timeout_s",
    "max_tool_steps",
    "max_hypotheses",
)


@dataclass(frozen=True)
class ResearchRequest:
    """One research run. A ``None`` limit is the ``research.*`` setting's (``state.limits_for``);
    the budget is ``research.budget_factor`` times one question's unless given."""

    request: str
    collections: Sequence[str] | None = None
    max_sections: int | None = None
    max_revisions: int | None = None
    max_concurrency: int | None = None  # researchers in flight at once
    max_llm_calls: int | None = None  # the whole run's budget, shared by every stage
    max_tokens: int | None = None
    timeout_s: float | None = None
    budget_name: str | None = None  # names the time limit in a cut-short report
    figures: bool = False  # researchers get the calculator for figures in their evidence
    web: bool | None = None  # researchers may search the web too (None: web_search.enabled)
    max_tool_steps: int | None = None  # replies of each researcher's tool loop (0: none)
    max_hypotheses: int | None = None  # hypotheses each researcher tests for and against
    # Asks the user the brief's clarifying question (an interactive CLI); returns the reply,
    # or None to go on with the assumption. Without it the brief records what it assumed.
    clarify: Callable[[str], Awaitable[str | None]] | None = None
    # (question, answer) of a clarification asked before this run (the server's chat model
    # asks in one turn and continues in the next): the brief is written with it, not asked.
    clarification: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        # Each limit is checked against the research.* setting it overrides, so a 0 or a
        # negative is an error here rather than silently clamped or the default.
        check_as_settings(ResearchSettings, "research", {n: getattr(self, n) for n in _LIMITS})


@dataclass
class ResearchBrief:
    goal: str
    scope: str = ""
    audience: str = ""
    must_answer: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    question: str = ""  # the clarifying question the model would ask, if any
    note: str | None = None  # set when the brief is a fallback


@dataclass
class Subtask:
    """One section of the plan, handed to one researcher; ``complexity`` (1-3) scales its
    share of the run's LLM-call budget."""

    title: str
    question: str
    complexity: int = 1


@dataclass
class Plan:
    sections: list[Subtask] = field(default_factory=list)
    note: str | None = None  # set when the plan is a fallback


@dataclass
class Evidence(Located):
    """A passage a researcher relied on. ``id`` (E1, E2...) is what prompts carry; the report
    maps it back to the file, page range, span or URL (``Located``)."""

    id: str
    text: str
    source: str
    collection: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON form: the provenance a report has always carried (a passage's
        record id and a web title are not part of it), and the label."""
        return {
            "id": self.id,
            "text": self.text,
            "source": self.source,
            "page": self.page,
            "page_end": self.page_end,
            "start": self.start,
            "end": self.end,
            "collection": self.collection,
            "kind": self.kind,
            "label": self.label,
        }


@dataclass
class Finding:
    claim: str
    evidence: list[str]  # evidence ids
    section: str = ""
    expression: str | None = None  # a calculator figure: the arithmetic on the cited numbers


@dataclass
class Hypothesis:
    """A statement tested against the documents: ``evidence`` holds the passages that bear it
    out, ``against`` those that contradict it; the status follows from them (a question is
    never a hypothesis: it is an open question)."""

    statement: str
    status: HypothesisStatus = "open"
    evidence: list[str] = field(default_factory=list)
    against: list[str] = field(default_factory=list)


@dataclass
class SectionResult:
    """What one researcher handed back for its subtask; ``error`` when it failed."""

    subtask: Subtask
    findings: list[Finding] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    hypotheses: list[Hypothesis] = field(default_factory=list)  # evidence: passage keys
    budget: int = 0
    calls: int = 0
    cut_short: str | None = None
    error: str | None = None
    # The section's answer step failed and it went on with less (answered again, or its
    # passages quoted): the report says so next to the sections that are missing.
    degraded: str | None = None
    # The section's prose as the model wrote it, [n] citing ``evidence[n - 1]``
    # (``RunState.merge`` rewrites them as the run's evidence ids), and the questions the
    # researcher raised (never hypotheses).
    text: str = ""
    open_questions: list[str] = field(default_factory=list)


@dataclass
class ReportSection:
    title: str
    text: str  # with [n] citations into Report.sources; NOT_IN_SOURCES marks what none holds
    unsupported: list[str] = field(default_factory=list)  # its sentences no passage holds


@dataclass
class Gathered:
    """What the researchers of one round handed back, in plan order (their evidence keyed
    by passage; ``RunState.merge`` gives it the run's E ids)."""

    results: list[SectionResult] = field(default_factory=list)


@dataclass
class DraftSection:
    """A section of the draft: the plan's title and question, the prose with each sentence
    citing the evidence ids of the passages that hold it, and the sentences none holds."""

    title: str
    question: str
    text: str
    unsupported: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # the ids its text could cite


@dataclass
class Draft:
    """The report as written, its citations still evidence ids ([E1])."""

    title: str
    summary: str = ""
    sections: list[DraftSection] = field(default_factory=list)
    open_questions: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The summary and every section's text, as the checks read it."""
        return " ".join([*(s.text for s in self.sections), self.summary])


@dataclass
class Contradiction:
    """Two claims from different sources giving different values for the same attribute of
    the same thing (``research.contradictions``): ``differs`` says how ("45 EUR vs 50 EUR"),
    ``subject`` what is measured (entity: measure (period))."""

    claim_a: str
    evidence_a: list[str]
    claim_b: str
    evidence_b: list[str]
    differs: str
    subject: str = ""


@dataclass
class Quality:
    """The quality check of one draft: coverage of the must-answer questions, sentences no
    passage holds (``uncited_sentences``), citations whose passages lack the sentence's key
    terms, the searches a revision would run (``gaps``: the questions not covered), and the
    contradictions between the sources."""

    coverage: float = 0.0
    missing_questions: list[str] = field(default_factory=list)
    uncited_sentences: list[str] = field(default_factory=list)
    weak_citations: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    contradictions: list[Contradiction] = field(default_factory=list)
    passed: bool = False


@dataclass
class Source:
    """A numbered source of the report: the ``[n]`` of the text, and the evidence it is.
    The passage's file, pages and span live once, on the ``Evidence``."""

    n: int
    evidence: Evidence

    @property
    def evidence_id(self) -> str:
        return self.evidence.id

    @property
    def label(self) -> str:
        return self.evidence.label

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "evidence_id": self.evidence.id, "label": self.label}


@dataclass
class Report:
    request: str
    title: str = ""
    summary: str = ""
    sections: list[ReportSection] = field(default_factory=list)
    open_questions: list[str] = field(default_factory=list)
    hypotheses: list[Hypothesis] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    brief: ResearchBrief | None = None
    plan: Plan | None = None
    evidence: list[Evidence] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    quality: Quality | None = None
    revisions: int = 0
    usage: Usage = field(default_factory=Usage)
    cut_short: str | None = None
    missing: list[str] = field(default_factory=list)  # sections or questions not covered
    degraded: list[str] = field(default_factory=list)  # sections whose answer step failed
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # A source is its number and evidence id (and label, for display); the passage's
        # fields appear once, under "evidence", where every evidence id resolves.
        d["sources"] = [s.to_dict() for s in self.sources]
        d["evidence"] = [e.to_dict() for e in self.evidence]
        d["usage"] = self.usage.to_dict()
        d["seconds"] = round(self.seconds, 3)
        return d

    def to_markdown(self) -> str:
        lines = [f"# {self.title or self.request}", ""]
        if self.cut_short:
            lines += [f"> **Cut short:** {self.cut_short}", ""]
        if self.missing:
            lines += ["> **Missing:** " + "; ".join(self.missing), ""]
        if self.degraded:
            lines += ["> **Degraded:** " + "; ".join(self.degraded), ""]
        if self.summary:
            lines += ["## Summary", "", self.summary, ""]
        for s in self.sections:
            lines += [f"## {s.title}", "", s.text, ""]
        if any(s.unsupported for s in self.sections):
            lines += [
                "> Sentences marked [not in sources] are not held by any passage found; "
                "they are the model's, unchecked.",
                "",
            ]
        if self.hypotheses:
            lines += ["## Hypotheses", "", "| Hypothesis | Status | For | Against |"]
            lines.append("|---|---|---|---|")
            by_id = {s.evidence_id: s.n for s in self.sources}

            def refs(ids: list[str]) -> str:
                return " ".join(f"[{by_id[e]}]" for e in ids if e in by_id)

            for h in self.hypotheses:
                statement = h.statement.replace("|", "\\|")
                lines.append(
                    f"| {statement} | {h.status} | {refs(h.evidence)} | {refs(h.against)} |"
                )
            lines.append("")
        conflicts = self.quality.contradictions if self.quality else []
        if self.open_questions or conflicts:
            lines += ["## Open questions / what the documents do not say", ""]
            lines += [f"- {q}" for q in self.open_questions]
            lines += [""] if self.open_questions else []
        if conflicts:
            by_id = {s.evidence_id: s.n for s in self.sources}

            def side(claim: str, ids: list[str]) -> str:
                refs = "".join(f"[{by_id[e]}]" for e in ids if e in by_id)
                return f"“{claim}” {refs}" if claim else refs

            lines += ["**Conflicting sources:**", ""]
            lines += [
                f"- {c.differs}: {side(c.claim_a, c.evidence_a)} vs {side(c.claim_b, c.evidence_b)}"
                for c in conflicts
            ]
            lines.append("")
        if self.sources:
            lines += ["## Sources", ""]
            for src in self.sources:
                ev = src.evidence
                span = f" (chars {ev.start}–{ev.end})" if ev.start is not None else ""
                lines.append(f"[{src.n}] {src.label}{span}")
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"
