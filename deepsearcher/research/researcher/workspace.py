"""One researcher's working state: the run's shared pieces (``ResearcherDeps``), its share of
the budget, and the evidence it may cite by short id (E1, E2... in its prompts; passage keys
underneath, which ``RunState.merge`` maps to the run's ids)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from deepsearcher.errors import BudgetExceeded
from deepsearcher.llm import ChatModel, Completion, JsonSchema, Message, ToolSchema
from deepsearcher.prompting import document_block, escape_attribute, escape_document
from deepsearcher.research.budget import CallGate, SharedBudgetModel
from deepsearcher.research.events import ResearchNoteEvent
from deepsearcher.research.models import (
    Evidence,
    Finding,
    Hypothesis,
    Subtask,
)
from deepsearcher.research.researcher.evidence import evidence_of
from deepsearcher.research.researcher.registry import ToolArgumentError
from deepsearcher.research.state import Limits, RunDeps
from deepsearcher.research.text import EVIDENCE_ID
from deepsearcher.run_context import RunContext
from deepsearcher.types import Hit

PROMPT_EVIDENCE_CHARS = 400


@dataclass(frozen=True)
class ResearcherDeps:
    """What every researcher of a run shares: the run's components, its one budget, its
    limits, and the gate through which one call may go alone."""

    run: RunDeps
    ctx: RunContext
    limits: Limits
    gate: CallGate


@dataclass
class Workspace:
    deps: ResearcherDeps
    subtask: Subtask
    budget: int  # LLM calls, its share of the run's budget
    left: int = field(default=0, init=False)  # after the deep search: tools, hypotheses
    model: ChatModel = field(init=False)
    evidence: dict[str, Evidence] = field(default_factory=dict)  # passage key -> evidence
    short: dict[str, str] = field(default_factory=dict)  # E1 -> passage key (what prompts see)
    short_ids: dict[str, str] = field(default_factory=dict)  # passage key -> E1
    findings: list[Finding] = field(default_factory=list)
    hypotheses: list[Hypothesis] = field(default_factory=list)
    proposed: list[tuple[str, str]] = field(default_factory=list)  # (statement, counter query)
    questions: list[str] = field(default_factory=list)  # proposed as hypotheses, but asked
    web_urls: set[str] = field(default_factory=set)  # fetch only what web_search returned
    calls: int = 0  # LLM calls after the deep search
    finished: bool = False
    _collections: list[str] | None = None

    def __post_init__(self) -> None:
        self.model = SharedBudgetModel(self.deps.run.llm, self.deps.ctx, self.deps.gate)

    @property
    def title(self) -> str:
        return self.subtask.title

    def note(self, message: str) -> None:
        self.deps.ctx.note(message)
        self.deps.run.emit(ResearchNoteEvent(message=message))

    def budget_spent(self) -> bool:
        """The run's budget refuses more calls: the section ends, cut short, as it is."""
        try:
            self.deps.ctx.check_budget(0)
        except BudgetExceeded:
            return True
        return self.deps.ctx.search_remaining_s() <= 0

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema] | None = None,
        schema: JsonSchema | None = None,
    ) -> Completion:
        """One call within the researcher's share and the run's search time; ``schema``
        constrains the reply where the server can."""
        if self.calls >= self.left:
            raise BudgetExceeded(f"researcher budget of {self.budget} call(s) spent")
        left = self.deps.ctx.search_remaining_s()
        if left <= 0:
            raise BudgetExceeded(self.deps.ctx.time_reason())
        try:
            # Only what is asked for goes along: a ChatModel without these keywords works.
            options: dict[str, Any] = {"tools": tools} if tools else {}
            if schema is not None:
                options["schema"] = schema
            completion = await asyncio.wait_for(self.model.complete(messages, **options), left)
        except asyncio.TimeoutError:
            raise BudgetExceeded(self.deps.ctx.time_reason()) from None
        self.calls += 1
        return completion

    async def search(self, query: str, top_k: int) -> list[Hit]:
        run = self.deps.run
        if self._collections is None:
            infos = await run.retriever.available_collections()
            self._collections, _ = await run.retriever.searchable(run.request.collections, infos)
        search = run.retriever.search([query], self._collections, top_k)
        hits = await self.deps.ctx.in_time(search)
        return hits[0] if hits else []

    # -- evidence the model can cite by short id ----------------------------------------------

    def add_evidence(self, ev: Evidence) -> str:
        """The short id of a passage (E1, E2... in this researcher's prompts)."""
        if ev.id not in self.evidence:
            self.evidence[ev.id] = ev
            self.short[f"E{len(self.short) + 1}"] = ev.id
            self.short_ids[ev.id] = f"E{len(self.short)}"
        return self.short_ids[ev.id]

    def add_hit(self, hit: Hit) -> str:
        """The passage key of a hit, its evidence registered."""
        ev = evidence_of(hit)
        self.add_evidence(ev)
        return ev.id

    def short_of(self, key: str) -> str:
        return self.short_ids[key]

    def keys_of(self, ids: Any, what: str) -> list[str]:
        """Passage keys of the short ids a tool call names; an unknown id is an error."""
        if isinstance(ids, str):
            ids = EVIDENCE_ID.findall(ids)
        if not isinstance(ids, list) or not ids:
            raise ToolArgumentError(f'{what}: name the evidence ids it rests on, e.g. ["E1"]')
        unknown = [i for i in ids if i not in self.short]
        if unknown:
            known = ", ".join(self.short) or "none yet: search first"
            raise ToolArgumentError(f"{what}: unknown evidence id(s) {unknown}; known: {known}")
        return list(dict.fromkeys(self.short[i] for i in ids))

    def render(self, key: str) -> str:
        ev = self.evidence[key]
        attributes = f'id="{self.short_of(key)}" source="{escape_attribute(ev.label)}"'
        return document_block(attributes, ev.text[:PROMPT_EVIDENCE_CHARS])

    def findings_text(self) -> str:
        lines = []
        for f in self.findings:
            refs = "".join(f"[{self.short_of(k)}]" for k in f.evidence)
            lines.append(f"- {escape_document(f.claim)} {refs}")
        return "\n".join(lines) or "(none)"
