"""Attributing an answer's sentences to the passages that hold them.

Small models often write a right answer with no ``[n]`` at all, so a chatbot would show it with
no source. Each sentence the model left uncited is scored against the passages it was given,
the way RAGFlow's ``insert_citations`` does: 0.9 x the cosine of the two embeddings (the
project's own embedder, the sentence as a query) + 0.1 x the share of the sentence's key
terms the passage holds. A passage is attributed only when it also passes the cheap precision
guard used across the field: it holds the sentence's numbers and enough of its key terms
(``citations.is_supported``). The best passage is cited, with up to two more scoring within
``_CLOSE`` of it. A written citation whose passage does not hold its sentence is moved to one
that does, when one does. A sentence no passage holds is reported as unsupported.

The threshold is calibrated on labelled sets (``benchmarks/attribution_calibration.py``; the
figures are in ``benchmarks/README.md``). Research reports use the same attribution.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from deepsearcher.agents.citations import (
    CITATION,
    NOT_STATED,
    cite_at_end,
    claim_of,
    is_supported,
    key_terms,
    sentence_spans,
)
from deepsearcher.embedding import Embedder

_CLOSE = 0.01  # other passages cited with the best when they score this close to it
_MAX_CITED = 3
_MIN_TERMS = 2  # a sentence with fewer key terms ("Yes.") is neither cited nor unsupported
_COSINE_WEIGHT = 0.9


@dataclass(frozen=True)
class SentenceSupport:
    """What one sentence of a text stands on. Numbers are 1-based passage numbers."""

    start: int
    end: int
    written: tuple[int, ...]  # the citations the text gives it
    cited: tuple[int, ...]  # the passages it cites after attribution
    attributed: bool  # ``cited`` was chosen here, not written by the model
    supported: bool  # a passage holds it (or it is too short to tell)


def overlaps(claims: Sequence[str], passages: Sequence[str]) -> np.ndarray:
    """A claims x passages matrix: the share of each claim's key terms a passage holds, each
    term weighted by how few of the passages hold it (its inverse document frequency among
    them). The answer's own fact ("4471", a name) is usually in one passage only, the words
    it shares with the question in many: the fact decides."""
    lowered = [p.lower() for p in passages]
    out = np.zeros((len(claims), len(passages)))
    for i, claim in enumerate(claims):
        terms = key_terms(claim)
        if not terms:
            continue
        held = np.array([[t in p for p in lowered] for t in terms], dtype=float)
        weight = np.log1p(len(passages) / (1.0 + held.sum(axis=1)))
        out[i] = (weight @ held) / weight.sum()
    return out


class Attributor:
    """Scores sentences against passages. ``embedder`` None scores by term overlap alone
    (its scale is the same: 0 to 1)."""

    def __init__(self, embedder: Embedder | None, threshold: float) -> None:
        self.embedder = embedder
        self.threshold = threshold

    async def scores(
        self,
        claims: Sequence[str],
        passages: Sequence[str],
        question: str = "",
        candidates: Sequence[Sequence[int]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Two claims x passages matrices: the attribution score (0.9 x cosine + 0.1 x
        term overlap, 0 to 1, compared with the threshold), and the share of the claim's own
        fact each passage holds: the terms the claim adds to ``question`` (the name, number or
        date that answers it), or all its terms without a question. Ranked by the fact first,
        the passage holding the answer comes first far more often (benchmarks/README.md).
        ``candidates`` (0-based passage indexes per claim) limits the embedding to the pairs
        that can be cited; the others score their overlap alone."""
        overlap = overlaps(claims, passages)
        asked = set(key_terms(question)) if question else set()
        facts = [" ".join(t for t in key_terms(c) if t not in asked) for c in claims]
        fact = overlaps(facts, passages) if asked else overlap
        if candidates is None:
            candidates = [range(len(passages))] * len(claims)
        rows = [i for i, c in enumerate(candidates) if c]
        cols = sorted({j for c in candidates for j in c})
        if self.embedder is None or not rows:
            return overlap, fact
        embedder = self.embedder

        def cosines() -> np.ndarray:
            # Only the sentences and passages that can meet: a passage is ~0.05 s of
            # encoding on 2 CPU cores, and an answer the model cited well needs none.
            q = embedder.embed_query([claims[i] for i in rows])
            d = embedder.embed([passages[j] for j in cols])
            return np.asarray(q @ d.T, dtype=float)

        cos = np.zeros_like(overlap)
        cos[np.ix_(rows, cols)] = await asyncio.to_thread(cosines)
        return _COSINE_WEIGHT * cos + (1 - _COSINE_WEIGHT) * overlap, fact

    async def support(
        self,
        text: str,
        passages: Sequence[str],
        cited: Callable[[str], Sequence[int]] | None = None,
        citation: re.Pattern[str] = CITATION,
        question: str = "",
    ) -> list[SentenceSupport]:
        """Each sentence of ``text`` with the passages it stands on. ``cited`` reads the
        passage numbers a sentence cites, ``citation`` finds its markers; ``question`` (what
        the text answers) tells a sentence's fact from the words it repeats."""
        cited = cited or _written
        spans = sentence_spans(text)
        claims = [claim_of(text[a:b], citation) for a, b in spans]
        written = [tuple(n for n in cited(text[a:b]) if 1 <= n <= len(passages)) for a, b in spans]
        holders = {
            i: [j for j, p in enumerate(passages) if holds_claim(c, p, question)]
            for i, c in enumerate(claims)
            if _needs_source(c)
            and not (
                written[i]
                and holds_claim(c, " ".join(passages[n - 1] for n in written[i]), question)
            )
        }
        need = list(holders)
        score, fact = await self.scores(
            [claims[i] for i in need], passages, question, [holders[i] for i in need]
        )
        out: list[SentenceSupport] = []
        for i, (a, b) in enumerate(spans):
            if i not in holders:  # stands on what it cites, or needs no source
                out.append(SentenceSupport(a, b, written[i], written[i], False, True))
                continue
            k = need.index(i)
            out.append(self._one(a, b, written[i], holders[i], score[k], fact[k]))
        return out

    def _one(
        self,
        a: int,
        b: int,
        written: tuple[int, ...],
        holders: Sequence[int],
        row: np.ndarray,
        fact: np.ndarray,
    ) -> SentenceSupport:
        """A sentence its written citations do not hold: the holders (0-based passages that
        pass the guard) scoring at least the threshold, best fact first, are cited instead."""
        holding = [j + 1 for j in holders if row[j] >= self.threshold]
        if not holding:
            # A written citation that fails the check stays as written (the answer lists it
            # in unsupported_citations); an uncited sentence is listed as unsupported.
            return SentenceSupport(a, b, written, written, False, False)
        ranked = sorted(holding, key=lambda n: (-fact[n - 1], -row[n - 1]))
        top = ranked[0]
        close = [
            n
            for n in ranked
            if fact[n - 1] >= fact[top - 1] - _CLOSE and row[n - 1] >= row[top - 1] - _CLOSE
        ]
        return SentenceSupport(a, b, written, tuple(close[:_MAX_CITED]), True, True)


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _numbers(text: str) -> set[str]:
    return {re.sub(r"(?<=\d),(?=\d{3}\b)", "", n) for n in _NUMBER.findall(text)}


def holds_claim(claim: str, passage: str, question: str = "") -> bool:
    """The precision guard: the passage holds the claim's numbers (those it adds to
    ``question``: its fact, not the year the question named) and a third of its key terms
    (``citations.is_supported``)."""
    folded = re.sub(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3}\b)", "", passage)
    numbers = _numbers(claim) - _numbers(question)
    return all(n in folded for n in numbers) and is_supported(claim, passage)


def _written(sentence: str) -> list[int]:
    return [int(n) for n in CITATION.findall(sentence)]


def _needs_source(claim: str) -> bool:
    """A sentence that states something checkable: not "the documents do not state it", not a
    question, not a two-word fragment."""
    if NOT_STATED.search(claim) or claim.rstrip().endswith("?"):
        return False
    terms = key_terms(claim)
    # Text without spaces between words (Chinese, Japanese) has no terms this can count.
    return len(terms) >= _MIN_TERMS or (not terms and len(claim.strip()) >= 8)


def with_citations(
    text: str,
    supports: Sequence[SentenceSupport],
    marker: Callable[[int], str] = lambda n: f"[{n}]",
    citation: re.Pattern[str] = CITATION,
) -> str:
    """``text`` with each attributed sentence citing its passages: its written citations
    replaced, or the markers put before its closing punctuation."""
    out: list[str] = []
    pos = 0
    for s in supports:
        out.append(text[pos : s.start])
        sentence = text[s.start : s.end]
        if s.attributed:
            bare = " ".join(citation.sub("", sentence).split())
            sentence = cite_at_end(bare, "".join(marker(n) for n in s.cited))
        out.append(sentence)
        pos = s.end
    out.append(text[pos:])
    return "".join(out)
