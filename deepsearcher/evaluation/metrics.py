"""Pure metric functions for the eval command: gold-document matching, recall@k over the top k
chunks and over the top k distinct documents, SQuAD-style answer scores and cost statistics.
No I/O, no models."""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import PurePath, PurePosixPath
from typing import Any

# ---------------------------------------------------------------------------------------------
# Gold documents
# ---------------------------------------------------------------------------------------------


class GoldMatcher:
    """Maps a retrieved source path to a document key.

    ``gold_doc_ids`` in the eval sets are relative paths (``communication/chat.md``), file names
    (``2023 Q1 AAPL.pdf``) or stems (``00012_Title``, ``DEV_0``). A source matches a gold id by
    relative path (with or without extension), by file name or by stem, in that order. Sources
    that match no gold id keep their relative path as key, so distinct non-gold documents still
    count as distinct.
    """

    def __init__(self, gold_ids: Iterable[str], root: str | PurePath | None = None) -> None:
        self.gold = list(dict.fromkeys(g.strip().replace("\\", "/") for g in gold_ids if g.strip()))
        self._root = PurePosixPath(str(root).replace("\\", "/")) if root is not None else None
        self._gold_set = set(self.gold)

    def relative(self, source: str) -> str:
        path = PurePosixPath(source.replace("\\", "/"))
        if self._root is not None:
            try:
                return str(path.relative_to(self._root))
            except ValueError:
                pass
        return str(path)

    def names(self, source: str) -> list[str]:
        """The ids a gold list may use for ``source``: relative path (with and without
        extension), file name and stem, most specific first."""
        rel = PurePosixPath(self.relative(source))
        return list(dict.fromkeys([str(rel), str(rel.with_suffix("")), rel.name, rel.stem]))

    def key(self, source: str) -> str:
        names = self.names(source)
        for candidate in names:
            if candidate in self._gold_set:
                return candidate
        # A source outside the root (another mount, a relative load path): a gold path still
        # matches when it is the source's trailing path.
        for gold in self.gold:
            if "/" in gold and any(f"/{n}".endswith(f"/{gold}") for n in names[:2]):
                return gold
        return names[0]


def distinct_documents(sources: Iterable[str], matcher: GoldMatcher) -> list[str]:
    """Document keys in first-seen order: several chunks of one document count once."""
    return list(dict.fromkeys(matcher.key(s) for s in sources if s))


def recall_at_k(ranked_docs: Sequence[str], gold: Sequence[str], k: int) -> float | None:
    """Share of gold documents among the first ``k`` distinct documents (None without gold)."""
    gold_set = set(gold)
    if not gold_set:
        return None
    top = set(list(dict.fromkeys(ranked_docs))[:k])
    return len(gold_set & top) / len(gold_set)


def all_hops_at_k(ranked_docs: Sequence[str], gold: Sequence[str], k: int) -> float | None:
    """1.0 when every gold document is in the first ``k`` distinct documents, else 0.0."""
    r = recall_at_k(ranked_docs, gold, k)
    return None if r is None else float(r == 1.0)


def chunk_recall_at_k(chunk_docs: Sequence[str], gold: Sequence[str], k: int) -> float | None:
    """Share of gold documents among the documents of the first ``k`` chunks (one document key
    per chunk, in rank order): what a search for ``k`` chunks (``query --top-k k``) puts in
    front of the agent. Never above ``recall_at_k`` for the same ``k``."""
    gold_set = set(gold)
    if not gold_set:
        return None
    return len(gold_set & set(chunk_docs[:k])) / len(gold_set)


def chunk_all_hops_at_k(chunk_docs: Sequence[str], gold: Sequence[str], k: int) -> float | None:
    """1.0 when every gold document has a chunk among the first ``k`` chunks, else 0.0."""
    r = chunk_recall_at_k(chunk_docs, gold, k)
    return None if r is None else float(r == 1.0)


# Row and summary keys per k, and what they mean (reports print these definitions).
RECALL_METRICS = (
    ("chunk_recall", "chunk R@{k}", "share of gold documents among the top k chunks"),
    ("doc_recall", "doc R@{k}", "share of gold documents among the top k distinct documents"),
    ("chunk_all_hops", "chunk all@{k}", "every gold document among the top k chunks"),
    ("doc_all_hops", "doc all@{k}", "every gold document among the top k distinct documents"),
)


# ---------------------------------------------------------------------------------------------
# Answers
# ---------------------------------------------------------------------------------------------

_CITATION = re.compile(r"\[\d{1,3}\]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NOT_STATED = re.compile(
    r"(do(es)? not (state|say|mention|contain|include|specify|provide)|not (stated|mentioned|"
    r"specified|provided|found|available|given)|no (information|answer|mention)|cannot be "
    r"(answered|determined)|can't be (answered|determined)|unable to (answer|determine)|"
    r"insufficient information|未提及|没有提到|无法回答|未说明)",
    re.IGNORECASE,
)


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0xF900 <= cp <= 0xFAFF
        or 0x3040 <= cp <= 0x30FF  # kana
        or 0xAC00 <= cp <= 0xD7AF  # hangul
    )


def _is_punct(ch: str) -> bool:
    return ch in string.punctuation or unicodedata.category(ch).startswith(("P", "S"))


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop citations, punctuation (any script) and English
    articles, collapse whitespace."""
    text = _CITATION.sub(" ", unicodedata.normalize("NFKC", text).lower())
    text = "".join(" " if _is_punct(ch) else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    """Tokens of the normalised text: words, except that CJK characters are one token each
    (the CMRC convention), so Chinese answers get a meaningful F1 without a segmenter."""
    tokens: list[str] = []
    for word in normalize_answer(text).split():
        buf = ""
        for ch in word:
            if _is_cjk(ch):
                if buf:
                    tokens.append(buf)
                    buf = ""
                tokens.append(ch)
            else:
                buf += ch
        if buf:
            tokens.append(buf)
    return tokens


def exact_match(prediction: str, answers: Sequence[str]) -> float | None:
    """1.0 when the normalised prediction equals any normalised gold answer (None: no answers)."""
    if not answers:
        return None
    pred = answer_tokens(prediction)
    return float(any(pred == answer_tokens(a) for a in answers))


def token_f1(prediction: str, answers: Sequence[str]) -> float | None:
    """Best token-overlap F1 against the gold answers (None when there are none)."""
    if not answers:
        return None
    pred = answer_tokens(prediction)
    return max(_f1(pred, answer_tokens(a)) for a in answers)


def _f1(pred: list[str], gold: list[str]) -> float:
    if not pred or not gold:
        return float(pred == gold)
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def says_not_stated(answer: str) -> bool:
    """Whether an answer declines because the documents do not contain the answer."""
    return bool(_NOT_STATED.search(answer))


def is_unanswerable(record: dict[str, object]) -> bool | None:
    """True/False when the question record marks answerability; None when it does not say."""
    for key, unanswerable_when in (
        ("unanswerable", True),
        ("answerable", False),
        ("is_answerable", False),
    ):
        if isinstance(record.get(key), bool):
            return record[key] is unanswerable_when
    return None


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), ``q`` in [0, 100]; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the non-None values; None when there are none (so "no data" is never 0)."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarize(rows: Sequence[dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """Aggregate per-question rows of one agent/mode: retrieval, answer and cost figures, overall
    and per question ``type``. Keys whose metric has no data (EM without an LLM, not-stated
    without unanswerable questions) are left out rather than reported as 0."""
    out = _retrieval_and_answers(rows, ks)
    out["errors"] = sum(1 for r in rows if r.get("error"))
    for key in ("llm_calls", "prompt_tokens", "completion_tokens"):
        value = mean(r.get(key) for r in rows)
        if value is not None:
            out[f"{key}_mean"] = value
    seconds = [float(r["seconds"]) for r in rows if r.get("seconds") is not None]
    if seconds:
        out["seconds_mean"] = sum(seconds) / len(seconds)
        out["seconds_p50"] = percentile(seconds, 50)
        out["seconds_p95"] = percentile(seconds, 95)
    types = sorted({str(r["type"]) for r in rows if r.get("type")})
    if len(types) > 1:
        out["by_type"] = {
            t: _retrieval_and_answers([r for r in rows if r.get("type") == t], ks) for t in types
        }
    return out


def _retrieval_and_answers(rows: Sequence[dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(rows)}
    for key, _, _ in RECALL_METRICS:
        for k in ks:
            value = mean(r.get(f"{key}@{k}") for r in rows)
            if value is not None:
                out[f"{key}@{k}"] = value
    for name in ("em", "f1", "not_stated"):
        value = mean(r.get(name) for r in rows)
        if value is not None:
            out[name] = value
    return out
