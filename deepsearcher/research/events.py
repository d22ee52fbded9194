"""Progress events of a research run, Literal-tagged like ``deepsearcher.types``' events so a
type checker narrows ``event.type == "done"`` to the event carrying the ``Report``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from deepsearcher.research.models import Hypothesis, Plan, Quality, Report, ResearchBrief


@dataclass
class _Base:
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BriefEvent(_Base):
    type: Literal["brief"] = field(default="brief", init=False)
    brief: ResearchBrief | None = None


@dataclass
class PlanEvent(_Base):
    type: Literal["plan"] = field(default="plan", init=False)
    plan: Plan | None = None


@dataclass
class ResearcherStartedEvent(_Base):
    type: Literal["researcher_started"] = field(default="researcher_started", init=False)
    section: str = ""
    budget: int = 0


@dataclass
class ResearcherFinishedEvent(_Base):
    type: Literal["researcher_finished"] = field(default="researcher_finished", init=False)
    section: str = ""
    findings: int = 0
    calls: int = 0
    error: str | None = None
    cut_short: str | None = None


@dataclass
class ToolCallEvent(_Base):
    type: Literal["tool_call"] = field(default="tool_call", init=False)
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    result: str = ""
    error: bool = False


@dataclass
class HypothesisEvent(_Base):
    type: Literal["hypothesis"] = field(default="hypothesis", init=False)
    hypothesis: Hypothesis | None = None


@dataclass
class QualityEvent(_Base):
    type: Literal["quality"] = field(default="quality", init=False)
    quality: Quality | None = None
    round: int = 0


@dataclass
class RevisionEvent(_Base):
    type: Literal["revision"] = field(default="revision", init=False)
    round: int = 0
    gaps: list[str] = field(default_factory=list)


@dataclass
class ResearchNoteEvent(_Base):
    type: Literal["note"] = field(default="note", init=False)
    message: str = ""


@dataclass
class ResearchDoneEvent(_Base):
    type: Literal["done"] = field(default="done", init=False)
    report: Report | None = None


ResearchEvent = (
    BriefEvent
    | PlanEvent
    | ResearcherStartedEvent
    | ResearcherFinishedEvent
    | ToolCallEvent
    | HypothesisEvent
    | QualityEvent
    | RevisionEvent
    | ResearchNoteEvent
    | ResearchDoneEvent
)
