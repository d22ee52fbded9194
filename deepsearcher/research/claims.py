"""Reading a sentence's claim for the contradiction rule (contradictions.py): its entities
(product codes, names, identifiers), and each figure with what it measures, its kind of value
(a currency, a percentage, weeks, a time of day, a date), its period and whether it is a
change, a bound, a plan or "about". A table row or a sentence with no figure states no claim."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from deepsearcher.research.text import STOP_WORDS

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december"]  # fmt: skip
# A month by its full name; "may" and the short forms only next to a day or a year ("May 2025",
# "3 Sep"), or they would be read in "may be" and "Mar" words.
_FULL_MONTH = (
    r"(?:january|february|march|april|june|july|august|september|october|november|december)"
)
_SHORT_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)\.?"
_ORDINALS = {"first": "1", "second": "2", "third": "3", "fourth": "4"}
# Periods: what a figure is of (a quarter, a half, a month with its day and year, a year).
_PERIOD = re.compile(
    rf"\b(?:(?:q[1-4]|h[12])(?:\s*(?:fy\s*)?(?:19|20)\d\d)?"
    rf"|(?:first|second|third|fourth)\s+quarter(?:\s+(?:of\s+)?(?:19|20)\d\d)?"
    rf"|(?:\d{{1,2}}\s+)?{_FULL_MONTH}(?:\s+\d{{1,2}}(?!\d))?(?:,?\s+(?:19|20)\d\d)?"
    rf"|\d{{1,2}}\s+{_SHORT_MONTH}(?:,?\s+(?:19|20)\d\d)?"
    rf"|{_SHORT_MONTH}\s+(?:\d{{1,2}}(?!\d)(?:,?\s+(?:19|20)\d\d)?|(?:19|20)\d\d)"
    rf"|fy\s*(?:19|20)\d\d|(?:19|20)\d\d-\d\d-\d\d|(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_TIME = re.compile(r"\b\d{1,2}:\d\d(?:\s*(?:-|–|to)\s*\d{1,2}:\d\d)?")
# Identifiers are part of the entity, never a value: NR-7, KE-4850, P1, IP-3, 4.2.1, Tier 1,
# Rev C, CAPA-2025-055.
_CODE = re.compile(
    r"\b(?:[A-Za-z]{1,6}\d*-\d[A-Za-z0-9]*(?:-[A-Za-z0-9]+)*|[A-Z]{1,6}\d*-[A-Z0-9]+"
    r"|[A-Z]{1,6}\d+-\d+|[A-Z]{1,4}\d+[A-Z0-9]*|\d+\.\d+\.\d+"
    r"|(?i:tier|zone|rev|revision|phase|level|room|building|line|shift|version)"
    r"\s+(?:[A-Z]\b|\d+\b))"
)
_WEEKDAY_TEXT = (
    "monday tuesday wednesday thursday friday saturday sunday mon tue wed thu fri sat sun"
)
_WEEKDAYS = frozenset(_WEEKDAY_TEXT.split())
_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp", "usd": "usd", "eur": "eur", "gbp": "gbp",
             "sek": "sek", "sgd": "sgd", "dollar": "usd", "dollars": "usd", "euro": "eur",
             "euros": "eur", "pound": "gbp", "pounds": "gbp", "kronor": "sek", "kr": "sek"}  # fmt: skip
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6, "billion": 1e9,
          "bn": 1e9}  # fmt: skip
_WORD_NUMBERS = {w: str(i) for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"])}  # fmt: skip
_WORD_NUMBER = re.compile(rf"\b(?:{'|'.join(_WORD_NUMBERS)})\b", re.IGNORECASE)
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_FIGURE = re.compile(
    rf"(?P<sign>[$€£])?\s?(?P<num>{_NUMBER})(?!\d)(?P<range>\s*(?:-|–|to)\s*(?:{_NUMBER}))?"
    rf"\s*(?P<scale>thousand|million|billion|bn|mn|k|m)?\b\s*-?(?P<unit>%|percent\b|per cent\b|"
    rf"(?!(?:per|and|or|in|on|at|to|of|a|an|the|by|from|for|with|is|was|are|were)\b)"
    rf"[A-Za-z][A-Za-z-]*)?",
    re.IGNORECASE,
)
_CHANGE_AFTER = re.compile(
    r"^\s*(?:[a-z]+\s+)?(?:increase|decrease|rise|raise|drop|cut|growth|gain|reduction|"
    r"higher|lower|more|less|fall|decline|jump|hike)",
    re.IGNORECASE,
)
_CHANGE_BEFORE = re.compile(
    r"(?:\bby|\bup|\bdown|\bof|[+−])\s*(?:about|around|roughly|approximately|nearly|almost|some)?"
    r"\s*[$€£]?\s*$",
    re.IGNORECASE,
)
_BOUND_BEFORE = re.compile(
    r"\b(?:under|over|below|above|within|up to|at least|at most|less than|more than|fewer than|"
    r"no more than|shorter than|longer than|minimum|maximum|max|min|exceed\w*|between|"
    r"caps?|limit\w*)\s*(?:of\s+)?[$€£]?\s*$",
    re.IGNORECASE,
)
_BOUND_AFTER = re.compile(r"^\s*[a-z%]*\s*(?:or (?:more|less|longer|fewer)|and (?:above|over))")
_APPROX = re.compile(r"\b(?:about|around|roughly|approximately|nearly|almost|some|~)\s*[$€£]?\s*$")
_MODAL = re.compile(
    r"\b(?:would|could|might|may|propos\w*|plan\w*|target\w*|expect\w*|forecast\w*|estimat\w*|"
    r"budget\w*|if|should|will)\b",
    re.IGNORECASE,
)
_CLAUSE = re.compile(
    r"[;()\[\]\n]|,\s+(?=(?:and|but|while|whereas|which|up|down|so)\b)|\s(?:but|whereas)\s"
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# A table row ("Austin | 78744 | Manufacturing | 121"): its cells' meaning is in a header the
# row does not carry, so no measure can be told; it states no claim.
_TABLE_ROW = re.compile(r"\S\s*\|\s*\S")
# Numbers that are not figures: phone numbers, "24/7", "3/4", and references ("page 3",
# "section 7.4"); blanked (same length) before the figures are read.
_NOT_A_FIGURE = re.compile(
    r"\+\d[\d\s().-]{6,}\d|\(\d{2,4}\)\s*\d{3}[\s.-]\d{4}|\b\d{3}[\s.-]\d{3}[\s.-]\d{4}\b"
    r"|\b\d+/\d+\b"
    r"|\b(?i:page|pages|p\.|pp\.|section|sections|§|chapter|figure|fig\.|table|appendix|step)"
    r"\s*\d+(?:\.\d+)*(?:\s*(?:-|–|to)\s*\d+)?"
)
_WORD = re.compile(r"[a-zà-ÿ][a-zà-ÿ0-9-]*", re.IGNORECASE)
# Words that say nothing about what is measured: verbs of being and reporting, hedges, and
# the change and bound words (they set the figure's kind, not its measure).
_FILLER_TEXT = """
    was were is are be been being now currently current today total reported reports report
    said says according stood stands came comes reached reaches about around roughly
    approximately nearly almost some only also still again new rose risen fell fallen grew
    increased decreased dropped went from to up down by per each every full its the a an of in
    on at for with as this that these those has have had not than there here we our they their
    it's whose which while during after before since until you so can must
"""
_FILLER = frozenset(_FILLER_TEXT.split())
_PER_UNIT = re.compile(r"\s*\bper\s+(?:[\d,.]+\s+)?([a-z]+)", re.IGNORECASE)
_UNITLESS = frozenset({"", "per", "in", "on", "at", "to", "of", "a", "and", "or", "from", "by"})


@dataclass(frozen=True)
class Figure:
    """One value a claim states: its number (or a time or date), its kind (the unit), the
    words of what it measures, its period, and whether it is a change, a bound, a plan or an
    approximation."""

    value: str
    kind: str
    measure: frozenset[str]
    period: frozenset[str]
    change: bool = False
    bound: bool = False
    modal: bool = False
    approx: bool = False
    codes: frozenset[str] = frozenset()  # the entity: its clause's, and the sentence subject's
    names: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Claim:
    """A sentence of a source as the conflict rule reads it."""

    text: str
    evidence: tuple[str, ...]
    source: str
    codes: frozenset[str]
    names: frozenset[str]
    figures: tuple[Figure, ...]


def _normal_period(text: str) -> str:
    t = " ".join(text.lower().replace(",", " ").split())
    for word, n in _ORDINALS.items():
        t = re.sub(rf"\b{word}\s+quarter(?:\s+of)?", f"q{n}", t)
    for m in _MONTHS:
        t = re.sub(rf"\b{m[:3]}[a-z]*\.?", m, t)
    return t


def _entities(text: str) -> tuple[frozenset[str], frozenset[str], str]:
    """(codes, names, the text with codes and periods blanked out)."""
    codes = {c.lower() for c in _CODE.findall(text) if not _PERIOD.fullmatch(c)}
    blank = _CODE.sub(
        lambda m: m.group() if _PERIOD.fullmatch(m.group()) else " " * len(m.group()), text
    )
    names: set[str] = set()
    words = list(re.finditer(r"[A-Za-zÀ-ÿ][\wÀ-ÿ'-]*", blank))
    for i, m in enumerate(words):
        w = m.group().removesuffix("'s").rstrip("'")
        lower = w.lower()
        if (
            not w
            or not w[0].isupper()
            or lower in _MONTHS
            or lower in _CURRENCY
            or lower in STOP_WORDS
        ):
            continue
        if lower in _WEEKDAYS or _PERIOD.fullmatch(w):
            continue
        at_start = i == 0 or re.search(r"[.:;!?|*•-]\s*$", blank[: m.start()]) is not None
        following = i + 1 < len(words) and words[i + 1].group()[0].isupper()
        if at_start and not following and not w.isupper():
            continue  # a capitalised first word is a sentence's, not a name
        if len(lower) > 1 and lower not in _FILLER:
            names.add(lower)
    return frozenset(codes), frozenset(names), blank


def _number(num: str, scale: str | None) -> float:
    return float(num.replace(",", "")) * _SCALE.get((scale or "").lower(), 1.0)


def _kind(sign: str | None, unit: str | None, scale_word: str | None) -> tuple[str, str]:
    """(the figure's kind, the unit word when it is a noun that could also name the measure)."""
    if sign:
        return _CURRENCY[sign], ""
    u = (unit or "").lower()
    if u in ("%", "percent", "per cent"):
        return "%", ""
    if u in _CURRENCY:
        return _CURRENCY[u], ""
    if u in ("point", "points", "pp", "pts"):
        return "points", ""
    if not u or u in _UNITLESS or u in STOP_WORDS:
        return "number", ""
    stem = _stem(u)
    return stem, stem


def _stem(word: str) -> str:
    """A plural's singular, roughly: latches -> latch, cities -> city, weeks -> week."""
    if len(word) > 4 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _clauses(sentence: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for m in [*_CLAUSE.finditer(sentence), None]:
        end = len(sentence) if m is None else m.start()
        if sentence[pos:end].strip():
            out.append((pos, sentence[pos:end]))
        pos = len(sentence) if m is None else m.end()
    return out


def _measure_words(text: str, names: frozenset[str]) -> frozenset[str]:
    words = set()
    for w in _WORD.findall(text.lower()):
        w = w.strip("-")
        if len(w) < 3 or w in STOP_WORDS or w in _FILLER or w in names or w in _CURRENCY:
            continue
        if w in _SCALE or w in _MONTHS or w in _WEEKDAYS:
            continue
        words.add(_stem(w))
    return frozenset(words)


def _figures_of_clause(clause: str, names: frozenset[str]) -> tuple[list[Figure], frozenset[str]]:
    """The clause's figures (their measure and period not yet settled) and its measure words."""
    periods = [(m.start(), _normal_period(m.group())) for m in _PERIOD.finditer(clause)]
    # Periods and times are read first; what is left holds the clause's plain figures.
    rest = _PERIOD.sub(lambda m: " " * len(m.group()), clause)
    found: list[tuple[int, Figure]] = []
    for m in _TIME.finditer(rest):
        found.append(
            (m.start(), Figure(re.sub(r"\s", "", m.group()), "time", frozenset(), frozenset()))
        )
    rest = _TIME.sub(lambda m: " " * len(m.group()), rest)
    qualifiers: list[str] = []
    for m in _FIGURE.finditer(rest):
        if (figure := _figure(m, rest, qualifiers)) is not None:
            found.append((m.start(), figure))
    measured = _PER_UNIT.sub(" ", _FIGURE.sub(" ", rest))
    measure = _measure_words(measured, names) | frozenset(qualifiers)
    modal = _MODAL.search(clause) is not None
    found.sort(key=lambda t: t[0])
    starts = [start for start, _ in found]
    figures = []
    for i, (start, f) in enumerate(found):
        period = _period_of(periods, starts[i - 1] if i else -1, start, starts[i + 1 : i + 2])
        figures.append(replace(f, period=period, modal=modal))
    return figures, measure


def _period_of(
    periods: list[tuple[int, str]], previous: int, start: int, following: list[int]
) -> frozenset[str]:
    """A figure's period: the first one after it and before the next figure ("16 weeks in
    September", "USD 10.6 million in Q2 2024"), else the last one before it and after the
    figure before ("In September, the lead time was 20 weeks")."""
    end = following[0] if following else 10**9
    after = [p for at, p in periods if start < at < end]
    if after:
        return frozenset(after[:1])
    before = [p for at, p in periods if previous < at < start]
    return frozenset(before[-1:])


def _figure(m: re.Match[str], rest: str, qualifiers: list[str]) -> Figure | None:
    before = rest[: m.start()]
    glued = rest[: m.start("num")]
    if re.search(r"\bper\s*$", before) or re.search(r"[\w.,/-]$", glued):
        return None  # "per 1,000 units" belongs to the figure before it; "x3" is a name
    if m.group("range"):
        qualifiers.append(re.sub(r"\s", "", m.group()).lower())  # "0-80%": which range
        return None
    kind, noun = _kind(m.group("sign") or _sign_before(before), m.group("unit"), m.group("scale"))
    after = rest[m.end() :]
    per = _PER_UNIT.match(after)
    if per:
        kind = f"{kind}/{_stem(per.group(1).lower())}"
    return Figure(
        f"{_number(m.group('num'), m.group('scale')):g}",
        kind,
        frozenset({noun}) if noun else frozenset(),
        frozenset(),
        change=bool(_CHANGE_BEFORE.search(before) or _CHANGE_AFTER.match(after)),
        bound=bool(_BOUND_BEFORE.search(before) or _BOUND_AFTER.match(after)),
        approx=bool(_APPROX.search(before)),
    )


def _sign_before(before: str) -> str | None:
    m = re.search(r"\b(usd|eur|gbp|sek|sgd)\s*$", before, re.IGNORECASE)
    return m.group(1).lower() if m else None


def read_claim(text: str, evidence: Sequence[str], source: str = "") -> Claim | None:
    """A sentence's entities and figures; None when it states no figure (or is a table row)."""
    flat = " ".join(text.split())
    if _TABLE_ROW.search(flat):
        return None
    reading = _NOT_A_FIGURE.sub(lambda m: " " * len(m.group()), flat)
    codes, names, blank = _entities(reading)
    clauses = []
    for start, clause in _clauses(blank):
        original = reading[start : start + len(clause)]
        words = _WORD_NUMBER.sub(lambda m: _WORD_NUMBERS[m.group().lower()], clause)
        found, measure = _figures_of_clause(words, names)
        clause_codes = frozenset(c.lower() for c in _CODE.findall(original)) & codes
        clause_names = frozenset(w for w in names if w in original.lower())
        clauses.append((found, measure, clause_codes, clause_names))
    # The sentence's subject: the entities of its clauses that state no figure ("The NR-7,
    # which ..., costs X"; "Current firmware NR-OS 4.2.1 (released ...)").
    subject_codes = frozenset().union(*(c for f, _, c, _ in clauses if not f))
    subject_names = frozenset().union(*(n for f, _, _, n in clauses if not f))
    figures: list[Figure] = []
    said: frozenset[str] = frozenset()  # the measure words of the clauses so far
    when: frozenset[str] = frozenset()  # the period the sentence set so far
    for (_start, clause), (found, measure, clause_codes, clause_names) in zip(
        _clauses(blank), clauses, strict=True
    ):
        own = measure or said  # a clause that only gives a figure ("(Q2: 40.2%)") inherits
        said |= measure
        stated = {_normal_period(m.group()) for m in _PERIOD.finditer(clause)}
        for f in found:
            # A clause that names no period takes the one the sentence set before it ("In
            # Q3, revenue was X, up 11%"), never one a later parenthesis names.
            period = f.period or (frozenset() if stated else when)
            figures.append(
                replace(
                    f,
                    measure=own - f.measure,
                    period=period,
                    codes=clause_codes | subject_codes,
                    names=clause_names | subject_names,
                )
            )
        when = frozenset(stated) if len(stated) == 1 else when
    if not figures:
        figures = _date_as_value(blank, codes, names)
    if not figures:
        return None
    return Claim(flat, tuple(evidence), source, codes, names, tuple(figures))


def _date_as_value(blank: str, codes: frozenset[str], names: frozenset[str]) -> list[Figure]:
    """A sentence without figures whose one date is its fact ("NR-OS 4.2.1 was released on
    20 August 2024"): the date is the value, the rest of the sentence its measure."""
    dates = {_normal_period(m.group()) for m in _PERIOD.finditer(blank)}
    if len(dates) != 1:
        return []
    rest = _PERIOD.sub(" ", blank)
    measure = _measure_words(rest, names)
    if not measure:
        return []
    modal = _MODAL.search(rest) is not None
    return [
        Figure(dates.pop(), "date", measure, frozenset(), modal=modal, codes=codes, names=names)
    ]


def claims_of(text: str, evidence: Sequence[str], source: str = "") -> list[Claim]:
    """The claims of a passage, sentence by sentence, that state a figure."""
    found = (read_claim(s, evidence, source) for s in _SENTENCE.split(text))
    return [c for c in found if c is not None]
