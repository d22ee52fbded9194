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


# Names eval sets give the gold-document list, most common first. A file using none of them
# is an error: scoring it would report nothing and exit 0, which reads as "no recall data".
GOLD_FIELDS = (
    "gold_doc_ids",
    "gold_docs",
    "gold_documents",
    "gold_doc_id",
    "gold",
    "doc_ids",
    "doc_id",
    "supporting_docs",
    "supporting_documents",
    "relevant_docs",
)


def gold_field(record: dict[str, Any]) -> str | None:
    """The first of ``GOLD_FIELDS`` present in ``record`` (an empty list counts: no gold)."""
    return next((name for name in GOLD_FIELDS if name in record), None)


def _gold_ids(value: Any) -> list[str] | None:
    """A gold value as a list of ids: one string or a list of strings; None for anything else."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str | int) for v in value):
        return [str(v) for v in value]
    return None


def question_type(record: dict[str, Any]) -> str:
    """``type``, ``question_type`` or ``kind``; for MuSiQue-style ids (``3hop1__...``) the hop
    count."""
    value = record.get("type") or record.get("question_type") or record.get("kind")
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
    without_gold: list[int] = []  # answerable questions that name no gold field
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
            field_name = gold_field(rec)
            gold = _gold_ids(rec.get(field_name)) if field_name else []
            if gold is None:
                raise ConfigError(
                    f"{path}:{lineno}: '{field_name}' is not a list of document ids",
                    "give the gold documents as a list of paths relative to --corpus",
                )
            if field_name is None and is_unanswerable(rec) is not True:
                without_gold.append(lineno)
            answers = rec.get("answers") or ([rec["answer"]] if rec.get("answer") else [])
            out.append(
                EvalQuestion(
                    id=str(rec.get("id", lineno)),
                    question=question,
                    answers=[str(a) for a in answers if str(a).strip()],
                    gold=gold,
                    type=question_type(rec),
                    history=[str(h) for h in rec.get("history") or []],
                    unanswerable=is_unanswerable(rec),
                )
            )
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise ConfigError(f"no questions in {path}", "the file is empty")
    if without_gold:
        looked = ", ".join(GOLD_FIELDS)
        where = (
            "any question"
            if len(without_gold) == len(out)
            else f"the question on line {without_gold[0]}"
        )
        raise ConfigError(
            f"{path}: no gold documents field in {where} (looked for {looked})",
            "name each question's gold documents in 'gold_doc_ids' (paths relative to --corpus); "
            'mark a question without any with "answerable": false',
        )
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
