"""Follow-up questions: one LLM call turns "And for the next one?" plus the conversation into a
standalone question that retrieval can use. Shared by the chat server and the eval runner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deepsearcher.agents import prompts
from deepsearcher.agents.base import messages_for
from deepsearcher.agents.parsing import clean_output
from deepsearcher.errors import LLMError
from deepsearcher.types import Usage

if TYPE_CHECKING:
    from deepsearcher.llm import ChatModel

HISTORY_TURNS = 12  # recent turns given to the rewrite; older ones rarely change the question
HISTORY_CHARS = 2000  # per turn


def render_history(turns: Sequence[tuple[str, str]]) -> str:
    """``(role, text)`` pairs as "role: text" lines, recent turns only, each capped."""
    lines = []
    for role, text in turns[-HISTORY_TURNS:]:
        lines.append(f"{role}: {' '.join(text.split())[:HISTORY_CHARS]}")
    return "\n".join(lines)


async def rewrite_followup(
    llm: ChatModel, question: str, turns: Sequence[tuple[str, str]], usage: Usage
) -> tuple[str, str | None]:
    """Returns ``(standalone question, note)``. Without history no call is made; on failure
    the question is returned as asked, with a note saying so (visible, never silent)."""
    if not turns:
        return question, None
    prompt = prompts.REWRITE.format(history=render_history(turns), question=question)
    try:
        completion = await llm.complete(messages_for(prompt), max_tokens=256)
    except LLMError as exc:
        return (
            question,
            f"follow-up rewrite failed ({exc.message}); searched the last message as asked",
        )
    usage.add(completion.usage)
    rewritten = " ".join(clean_output(completion.text).split()).strip("\"'")
    if not rewritten:
        return question, "follow-up rewrite returned nothing; searched the last message as asked"
    return rewritten, None
