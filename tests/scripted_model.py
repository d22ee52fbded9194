"""An in-process scripted ``ChatModel`` for agent unit tests (as simonw/llm's MockModel).

Replies come from rules (a prompt matcher and a reply, optionally a limited number of times),
then from a queue (``enqueue``), in that order; a call nothing answers fails the test with the
prompt it could not answer. ``history`` records every call's messages. No sockets, no threads:
the end-to-end path (HTTP, retries, timeouts) is tested against ``tests/llm_server.py``.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from deepsearcher.llm import (
    Completion,
    JsonSchema,
    Message,
    StreamPiece,
    ToolCall,
    ToolSchema,
)
from deepsearcher.types import Usage

# One passage as the product's prompts delimit it (render_document); group 1 is its text.
DOCUMENT = re.compile(r"<document[^>]*>\n(.*?)\n</document>", re.S)
DOCUMENT_BLOCK = re.compile(r"<document[^>]*>.*?</document>", re.S)

# A list of ToolCall replies with native tool calls (when the call offered tools); a Completion
# is returned as it is (to script log-probabilities or usage).
Reply = (
    str
    | Exception
    | list[ToolCall]
    | Completion
    | Callable[[str], "str | list[ToolCall] | Completion"]
)
Match = str | Callable[[str], bool]


class NoScriptedReply(AssertionError):
    """The test did not script a reply for this prompt."""


@dataclass
class _Rule:
    match: Match
    reply: Reply
    times: int | None


def prompt_of(messages: Sequence[Message]) -> str:
    """What rules match: the call's user messages, the task prompt first (a format retry
    appends the retry request, so it still matches its task's rules)."""
    return "\n\n".join(m["content"] for m in messages if m["role"] == "user")


def task_of(messages: Sequence[Message]) -> str:
    """The ``TASK:`` name of the call's first user prompt ("judge", "answer", ...): its first
    ``TASK:`` line outside the quoted passages (prompts over passages put them first)."""
    first = next((m["content"] for m in messages if m["role"] == "user"), "")
    for line in DOCUMENT_BLOCK.sub("", first).splitlines():
        if line.startswith("TASK:"):
            return line.removeprefix("TASK:").strip()
    return ""


class ScriptedChatModel:
    """Implements ``deepsearcher.llm.ChatModel``; ``stream`` sends a reply word by word."""

    name = "scripted-in-process"

    def __init__(self) -> None:
        self._rules: list[_Rule] = []
        self._queue: deque[Reply] = deque()
        self.history: list[list[Message]] = []
        self.tools: list[list[ToolSchema] | None] = []  # the tools each call offered
        self.schemas: list[JsonSchema | None] = []  # the reply schema each complete() asked for
        self.logprobs: list[bool] = []  # whether each complete() asked for log-probabilities

    # -- scripting ---------------------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        """Replies for the next calls no rule answers, in order."""
        self._queue.extend(replies)

    def add_rule(self, match: Match, reply: Reply, *, times: int | None = None) -> None:
        """Answer prompts that contain ``match`` (or for which it returns True) with ``reply``
        (a string, an exception to raise, or a function of the prompt). Later rules win."""
        self._rules.insert(0, _Rule(match, reply, times))

    def calls(self, task: str) -> list[list[Message]]:
        """The recorded calls of one task ("judge", "answer", ...)."""
        return [m for m in self.history if task_of(m) == task]

    # -- ChatModel ---------------------------------------------------------------------------

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[ToolSchema] | None = None,
        schema: JsonSchema | None = None,
        logprobs: bool = False,
    ) -> Completion:
        self.schemas.append(schema)
        self.logprobs.append(logprobs)
        reply = self._reply(messages, tools)
        if isinstance(reply, Completion):
            return reply
        if isinstance(reply, list):
            if not tools:
                raise AssertionError("a native tool-call reply to a call that offered no tools")
            text = " ".join(f"{c.name}({c.args})" for c in reply)
            return Completion("", _usage(messages, text), "tool_calls", list(reply))
        return Completion(text=reply, usage=_usage(messages, reply), finish_reason="stop")

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int | None = None
    ) -> AsyncIterator[StreamPiece]:
        text = self._reply(messages, None)
        assert isinstance(text, str), "a streamed reply is text"
        words = text.split(" ")
        for i, word in enumerate(words):
            yield StreamPiece(text=word if i == len(words) - 1 else word + " ")
        yield StreamPiece(usage=_usage(messages, text))

    def _reply(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema] | None
    ) -> str | list[ToolCall] | Completion:
        self.history.append([dict(m) for m in messages])
        self.tools.append(list(tools) if tools else None)
        prompt = prompt_of(messages)
        reply = self._scripted(prompt)
        if isinstance(reply, Exception):
            raise reply
        return reply(prompt) if callable(reply) else reply

    def _scripted(self, prompt: str) -> Reply:
        for rule in self._rules:
            matched = rule.match in prompt if isinstance(rule.match, str) else rule.match(prompt)
            if matched:
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times <= 0:
                        self._rules.remove(rule)
                return rule.reply
        if self._queue:
            return self._queue.popleft()
        raise NoScriptedReply(f"no scripted reply for:\n{prompt[:500]}")


def _usage(messages: Sequence[Message], text: str) -> Usage:
    prompt_tokens = sum(len(m["content"].split()) for m in messages)
    return Usage(llm_calls=1, prompt_tokens=prompt_tokens, completion_tokens=len(text.split()))


def _plan_the_question(prompt: str) -> str:
    """The question as the plan's one lookup (its last "Question:" line: examples come
    first)."""
    questions = re.findall(r"^Question: (.*)$", prompt, re.MULTILINE)
    return json.dumps({"steps": questions[-1:]})


def _all_yes(prompt: str) -> str:
    """A verdict for each passage the judge prompt shows: YES."""
    count = len(DOCUMENT.findall(prompt))
    return "YES" if "Is document" in prompt else json.dumps(["YES"] * count)


def _first_words(prompt: str) -> str:
    """A lookup answered with the first words of the first passage."""
    docs = DOCUMENT.findall(prompt)
    if not docs:
        return '{"answer": "", "document": 0}'
    return json.dumps({"answer": " ".join(docs[0].split()[:4]).rstrip(".,;:"), "document": 1})


def script_deep_search(llm: ScriptedChatModel, answer: Reply, *, judge: Reply = _all_yes) -> None:
    """Rules for the deep-search steps of tests about something else (research, front
    ends): the question as its one lookup, every passage kept, the lookup answered from the
    first passage, nothing to reflect on, and ``answer`` as the answer."""
    llm.add_rule("TASK: plan", _plan_the_question)
    llm.add_rule("TASK: judge", judge)
    llm.add_rule("TASK: extract", _first_words)
    llm.add_rule("TASK: reflect", '{"queries": []}')
    llm.add_rule("TASK: answer", answer)


__all__ = ["NoScriptedReply", "ScriptedChatModel", "prompt_of", "script_deep_search", "task_of"]
