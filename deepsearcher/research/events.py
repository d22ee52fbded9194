"""Progress events of a research run, Literal-tagged like ``deepsearcher.types``' events so a
type checker narrows ``event.type == "done"`` to the event carrying the ``Report``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from deepsearcher.research.models import Hypothesis, Plan, Quality, Report, ResearchBrief
from deepsearcher.types import EventBase


@dataclass
class BriefEvent(EventBase):
    type: Literal["brief"] = field(default="brief", init=False)
    brief: ResearchBrief | None = None


@dataclass
class PlanEvent(EventBase):
    type: Literal["plan"] = field(default="plan", init=False)
    plan: Plan | None = None


@dataclass
class ResearcherStartedEvent(EventBase):
    type: Literal["researcher_started"] = field(default="researcher_started", init=False)
    section: str = ""
    budget: int = 0


@dataclass
class ResearcherFinishedEvent(EventBase):
    type: Literal["researcher_finished"] = field(default="researcher_finished", init=False)
    section: str = ""
    findings: int = 0
    calls: int = 0
    error: str | None = None
    cut_short: str | None = None


@dataclass
class ToolCallEvent(EventBase):
    type: Literal["tool_call"] = field(default="tool_call", init=False)
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    result: str = ""
    error: bool = False
    section: str = ""  # the researcher's


@dataclass
class HypothesisEvent(EventBase):
    type: Literal["hypothesis"] = field(default="hypothesis", init=False)
    hypothesis: Hypothesis | None = None
    section: str = ""  # the researcher that tested it; "" for the draft's


@dataclass
class QualityEvent(EventBase):
    type: Literal["quality"] = field(default="quality", init=False)
    quality: Quality | None = None
    round: int = 0


@dataclass
class RevisionEvent(EventBase):
    type: Literal["revision"] = field(default="revision", init=False)
    round: int = 0
    gaps: list[str] = field(default_factory=list)


@dataclass
class ResearchNoteEvent(EventBase):
    type: Literal["note"] = field(default="note", init=False)
    message: str = ""


@dataclass
class ResearchDoneEvent(EventBase):
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
