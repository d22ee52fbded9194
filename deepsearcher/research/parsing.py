"""Tolerant parsing of the research stages' JSON replies (found in the text by
``prompting.find_json``). A reply that cannot be used raises ``OutputParseError``, so ``ask``
tells the model the problem and asks once more."""

from __future__ import annotations

import re
from typing import Any

from deepsearcher.llm import JsonSchema
from deepsearcher.prompting import OutputParseError, find_json, json_object
from deepsearcher.research.models import ResearchBrief, Subtask

_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


# The replies' shapes, grammar-constrained where the server offers it (llama.cpp's json_object
# with a schema, a json_schema response format elsewhere); the prompts describe them too.
BRIEF_SCHEMA = JsonSchema(
    "brief",
    _object(
        {
            "goal": _STRING,
            "scope": _STRING,
            "audience": _STRING,
            "must_answer": _STRINGS,
            "constraints": _STRINGS,
            "assumptions": _STRINGS,
            "question": _STRING,
        }
    ),
)
PLAN_SCHEMA = JsonSchema(
    "plan",
    _object(
        {
            "sections": {
                "type": "array",
                "items": _object(
                    {"title": _STRING, "question": _STRING, "complexity": {"type": "integer"}}
                ),
            }
        }
    ),
)

# A prompt's placeholder (``<a question the report must answer>``) left in a reply.
# Words and a space between angle brackets, so HTML a model writes (<br>, <a href=...>) is not one.
_PLACEHOLDER = re.compile(r"<(?:id|[a-z][^<>\n=/]{0,80} [^<>\n=/]{0,80})>", re.IGNORECASE)
# What a reply holds when it copies an example instead of answering: the values the research
# prompts once showed (models copy them from prompts like ours too), a bare ellipsis, the
# field's own name.
_EXAMPLE_VALUES = frozenset(
    ["question", "search query", "query", "claim", "statement", "title", "goal", "text",
     "summary", "subject", "45 vs 50 euros", "value in one vs value in the other"]
)  # fmt: skip
_EXAMPLE_FRAGMENTS = ("45 vs 50 euros",)


def copied(value: str) -> bool:
    """Whether a reply's value is the prompt's placeholder or example, not the model's text."""
    flat = " ".join(value.split())
    bare = flat.strip(" .…'\"").lower()
    return (
        not bare
        or bare in _EXAMPLE_VALUES
        or _PLACEHOLDER.search(flat) is not None
        or any(f in bare for f in _EXAMPLE_FRAGMENTS)
    )


def _own(values: list[str]) -> list[str]:
    return [v for v in values if not copied(v)]


def _reject_copy(what: str) -> OutputParseError:
    return OutputParseError(
        f"{what} copies the prompt's example or placeholder; reply with your own values from "
        "the text above"
    )


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [t for t in (_text(v) for v in value) if t]


def parse_brief(text: str, *, request: str) -> ResearchBrief:
    """The brief; a reply whose goal or every must-answer question is the prompt's example is
    refused (asked again), a copied optional item is dropped."""
    data = json_object(text)
    goal = _text(data.get("goal"))
    asked = _texts(data.get("must_answer"))
    if (goal and copied(goal)) or (asked and not _own(asked)):
        raise _reject_copy("the brief")
    question = _text(data.get("question"))
    brief = ResearchBrief(
        goal=goal or request,
        scope="" if copied(scope := _text(data.get("scope"))) else scope,
        audience="" if copied(audience := _text(data.get("audience"))) else audience,
        must_answer=_own(asked),
        constraints=_own(_texts(data.get("constraints"))),
        assumptions=_own(_texts(data.get("assumptions"))),
    )
    brief.question = "" if copied(question) else question
    return brief


def parse_plan(text: str, *, max_sections: int) -> list[Subtask]:
    value = find_json(text, "[]")
    if isinstance(value, dict):  # {"sections": [...]}
        value = next((v for v in value.values() if isinstance(v, list)), None)
    if not isinstance(value, list):
        raise OutputParseError("expected a JSON list of sections")
    sections: list[Subtask] = []
    copies = 0
    for item in value:
        if not isinstance(item, dict):
            continue
        question = _text(item.get("question"))
        title = _text(item.get("title"))
        title = question if not title or copied(title) else title
        if question and copied(question):
            copies += 1
            continue
        if not question:
            continue
        complexity = item.get("complexity", 1)
        level = (
            complexity if isinstance(complexity, int) and not isinstance(complexity, bool) else 1
        )
        sections.append(Subtask(title, question, min(3, max(1, level))))
    if not sections:
        if copies:
            raise _reject_copy("the plan")
        raise OutputParseError("no section had a research question")
    return sections[:max_sections]
