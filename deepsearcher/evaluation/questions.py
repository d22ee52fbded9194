"""Eval questions: reading a questions JSONL file and checking its gold documents exist."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepsearcher.errors import ConfigError
from deepsearcher.evaluation.metrics import GoldMatcher, is_unanswerable


@dataclass
class EvalQuestion:
    id: str
    question: str
    answers: list[str]
    gold: list[str]
    type: str = ""
    history: list[str] = field(default_factory=list)
    unanswerable: bool | None = None

    def retrieval_text(self) -> str:
        """The question with the previous user turns in front: what a search without an LLM
        can do for a follow-up like "And for the next one?"."""
        return "\n".join([*self.history, self.question])


def question_type(record: dict[str, Any]) -> str:
    """``type`` or ``question_type``; for MuSiQue-style ids (``3hop1__...``) the hop count."""
    value = record.get("type") or record.get("question_type")
    if value:
        return str(value)
    m = re.match(r"^(\d+hop)", str(record.get("id", "")))
    return m.group(1) if m else ""


def load_questions(path: Path, limit: int | None = None) -> list[EvalQuestion]:
    """Read a questions JSONL file (``id``, ``question``, ``answers``, ``gold_doc_ids``, ...)."""
    if not path.is_file():
        raise ConfigError(
            f"questions file not found: {path}", "pass a JSON Lines file of questions"
        )
    out: list[EvalQuestion] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                question = str(rec["question"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(
                    f"{path}:{lineno}: not a question record ({type(exc).__name__}: {exc})",
                    "each line must be a JSON object with at least 'question' and 'gold_doc_ids'",
                ) from None
            answers = rec.get("answers") or ([rec["answer"]] if rec.get("answer") else [])
            out.append(
                EvalQuestion(
                    id=str(rec.get("id", lineno)),
                    question=question,
                    answers=[str(a) for a in answers if str(a).strip()],
                    gold=[str(g) for g in rec.get("gold_doc_ids") or []],
                    type=question_type(rec),
                    history=[str(h) for h in rec.get("history") or []],
                    unanswerable=is_unanswerable(rec),
                )
            )
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise ConfigError(f"no questions in {path}", "the file is empty")
    return out


def unmatched_gold(
    questions: Sequence[EvalQuestion], sources: Iterable[str], root: Path
) -> list[str]:
    """Gold ids that name no loaded file: a wrong ``--corpus`` or a file that failed to load
    would otherwise look like a retrieval miss."""
    matcher = GoldMatcher([g for q in questions for g in q.gold], root)
    found = {name for s in sources for name in matcher.names(s)}
    found |= {matcher.key(s) for s in sources}  # trailing-path matches
    return [g for g in matcher.gold if g not in found]
