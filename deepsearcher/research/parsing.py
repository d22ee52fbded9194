"""Tolerant parsing of the research stages' JSON replies. A reply that cannot be used raises
``OutputParseError``, so ``complete_parsed`` asks the model once more with the problem."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from deepsearcher.agents.parsing import OutputParseError
from deepsearcher.research.models import (
    HYPOTHESIS_STATUSES,
    Hypothesis,
    ResearchBrief,
    Subtask,
)

_FENCE = re.compile(r"```[\w-]*\s*\n?(.*?)```", re.DOTALL)


def _json(text: str, opener: str, closer: str) -> Any:
    candidates = [text, *_FENCE.findall(text)]
    start, end = text.find(opener), text.rfind(closer)
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate.strip())
        except json.JSONDecodeError:
            continue
    raise OutputParseError(f"expected a JSON {'object' if opener == '{' else 'list'}")


def json_object(text: str) -> dict[str, Any]:
    value = _json(text, "{", "}")
    if not isinstance(value, dict):
        raise OutputParseError("expected a JSON object")
    return value


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [t for t in (_text(v) for v in value) if t]


def parse_brief(text: str, *, request: str) -> ResearchBrief:
    data = json_object(text)
    brief = ResearchBrief(
        goal=_text(data.get("goal")) or request,
        scope=_text(data.get("scope")),
        audience=_text(data.get("audience")),
        must_answer=_texts(data.get("must_answer")),
        constraints=_texts(data.get("constraints")),
        assumptions=_texts(data.get("assumptions")),
    )
    brief.question = _text(data.get("question"))
    return brief


def parse_plan(text: str, *, max_sections: int) -> list[Subtask]:
    value = _json(text, "[", "]")
    if isinstance(value, dict):  # {"sections": [...]}
        value = next((v for v in value.values() if isinstance(v, list)), None)
    if not isinstance(value, list):
        raise OutputParseError("expected a JSON list of sections")
    sections: list[Subtask] = []
    for item in value:
        if not isinstance(item, dict):
            continue
        question = _text(item.get("question"))
        title = _text(item.get("title")) or question
        if not question:
            continue
        complexity = item.get("complexity", 1)
        level = (
            complexity if isinstance(complexity, int) and not isinstance(complexity, bool) else 1
        )
        sections.append(Subtask(title, question, min(3, max(1, level))))
    if not sections:
        raise OutputParseError("no section had a research question")
    return sections[:max_sections]


def parse_hypotheses(value: Any) -> list[Hypothesis]:
    out: list[Hypothesis] = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict) or not (statement := _text(item.get("statement"))):
            continue
        status = _text(item.get("status")).lower()
        out.append(
            Hypothesis(
                statement,
                status if status in HYPOTHESIS_STATUSES else "open",
                _texts(item.get("evidence")),
            )
        )
    return out


@dataclass
class CheckReply:
    covered: list[bool] | None  # per question; None when the model gave no usable list
    gaps: list[str] = field(default_factory=list)
    score: float | None = None
    contradictions: Any = None  # raw: parsed against the known evidence by the run


def parse_check(text: str, *, questions: int) -> CheckReply:
    data = json_object(text)
    covered = data.get("covered")
    flags = (
        [bool(c) for c in covered]
        if isinstance(covered, list) and len(covered) == questions
        else None
    )
    score = data.get("score")
    return CheckReply(
        flags,
        _texts(data.get("gaps")),
        float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
        data.get("contradictions"),
    )
