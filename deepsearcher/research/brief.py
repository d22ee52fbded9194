"""Stage 1, the brief: the request as a goal, the questions the report must answer, its scope
and assumptions; at most one clarifying question, asked when the caller can ask the user. A
failed brief researches the request as asked."""

from __future__ import annotations

from functools import partial

from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.prompting import ask, escape_document, messages_for
from deepsearcher.research import prompts
from deepsearcher.research.events import BriefEvent
from deepsearcher.research.models import ResearchBrief
from deepsearcher.research.parsing import BRIEF_SCHEMA, parse_brief
from deepsearcher.research.state import RunDeps, RunState, note, spent


async def make_brief(state: RunState, deps: RunDeps) -> ResearchBrief:
    request = deps.request.request
    answered = deps.request.clarification  # asked in an earlier turn (a chat, an API call)
    text = request
    if answered is not None:
        text = f"{request}\n(Asked: {answered[0]} The user answered: {answered[1]})"
    try:
        brief = await _ask_brief(state, text, request)
    except (LLMError, BudgetExceeded) as exc:
        spent(state, exc)
        message = f"brief failed ({exc.message}); researching the request as asked"
        note(state, deps, message)
        brief = ResearchBrief(goal=request, must_answer=[request], note=message)
    if answered is not None:
        brief.question = ""  # one question per run, and it was answered
        brief.assumptions.insert(0, f"clarified: {answered[0]} -> {answered[1]}")
    if brief.question:
        brief = await clarified(state, deps, brief)
    if not brief.must_answer:
        brief.must_answer = [request]
    deps.emit(BriefEvent(brief=brief))
    return brief


async def clarified(state: RunState, deps: RunDeps, brief: ResearchBrief) -> ResearchBrief:
    """The brief after the user answered its clarifying question (one more call); without
    a way to ask, or no reply, the brief as it was, saying what it did not ask."""
    question, request = brief.question, deps.request.request
    reply = await deps.request.clarify(question) if deps.request.clarify else None
    if not reply:
        asked = "no reply" if deps.request.clarify else "not asked (non-interactive)"
        brief.assumptions.append(f"{asked}: {question}")
        return brief
    clarified = f"{request}\n(Asked: {question} The user answered: {reply})"
    try:
        new = await _ask_brief(state, clarified, request)
    except (LLMError, BudgetExceeded) as exc:
        note(state, deps, f"brief after clarification failed ({exc.message}); keeping the first")
        brief.assumptions.append(f"clarified: {question} -> {reply}")
        return brief
    new.question = ""  # one question per run: the answer is in the brief now
    new.assumptions.insert(0, f"clarified: {question} -> {reply}")
    return new


async def _ask_brief(state: RunState, text: str, request: str) -> ResearchBrief:
    """The brief for ``text`` (the request, with a clarification when there is one)."""
    return await ask(
        state.ctx,
        messages_for(prompts.BRIEF.format(request=escape_document(text))),
        partial(parse_brief, request=request),
        schema=BRIEF_SCHEMA,
    )
