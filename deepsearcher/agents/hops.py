"""A lookup's short answer, extracted from the round's passages, and the query of a lookup
that waits for earlier answers.

Extraction is the step small models do well: one lookup, the passages already read (the
prompt comes after them, so the server reuses what it read for the verdicts), a short answer
and the number of the passage that states it. The answer is only taken when a passage holds
it: a name or number no passage contains is the model's, not the documents'.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from deepsearcher.agents import prompts
from deepsearcher.agents.attribution import Attributor
from deepsearcher.agents.grounding import ground, translated
from deepsearcher.agents.parsing import copies_example, parse_queries
from deepsearcher.agents.plan import restates
from deepsearcher.agents.queries import QUERIES_SCHEMA, standalone
from deepsearcher.agents.records import labelled, wrong_field
from deepsearcher.identifiers import codes_in, states
from deepsearcher.llm import JsonSchema
from deepsearcher.prompting import (
    OutputParseError,
    ask,
    escape_document,
    json_object,
    messages_for,
)
from deepsearcher.run_context import RunContext
from deepsearcher.types import Hit

logger = logging.getLogger(__name__)

_ANSWER = {"answer": {"type": "string"}, "document": {"type": "integer"}}
EXTRACT_SCHEMA = JsonSchema(
    "extracted",
    {
        "type": "object",
        "properties": _ANSWER,
        "required": ["answer", "document"],
        "additionalProperties": False,
    },
)
EXTRACT_JUDGE_SCHEMA = JsonSchema(
    "extracted",
    {
        "type": "object",
        "properties": {**_ANSWER, "useful": {"type": "array", "items": {"type": "integer"}}},
        "required": ["answer", "document", "useful"],
        "additionalProperties": False,
    },
)

# Replies that mean "not found" however a model words them.
_NOT_FOUND = re.compile(
    r"^(?:|none|null|n/?a|unknown|not (?:found|stated|given|mentioned|available)|no answer"
    r"|the documents? do(?:es)? not (?:state|say|mention).*|-+|\.+)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Fact:
    """A lookup's answer for the answer step: ``hit`` is the passage it came from."""

    query: str
    answer: str
    hit: Hit


@dataclass(frozen=True)
class Extracted:
    """A lookup's answer and the passage that holds it (``hit`` None: not found), and the
    passages (1-based) the call named useful: its YES verdicts (None: it gave none)."""

    answer: str
    hit: Hit | None
    useful: frozenset[int] | None = None


def parse_extracted(text: str) -> tuple[str, int]:
    """``(answer, document number)`` from a reply; ``("", 0)`` for "not found"."""
    answer, n, _ = parse_extracted_judged(text)
    return answer, n


def parse_extracted_judged(text: str) -> tuple[str, int, frozenset[int] | None]:
    """``(answer, document number, useful documents)`` from a reply; ``useful`` is None when
    the reply names none (a missing key, or not a list of numbers)."""
    data = json_object(text)
    answer, n = _answer_of(data)
    return answer, n, _useful(data.get("useful"))


def _useful(value: object) -> frozenset[int] | None:
    if not isinstance(value, list):
        return None
    numbers = set()
    for item in value:
        if isinstance(item, int) and not isinstance(item, bool):
            numbers.add(item)
        elif isinstance(item, str) and (m := re.fullmatch(r"\s*\[?\s*(\d+)\s*\]?\s*", item)):
            numbers.add(int(m.group(1)))
        else:
            return None
    return frozenset(numbers)


def _answer_of(data: dict[str, Any]) -> tuple[str, int]:
    answer = data.get("answer")
    if answer is None:  # a renamed key: the one string value
        strings = [v for v in data.values() if isinstance(v, str)]
        answer = strings[0] if len(strings) == 1 else None
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        answer = str(answer)
    if not isinstance(answer, str):
        raise OutputParseError('expected {"answer": "<the short answer>", "document": <n>}')
    answer = " ".join(answer.split()).strip(" .\"'")
    if copies_example(answer) or answer in ("...", "…"):
        raise OutputParseError("the answer copies the instructions; give the answer itself")
    if _NOT_FOUND.match(answer):
        return "", 0
    return answer, _document_number(data)


def _document_number(data: dict[str, object]) -> int:
    for key in ("document", "documents", "doc", "n", "source"):
        value = data.get(key)
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, str) and (m := re.search(r"\d+", value)):
            return int(m.group(0))
    return 0


_MONTH = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|\d", re.IGNORECASE
)
_NUMBER_WORD = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|twenty|"
    r"thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|dozen|"
    r"half|none|once|twice|daily|weekly|monthly|yearly|annually)\b",
    re.IGNORECASE,
)


def fits(query: str, answer: str, passage: str = "") -> bool:
    """Whether ``answer`` is the kind of thing ``query`` asks for, where the question word
    says so: a person or organisation has no digits (unless ``passage`` gives it as the value
    of a field the query names: ``labelled``), a date has a digit or a month, an amount a
    number. A 1.5B model asked "Who owns the CAPA…?" answers "Aurora IP-3"."""
    head = query.strip().casefold()
    if re.match(r"(?:who|whom|whose)\b", head):
        return not re.search(r"\d", answer) or labelled(query, answer, passage)
    if re.match(r"(?:when|what (?:year|date|day|month))\b", head):
        return bool(_MONTH.search(answer))
    if re.match(
        r"(?:how (?:many|much|long|often|old|far)|what (?:percentage|share|number))\b", head
    ):
        return bool(_NUMBER_WORD.search(answer))
    if _PLACE_ASKED.match(head):
        return is_place(answer) and site_of(answer, passage) is None
    return True


# "Where…", "What is the site/plant/office…": the lookup wants a place.
_SITE = (
    r"(?:site|plant|factory|facility|office|warehouse|depot|headquarters|campus|branch|"
    r"city|town|country|location|place|venue|address|port|airport)"
)
_PLACE_ASKED = re.compile(
    rf"(?:where|(?:(?:who or )?what|which|in which|at which)\s+(?:(?:is|was|are|were)\s+)?(?:the\s+)?"
    rf"{_SITE})\b"
)
# A company's legal form: "Kuopio Metal Oy" is who a dispute is with, not where it is heard.
_LEGAL_FORM = re.compile(
    r"\b(?:AB|Oy|Oyj|OÜ|AS|A/S|ApS|ASA|GmbH|AG|KG|Inc|Ltd|LLC|LLP|plc|PLC|Corp|Corporation|"
    r"S\.?A|S\.?p\.?A|S\.?r\.?l|B\.?V|N\.?V|Pty|K\.?K|Co)\.?$"
)
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_DAY_MONTH = re.compile(
    r"\b\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|"
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\s+\d{1,2}\b",
    re.IGNORECASE,
)


def is_place(answer: str) -> bool:
    """Whether ``answer`` may name a place: not a bare quantity ("12,000" for where goods
    go), not a date ("6 June 2025" for where sensors are going), not a company by its legal
    form ("Kuopio Metal Oy" for where a dispute is arbitrated)."""
    text = answer.strip()
    if re.fullmatch(r"\d[\d.,\s]*(?:%|pcs|units?)?", text, re.IGNORECASE):
        return False
    if _ISO_DATE.search(text) or _DAY_MONTH.search(text):
        return False
    return not _LEGAL_FORM.search(text.rstrip(" ,"))


def site_of(answer: str, passage: str) -> str | None:
    """The place ``passage`` puts ``answer``'s site in, when ``answer`` is the site's owner:
    "assembled at the Northwind Robotics plant in Austin, Texas" gives "Austin, Texas" for a
    lookup answered "Northwind Robotics". None when the passage says no such thing."""
    if not answer.strip() or not passage:
        return None
    # The owner and the site noun in any case; the place capitalised, as names are written.
    pattern = (
        rf"(?i:{re.escape(answer.strip())}(?:'s)?\s+(?:[\w-]+\s+){{0,2}}?{_SITE}s?\s+"
        r"(?:in|at|near|outside)\s+)([A-Z][\w'-]*(?:(?:,\s*|\s+)[A-Z][\w'-]*){0,3})"
    )
    found = re.search(pattern, passage)
    return found.group(1) if found else None


def placed(answer: str, hit: Hit, hits: Sequence[Hit]) -> tuple[Hit, str]:
    """The place and its passage for a site lookup answered with the site's owner: ``hit``
    when it places the owner's site, else the first of ``hits`` that does; ``(hit, answer)``
    unchanged when none does."""
    for candidate in (hit, *hits):
        place = site_of(answer, candidate.text)
        if place:
            return candidate, place
    return hit, answer


def _table_rows(text: str) -> list[list[str]]:
    """The rows of the tables in ``text`` as loaders write them ("a | b | c"), first the
    header, each as its cells."""
    return [
        [c.strip() for c in line.split("|")] for line in text.splitlines() if line.count("|") >= 2
    ]


def same_row(query: str, answer: str, hit: Hit, hits: Sequence[Hit]) -> tuple[Hit, str]:
    """For a lookup naming an identifier ("the part stored in bin B-14-03") answered with a
    table cell from rows that do not state it: the same column's cell of the row that does,
    and its passage (``hit``'s table first, then one of ``hits`` with the same header). A
    1.5B model read the supplier from the row above; ``(hit, answer)`` unchanged otherwise."""
    codes, value = codes_in(query), answer.strip().casefold()
    rows = _table_rows(hit.text)
    if not codes or not rows or not value:
        return hit, answer

    def named(row: list[str]) -> bool:
        return any(states(" | ".join(row), code) for code in codes)

    holding = [row for row in rows if value in (c.casefold() for c in row)]
    if not holding or any(named(row) for row in holding):
        return hit, answer
    width, header = len(holding[0]), rows[0]
    column = [c.casefold() for c in holding[0]].index(value)
    for candidate in (hit, *hits):
        theirs = _table_rows(candidate.text)
        if candidate is not hit and (not theirs or theirs[0] != header):
            continue
        for row in theirs:
            if len(row) == width and named(row) and row[column]:
                return candidate, row[column]
    return hit, answer


# A lookup that offers its answers ("Which was founded first, X or Y?") is answered with words
# it holds; "who or what" offers none.
_ALTERNATIVES = re.compile(
    r"\b(?:whether|either|which of)\b|\b(?!who\b)[\w-]+,? or (?!what\b)[\w-]+", re.IGNORECASE
)
_ECHO_STOP = frozenset(["a", "an", "the", "of", "in", "at", "on", "for", "to", "and", "or",
                       "is", "are", "was", "were", "be", "by", "with", "s"])  # fmt: skip


def _echo_words(text: str) -> set[str]:
    words = re.findall(
        r"[^\W_]+(?:-[^\W_]+)*", text.casefold().replace("'s", " ").replace("’s", " ")
    )
    return {w for w in words if w not in _ECHO_STOP}


def echoes(answer: str, *asked: str) -> bool:
    """Whether ``answer`` adds nothing to what was asked: each of its words is in the lookup or
    the question. A 1.5B model answers "If Gallu is a demon Lilu is what?" with "Lilu", and
    the site where the NR-7 is assembled with "the site's office manager"."""
    if any(_ALTERNATIVES.search(a) for a in asked):
        return False
    words = _echo_words(answer)
    return bool(words) and words <= set().union(*(_echo_words(a) for a in asked))


async def extract(
    ctx: RunContext,
    documents: str,
    hits: Sequence[Hit],
    query: str,
    question: str | None = None,
    asked: str = "",
    attributor: Attributor | None = None,
) -> Extracted:
    """The lookup's answer from the round's passages; with ``question``, the call also names
    the passages useful for the lookup or the question (the round's verdicts). LLM failures
    and a spent budget raise; an answer no passage holds, of the wrong kind, from a record's
    field the lookup does not name, or that only repeats the lookup or the question
    ``asked`` comes back as not found. With ``attributor``, an answer in another script than
    the passage it names is taken when that passage is the one it matches best."""
    if question is None:
        task = prompts.EXTRACT.format(query=escape_document(query))
        schema, parse = EXTRACT_SCHEMA, parse_extracted_judged
    else:
        task = prompts.EXTRACT_JUDGE.format(
            query=escape_document(query), question=escape_document(question)
        )
        schema, parse = EXTRACT_JUDGE_SCHEMA, parse_extracted_judged
    prompt = prompts.over_documents(documents, task)
    answer, n, useful = await ask(ctx, messages_for(prompt), parse, schema=schema)
    if useful is not None:
        useful = frozenset(i for i in useful if 1 <= i <= len(hits))
    if not answer or echoes(answer, query, asked):
        logger.debug("lookup %r: answer %r not taken, empty or repeating the lookup", query, answer)
        return Extracted("", None, useful)
    hit = ground(answer, hits, n)
    if hit is None and attributor is not None:
        hit = await translated(answer, hits, n, attributor)
    if hit is not None and _PLACE_ASKED.match(query.strip().casefold()):
        # The owner named for the site ("Northwind Robotics" for the plant): the words of the
        # passage that puts the owner's site somewhere give the place. The model often cites
        # the page naming the owner (a header) rather than the one naming the plant.
        hit, answer = placed(answer, hit, hits)
    if hit is not None:
        # A table's cell from another row than the one the lookup's identifier names: the
        # model found the column and read the row above or below.
        hit, answer = same_row(query, answer, hit, hits)
    if hit is None or not fits(query, answer, hit.text) or wrong_field(query, answer, hit.text):
        why = "no passage holds it" if hit is None else "not what the lookup asks for"
        logger.debug("lookup %r: answer %r not taken, %s", query, answer, why)
        return Extracted("", None, useful)
    return Extracted(answer, hit, useful)


async def reflect(
    ctx: RunContext,
    documents: str,
    query: str,
    question: str,
    searched: Sequence[str],
    max_gaps: int,
) -> list[str]:
    """Other queries for the lookup ``query`` that found nothing in the round's passages
    (asked after them: the server has read them already), none restating what was searched.
    LLM failures and a spent budget raise."""
    prompt = prompts.over_documents(
        documents,
        prompts.REFLECT.format(
            max_gaps=max_gaps,
            query=escape_document(query),
            question=escape_document(question),
            queries=escape_document(str(list(searched))),
        ),
    )
    gaps = await ask(
        ctx,
        messages_for(prompt),
        partial(parse_queries, max_items=max_gaps),
        schema=QUERIES_SCHEMA,
    )
    fresh = [
        standalone(g, query) for g in gaps if not any(restates(g, q) for q in [*searched, query])
    ]
    return list(dict.fromkeys(fresh))[:max_gaps]


def resolve(question: str, answers: dict[int, str]) -> str:
    """A dependent lookup's query: each ``#k`` replaced by lookup k's answer."""
    return re.sub(r"#(\d)", lambda m: answers.get(int(m.group(1)), m.group(0)), question)
