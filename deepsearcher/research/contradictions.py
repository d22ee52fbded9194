"""Contradictions between sources, found two ways: structurally (two statements from different
evidence share most key terms but state different figures of one unit, or different dates),
and from the quality check's model (parsed tolerantly: a malformed item is dropped, never
guessed). Both become ``Contradiction`` items of the ``Quality`` and gap queries."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from deepsearcher.research.models import Contradiction, Evidence, Finding
from deepsearcher.research.text import EVIDENCE_ID, STOP_WORDS

MAX_CONTRADICTIONS = 10
# A figure: an optional currency sign, the number (1,250 or 12.5), and the word after it as
# its unit ("45 euros", "20 %", "25 days").
_FIGURE = re.compile(
    r"(?<![\w.,-])([$€£])?\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w,]*\d)"
    r"(?:\s*(%|[A-Za-z]+))?"
)
_WORD = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CURRENCY = {"$": "dollar", "€": "euro", "£": "pound"}
_UNIT_ALIASES = {"percent": "%", "per": "%", "usd": "dollar", "eur": "euro", "hrs": "hour"}
# The citation check's stop words, and words that say when rather than what.
_WHEN_WORDS = "per since until over under after before while only every year years"
_STOP = STOP_WORDS | frozenset(_WHEN_WORDS.split())


@dataclass(frozen=True)
class _Statement:
    text: str
    evidence: tuple[str, ...]
    terms: frozenset[str]
    figures: dict[str, frozenset[str]]  # unit -> values
    years: frozenset[str]


def _unit(word: str | None, sign: str | None) -> str:
    if sign:
        return _CURRENCY[sign]
    if not word:
        return ""
    w = word.lower()
    w = _UNIT_ALIASES.get(w, w)
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]  # euros -> euro, days -> day
    return "" if w in _STOP or w in ("and", "or", "in", "on", "at", "to", "of", "a") else w


def _statement(text: str, evidence: Sequence[str]) -> _Statement | None:
    figures: dict[str, set[str]] = {}
    years: set[str] = set()
    units: set[str] = set()
    for m in _FIGURE.finditer(text):
        sign, whole, frac, word = m.groups()
        value = whole.replace(",", "") + (f".{frac}" if frac else "")
        unit = _unit(word, sign)
        if not sign and not frac and len(value) == 4 and 1900 <= int(value) <= 2100 and not unit:
            years.add(value)
            continue
        if not unit:
            continue  # a bare number: nothing says what it counts
        units.add(unit)
        figures.setdefault(unit, set()).add(value)
    if not figures and not years:
        return None
    terms = {
        w.rstrip("s") if len(w) > 4 else w
        for w in _WORD.findall(text.lower())
        if len(w) >= 4 and w not in _STOP
    }
    terms -= units | {u + "s" for u in units}
    return _Statement(
        text=" ".join(text.split()),
        evidence=tuple(evidence),
        terms=frozenset(terms),
        figures={u: frozenset(v) for u, v in figures.items()},
        years=frozenset(years),
    )


def _about_the_same(a: _Statement, b: _Statement) -> frozenset[str] | None:
    shared = a.terms & b.terms
    if len(shared) >= 2 and len(shared) >= 0.5 * min(len(a.terms), len(b.terms)):
        return shared
    return None


def _differs(a: _Statement, b: _Statement, shared: frozenset[str]) -> str | None:
    """How two statements about the same subject disagree, or None."""
    if a.years and b.years and not a.years & b.years:
        if a.figures.keys() & b.figures.keys():
            return None  # figures of different years: a change over time, not a conflict
        if len(shared) < 0.75 * min(len(a.terms), len(b.terms)):
            return None  # a year says little of which event it dates: ask for more in common
        return f"{', '.join(sorted(a.years))} vs {', '.join(sorted(b.years))}"
    for unit in sorted(a.figures.keys() & b.figures.keys()):
        va, vb = a.figures[unit], b.figures[unit]
        if not va & vb:
            return (
                f"{', '.join(sorted(va, key=float))} {unit} vs "
                f"{', '.join(sorted(vb, key=float))} {unit}"
            ).replace(" %", "%")
    return None


def _statements(findings: Iterable[Finding], evidence: Iterable[Evidence]) -> list[_Statement]:
    out: list[_Statement] = []
    for ev in evidence:  # the passages first: what the sources themselves say
        for sentence in _SENTENCE.split(ev.text):
            if (st := _statement(sentence, [ev.id])) is not None:
                out.append(st)
    for f in findings:  # then the researchers' claims, which may join two passages
        if f.evidence and (st := _statement(f.claim, f.evidence)) is not None:
            out.append(st)
    return out


def find_contradictions(
    findings: Sequence[Finding], evidence: Sequence[Evidence]
) -> list[Contradiction]:
    """Pairs of statements from disjoint evidence that share their subject's key terms but
    state different figures of one unit (or different dates); one per pair of evidence."""
    statements = _statements(findings, evidence)
    found: list[Contradiction] = []
    seen: set[frozenset[str]] = set()
    for i, a in enumerate(statements):
        for b in statements[i + 1 :]:
            if set(a.evidence) & set(b.evidence):
                continue  # one source agreeing or not with itself is not between sources
            key = frozenset((",".join(a.evidence), ",".join(b.evidence)))
            if key in seen or (shared := _about_the_same(a, b)) is None:
                continue
            if (differs := _differs(a, b, shared)) is None:
                continue
            seen.add(key)
            found.append(
                Contradiction(
                    claim_a=a.text,
                    evidence_a=list(a.evidence),
                    claim_b=b.text,
                    evidence_b=list(b.evidence),
                    differs=differs,
                    subject=" ".join(sorted(shared)),
                )
            )
            if len(found) >= MAX_CONTRADICTIONS:
                return found
    return found


def parse_contradictions(
    value: Any, findings: Sequence[Finding], known: Iterable[str]
) -> list[Contradiction]:
    """The quality check model's ``contradictions``: items naming at least two known evidence
    ids, as objects (``evidence``, ``claims``, ``differs``, ``subject``) or plain strings
    ("E1 says 45, E3 says 50"). Anything else is dropped."""
    ids = set(known)
    out: list[Contradiction] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, str):
            data: dict[str, Any] = {"differs": item, "evidence": EVIDENCE_ID.findall(item)}
        elif isinstance(item, dict):
            data = item
        else:
            continue
        raw_ids = data.get("evidence") or data.get("evidence_ids") or []
        if isinstance(raw_ids, str):
            raw_ids = EVIDENCE_ID.findall(raw_ids)
        cited = [i for i in dict.fromkeys(str(x).strip() for x in raw_ids) if i in ids]
        differs = data.get("differs") or data.get("difference") or ""
        if len(cited) < 2 or not isinstance(differs, str) or not differs.strip():
            continue
        claims = [c for c in data.get("claims") or [] if isinstance(c, str) and c.strip()]
        a, b = cited[0], cited[1]
        out.append(
            Contradiction(
                claim_a=" ".join(claims[0].split()) if claims else _claim_citing(findings, a),
                evidence_a=[a],
                claim_b=" ".join(claims[1].split())
                if len(claims) > 1
                else _claim_citing(findings, b),
                evidence_b=[b],
                differs=" ".join(differs.split()),
                subject=" ".join(str(data.get("subject") or "").split()),
                found_by="llm",
            )
        )
    return out[:MAX_CONTRADICTIONS]


def _claim_citing(findings: Sequence[Finding], evidence_id: str) -> str:
    return next((f.claim for f in findings if evidence_id in f.evidence), "")


def merge_contradictions(
    structural: Sequence[Contradiction], llm: Sequence[Contradiction]
) -> list[Contradiction]:
    """Both lists, the model's items dropped when the structural check found the same pair."""
    pairs = {frozenset((*c.evidence_a, *c.evidence_b)) for c in structural}
    extra = [c for c in llm if frozenset((*c.evidence_a, *c.evidence_b)) not in pairs]
    return [*structural, *extra][:MAX_CONTRADICTIONS]


def gap_query(c: Contradiction) -> str:
    """A search for what settles the contradiction."""
    subject = c.subject or c.claim_a
    return f"{subject}: which is right, {c.differs}?"


def conflicts_text(contradictions: Sequence[Contradiction]) -> str:
    """The contradictions for the writer's prompt, with their evidence ids."""
    lines = ["## Conflicting sources (say so in the report; do not pick one silently)"]
    for c in contradictions:
        a, b = "".join(f"[{e}]" for e in c.evidence_a), "".join(f"[{e}]" for e in c.evidence_b)
        lines.append(f"- {c.claim_a} {a} / {c.claim_b} {b}: {c.differs}")
    return "\n".join(lines)
