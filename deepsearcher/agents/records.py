"""A record's fields as loaders write JSON, CSV rows and key-value text ("label: value",
nested JSON as dotted labels: "sla.priorities.P2.response_minutes: 120"), and the checks that
read a lookup's answer against them: the field the lookup names (``labelled``,
``wrong_field``) and the key a record gives for another record's table (``rekeyed``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from deepsearcher.identifiers import CODE, codes_in, states
from deepsearcher.types import Hit

# A record's field as loaders write JSON, CSV rows and key-value text: "label: value".
_FIELD = re.compile(r"^\s*([^\W\d][\w .-]{0,39}?)\s*[:=]\s*(\S.*)$")
_MIN_FIELDS = 3


def _label_words(text: str) -> set[str]:
    return {w[:5] for w in re.split(r"[\W_]+", text.casefold()) if len(w) > 3}


def _lines(passage: str) -> list[tuple[str, str]]:
    """The "label: value" lines of ``passage``, as written."""
    return [
        (m.group(1).strip(), m.group(2).strip())
        for m in map(_FIELD.match, passage.splitlines())
        if m
    ]


def _fields(passage: str) -> list[tuple[set[str], str]]:
    """The "label: value" lines of ``passage``: each label's words and the folded value."""
    return [(_label_words(label), value.casefold()) for label, value in _lines(passage)]


def labelled(query: str, answer: str, passage: str) -> bool:
    """Whether ``answer`` is an identifier that ``passage`` gives as the value of a field
    named by a word of ``query``: "Who is the customer behind ticket SR-10482?" is answered
    "C-0117" by the line "customer_id: C-0117", and the next lookup finds the customer by it."""
    if not CODE.fullmatch(answer.strip()):
        return False
    wanted, value = _label_words(query), answer.strip().casefold()
    return any(words & wanted for words, text in _fields(passage) if value in text)


def wrong_field(query: str, answer: str, passage: str) -> bool:
    """Whether ``answer`` comes from another field of a record than the one ``query`` names:
    the record holds it only under labels sharing no word with the query, while another of
    its labels does. Asked "Who is the customer behind ticket SR-10482?", the local model
    answers "Anders Holm" from "assignee: Anders Holm" beside "customer_id: C-0117"."""
    fields = _fields(passage)
    if len(fields) < _MIN_FIELDS:
        return False
    wanted, value = _label_words(query), answer.strip().casefold()
    under = [words for words, text in fields if value in text]
    if not under or any(words & wanted for words in under):
        return False
    # The field the query names the record by ("ticket_id: SR-10482") names no answer.
    asked = query.casefold()
    return any(words & wanted for words, text in fields if text not in asked)


# A value a record keys another record's table by: one token ("P2", "gold", "EU-North").
_KEY = re.compile(r"[\w-]{1,24}")


@dataclass(frozen=True)
class Rekey:
    """The key a lookup's record gives for another record's table: the record (``hit``)
    names ``ident`` and says ``field``: ``key``; the value wanted is under ``label``."""

    label: str
    hit: Hit
    ident: str
    field: str
    key: str


def rekeyed(query: str, answer: str, hit: Hit, hits: Sequence[Hit]) -> Rekey | None:
    """The label ``answer`` should have been read under, when the lookup's record keys the
    table it came from by another value: asked "How many minutes do we have to respond to
    ticket SR-10431 under the SLA?", a 1.5B model read "sla.priorities.P3.response_minutes:
    480" where the ticket's record (a passage of ``hits`` naming SR-10431) says "priority:
    P2"; the label wanted is "sla.priorities.P2.response_minutes". None when the answer's
    passage names the lookup's identifier itself, the answer is not a dotted field's value,
    or no single field of the record names the key's parent ("priorities" ~ "priority")."""
    codes, value = codes_in(query), answer.strip().casefold()
    if not codes or any(states(hit.text, c) for c in codes):
        return None
    record = next((h for h in hits if h is not hit and any(states(h.text, c) for c in codes)), None)
    label = next(
        (lab for lab, text in _lines(hit.text) if text.casefold() == value and "." in lab), None
    )
    if record is None or label is None:
        return None
    parts = label.split(".")
    fields = _lines(record.text)
    ident = next((v for _lab, v in fields if any(states(v, c) for c in codes)), codes[0])
    for i in range(1, len(parts) - 1):
        parent = _label_words(parts[i - 1])
        keys = [(lab, v) for lab, v in fields if _label_words(lab) & parent and _KEY.fullmatch(v)]
        if len(keys) == 1 and keys[0][1].casefold() != parts[i].casefold():
            field, key = keys[0]
            return Rekey(".".join([*parts[:i], key, *parts[i + 1 :]]), record, ident, field, key)
    return None


def field_value(label: str, hits: Sequence[Hit]) -> tuple[Hit, str] | None:
    """The first of ``hits`` with a line for the field ``label`` (any case), and its value."""
    wanted = label.casefold()
    for h in hits:
        for lab, text in _lines(h.text):
            if lab.casefold() == wanted:
                return h, text
    return None
