"""One researcher: the deep-search loop on its subtask, then a bounded ReAct phase with its own
tools, then its hypotheses tested for and against.

1. The existing ``DeepSearchAgent`` loop answers the subtask: its answer, each sentence cited
   to the passages that hold it (written by the model or attributed), is the section's prose
   and each cited sentence a finding (no extra call).
2. At most ``research.max_tool_steps`` replies of a tool loop (``tool_loop``). The model sees
   short evidence ids (E1, E2...); the ``SectionResult`` carries passage keys that
   ``RunState.merge`` maps to the run's ids.
3. Up to ``research.max_hypotheses`` hypotheses (``hypotheses``): two searches each and one
   verdict call.

Every call goes through ``SharedBudgetModel`` (the run's one budget) and stays within the
researcher's share of it (``workspace.Workspace``)."""

from __future__ import annotations

from deepsearcher.agents import DeepSearchAgent
from deepsearcher.agents.answer import write_answer
from deepsearcher.agents.base import new_answer
from deepsearcher.options import QueryOptions
from deepsearcher.research.budget import (
    MIN_RESEARCHER_CALLS,
    SharedBudgetModel,
)
from deepsearcher.research.models import SectionResult, Subtask
from deepsearcher.research.researcher.evidence import (
    answer_passages,
    findings_from_answer,
    section_text,
)
from deepsearcher.research.researcher.hypotheses import test_hypothesis
from deepsearcher.research.researcher.tool_loop import use_tools
from deepsearcher.research.researcher.workspace import ResearcherDeps, Workspace
from deepsearcher.run_context import RunContext
from deepsearcher.types import Answer, Hit, Source

__all__ = ["ResearcherDeps", "research_section"]


async def research_section(deps: ResearcherDeps, subtask: Subtask, budget: int) -> SectionResult:
    """The section researched: findings and hypotheses with the passages they cite (keyed by
    passage), the calls spent, and what failed or was cut short."""
    ws = Workspace(deps, subtask, budget)
    extra = ws.deps.limits.max_tool_steps + ws.deps.limits.max_hypotheses
    # The deep search leaves the tools their calls only when that still leaves it enough.
    reserve = extra if ws.budget - extra >= 2 * MIN_RESEARCHER_CALLS else 0
    answer = await _deep_search(ws, ws.budget - reserve)
    result = SectionResult(ws.subtask, budget=ws.budget, calls=answer.usage.llm_calls)
    result.cut_short = answer.cut_short
    ws.left = ws.budget - answer.usage.llm_calls
    failed = answer.no_answer
    if (
        answer.mode == "retrieval-only"
        or (failed and not answer.sources)
        or (failed and ws.budget_spent())
    ):
        result.error = f"no findings: {failed or 'the LLM could not be reached'}"
        return result
    if failed:
        answer, result.degraded = await _answer_again(ws, answer, failed)
    # Each sentence stands on the passages it cites, written by the model or attributed by
    # the answer step; a sentence no passage holds is no finding (and is marked in the
    # report), never one finding on every passage that shares its words.
    findings, evidence = findings_from_answer(answer, ws.title)
    for ev in evidence:
        ws.add_evidence(ev)
    passages = answer_passages(answer)
    for ev in passages:
        ws.add_evidence(ev)
    ws.findings = findings
    if ws.deps.limits.max_tool_steps > 0:
        await use_tools(ws)
    if len(ws.proposed) > ws.deps.limits.max_hypotheses:
        dropped = len(ws.proposed) - ws.deps.limits.max_hypotheses
        ws.note(
            f"researcher '{ws.title}': {dropped} hypothesis(es) beyond "
            f"{ws.deps.limits.max_hypotheses} not tested"
        )
    for statement, against in ws.proposed[: ws.deps.limits.max_hypotheses]:
        await test_hypothesis(ws, statement, against)
    result.calls += ws.calls
    result.findings, result.hypotheses = ws.findings, ws.hypotheses
    result.open_questions = ws.questions
    # The answer's passages first, in its [n] order (the text cites them by position), then
    # what the tools and hypotheses cite besides.
    result.text = section_text(answer)
    keys = {e.id for e in passages}
    cited = {k for f in ws.findings for k in f.evidence}
    cited |= {k for h in ws.hypotheses for k in (*h.evidence, *h.against)}
    result.evidence = [*passages, *(e for k, e in ws.evidence.items() if k in cited - keys)]
    return result


async def _answer_again(ws: Workspace, first: Answer, failed: str) -> tuple[Answer, str]:
    """The section's answer written once more from the passages its search kept (an
    answer step fails on a stream the server aborted or a timeout, not on the evidence);
    when that fails too, the first answer, which quotes the passages with their
    citations. Either way the section says so (the second value), in the report too."""
    ws.note(f"researcher '{ws.title}': {failed}; writing the answer once more")
    hits = [_hit_of(s) for s in first.sources]
    settings = ws.deps.run.settings.model_copy(deep=True)
    settings.query.max_llm_calls = max(1, ws.left - ws.calls)
    # Alone: no other researcher's request can abort this stream (the first one may have
    # failed that way); the others wait for this one call.
    model = SharedBudgetModel(ws.deps.run.llm, ws.deps.ctx)
    answer = new_answer(ws.subtask.question, "deep")
    if ws.calls < ws.left:
        async with ws.deps.gate.alone():
            ctx = RunContext.create(
                settings,
                model,
                max(ws.deps.ctx.search_remaining_s(), 0.001),
                "research time budget",
            )
            async for _ in write_answer(ctx, ws.subtask.question, hits, answer):
                pass
        ws.calls += 1
        again = ctx.no_answer
        if again is None and answer.answer:
            return answer, f"the first answer failed ({failed}); written again"
        failed = again or failed
    else:
        failed = f"{failed}; no call left to write it again"
    return first, f"no answer was written ({failed}); its passages are quoted as found"


async def _deep_search(ws: Workspace, budget: int) -> Answer:
    run = ws.deps.run
    settings = run.settings.model_copy(deep=True)
    settings.query.max_llm_calls = budget
    agent = DeepSearchAgent(settings, ws.model, run.retriever, run.web)
    options = QueryOptions(
        collections=run.request.collections,
        timeout_s=max(ws.deps.ctx.search_remaining_s(), 0.001),
        budget_name="research time budget",
    )
    answer: Answer | None = None
    async for event in agent.run(ws.subtask.question, options):
        if event.type == "done":
            answer = event.answer
    assert answer is not None, "the deep-search loop ended without an answer"
    return answer


def _hit_of(source: Source) -> Hit:
    """A cited source back as the passage it was (for answering from it again)."""
    return Hit(
        id=f"{source.collection}|{source.source}|{source.start}|{source.end}",
        text=source.text,
        source=source.source,
        score=0.0,
        collection=source.collection,
        **source.location(),
    )
