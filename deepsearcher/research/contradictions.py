"""Contradictions between sources. Two claims conflict only when they give different values
for the same attribute of the same thing: the same entity (product codes, names, identifiers
such as "Tier 1" or "P2"), the same measure (the words that say what is measured, and the kind
of value: a currency, a percentage, weeks, a time of day, a date), the same period (a quarter,
a month, a date, a year), and values that differ beyond rounding (or beyond 10 % when either is
"about" a figure). A figure that is a change ("a 6 % increase", "by 0.8 points"), a bound
("under 2 minutes", "up to 40 hours") or a plan ("would", "proposed", "target") is a different
measure from a level. When any of these cannot be told, the pair is not a conflict: a report
that flags a false conflict spends a revision round on it and misleads its reader.

Labelled pairs (planted conflicts and look-alikes) in ``benchmarks/conflict_pairs.jsonl``
measure the rule (``benchmarks/contradictions.py``); the tests hold it to no false conflict."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from deepsearcher.research.claims import Claim, Figure, claims_of, read_claim
from deepsearcher.research.models import Contradiction, Evidence, Finding

MAX_CONTRADICTIONS = 10


def _same_entity(x: Figure, y: Figure) -> bool:
    """The same thing: the same identifiers, and names that meet; a figure whose sentence
    names nothing at all ("Each robot completes ...") may be about what the other names."""
    if not (x.codes or x.names) or not (y.codes or y.names):
        return True
    if x.codes != y.codes:
        return False
    return not x.names or not y.names or bool(x.names & y.names)


def _same_measure(x: Figure, y: Figure) -> bool:
    if x.kind != y.kind or x.period != y.period:
        return False
    if (x.change, x.modal) != (y.change, y.modal) or x.bound or y.bound:
        return False
    if not x.measure or not y.measure:
        return False
    # What the smaller side measures, the other measures too (one word may differ in a long
    # description): "gross margin" is not "gross margin effect" nor "domestic per diem".
    small = min(len(x.measure), len(y.measure))
    return len(x.measure & y.measure) >= small - (1 if small >= 5 else 0)


def _differ(x: Figure, y: Figure) -> bool:
    if x.value == y.value:
        return False
    try:
        a, b = float(x.value), float(y.value)
    except ValueError:
        return True  # times and dates: different text, different value
    if x.approx or y.approx:
        return abs(a - b) > 0.1 * max(abs(a), abs(b))
    # Rounding: 41.5 and 41 agree at the coarser figure's precision.
    digits = min(_decimals(x.value), _decimals(y.value))
    return abs(a - b) > 0.5 * 10**-digits + 1e-9


def _decimals(value: str) -> int:
    return len(value.split(".")[1]) if "." in value else 0


def conflict(a: Claim, b: Claim) -> tuple[Figure, Figure] | None:
    """The two figures on which the claims disagree, or None: same entity, same measure and
    period, different values."""
    for x in a.figures:
        for y in b.figures:
            if _same_entity(x, y) and _same_measure(x, y) and _differ(x, y):
                return x, y
    return None


def _claims(findings: Iterable[Finding], evidence: Iterable[Evidence]) -> list[Claim]:
    out: list[Claim] = []
    by_id: dict[str, Evidence] = {}
    for ev in evidence:  # the passages first: what the sources themselves say
        by_id[ev.id] = ev
        out += claims_of(ev.text, [ev.id], ev.source)
    for f in findings:  # then the researchers' claims, each as the source it cites
        sources = {by_id[e].source for e in f.evidence if e in by_id}
        if f.evidence and (claim := read_claim(f.claim, f.evidence, "|".join(sorted(sources)))):
            out.append(claim)
    return out


def _label(f: Figure) -> str:
    kind = "" if f.kind in ("number", "time", "date") else f.kind
    unit = {"%": "%", "usd": " USD", "eur": " EUR", "gbp": " GBP", "sek": " SEK"}.get(
        kind, f" {kind}" if kind else ""
    )
    return f"{f.value}{unit}"


def find_contradictions(
    findings: Sequence[Finding], evidence: Sequence[Evidence]
) -> list[Contradiction]:
    """Pairs of claims from different sources that give different values for the same
    attribute of the same thing; one per pair of evidence."""
    claims = _claims(findings, evidence)
    found: list[Contradiction] = []
    seen: set[frozenset[str]] = set()
    for i, a in enumerate(claims):
        for b in claims[i + 1 :]:
            if set(a.evidence) & set(b.evidence) or _one_source(a, b):
                continue  # one source agreeing or not with itself is not between sources
            key = frozenset((",".join(a.evidence), ",".join(b.evidence)))
            if key in seen or (pair := conflict(a, b)) is None:
                continue
            seen.add(key)
            x, y = pair
            subject = " ".join(sorted(x.measure & y.measure))
            if x.period:
                subject += f" ({', '.join(sorted(x.period))})"
            entity = ", ".join(sorted(a.codes | (a.names & b.names)))
            found.append(
                Contradiction(
                    claim_a=a.text,
                    evidence_a=list(a.evidence),
                    claim_b=b.text,
                    evidence_b=list(b.evidence),
                    differs=f"{_label(x)} vs {_label(y)}",
                    subject=f"{entity}: {subject}" if entity else subject,
                )
            )
            if len(found) >= MAX_CONTRADICTIONS:
                return found
    return found


def _one_source(a: Claim, b: Claim) -> bool:
    return bool(a.source) and bool(set(a.source.split("|")) & set(b.source.split("|")))


def gap_query(c: Contradiction) -> str:
    """A search for what settles the contradiction."""
    return f"{c.subject or c.claim_a}: {c.differs}?"
