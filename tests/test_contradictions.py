"""The contradiction rule on labelled pairs (``benchmarks/conflict_pairs.jsonl``): planted
conflicts (a fact from data/ or benchmarks/mixed with its value changed, in another source)
and look-alikes that are not conflicts (a margin next to a price rise, two meetings' times,
Q2 next to Q3, two products' prices, two sites, a bound, a plan). The pairs marked
``held_out`` were written after the rule was settled; ``benchmarks/contradictions.py``
reports precision and recall on both parts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deepsearcher.research.claims import claims_of
from deepsearcher.research.contradictions import conflict, find_contradictions
from deepsearcher.research.models import Evidence

PAIRS = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "benchmarks/conflict_pairs.jsonl")
    .read_text(encoding="utf-8")
    .splitlines()
]


def _flagged(pair: dict[str, Any]) -> bool:
    a = claims_of(pair["a"]["text"], ["A"])
    b = claims_of(pair["b"]["text"], ["B"])
    return any(conflict(x, y) for x in a for y in b)


@pytest.mark.parametrize("pair", [p for p in PAIRS if not p["conflict"]], ids=lambda p: p["id"])
def test_no_look_alike_is_a_conflict(pair: dict[str, Any]) -> None:
    assert not _flagged(pair), pair["why"]


@pytest.mark.parametrize(
    "pair", [p for p in PAIRS if p["conflict"] and not p.get("held_out")], ids=lambda p: p["id"]
)
def test_every_planted_conflict_is_found(pair: dict[str, Any]) -> None:
    assert _flagged(pair), pair["why"]


def test_the_held_out_planted_conflicts_found_do_not_drop() -> None:
    # Written after the rule was settled: 2 of 6 found when measured (the misses: a synonym
    # for the measure, a period on one side only, bounds, "plan of" read as a plan).
    held = [p for p in PAIRS if p["conflict"] and p.get("held_out")]
    assert len(held) == 6 and sum(_flagged(p) for p in held) >= 2


def test_the_set_holds_the_issues_look_alikes_and_both_kinds() -> None:
    whys = " ".join(p["why"] for p in PAIRS)
    assert "(issue #32)" in whys and "Q3 vs Q2" in whys and "two products' prices" in whys
    assert sum(p["conflict"] for p in PAIRS) >= 20 and sum(not p["conflict"] for p in PAIRS) >= 30


def test_the_same_source_is_never_a_conflict_with_itself() -> None:
    text = "Gross margin was 41.5%. Later in the same note: gross margin was 43.5%."
    ev = [Evidence("E1", text, "q3.docx"), Evidence("E2", "Gross margin was 43.5%.", "q3.docx")]
    assert find_contradictions([], ev) == []
    ev[1] = Evidence("E2", "Gross margin was 43.5%.", "flash.md")
    (found,) = find_contradictions([], ev)
    assert found.differs == "41.5% vs 43.5%" and found.subject == "gross margin"


def test_any_text_reads_without_error() -> None:
    # A real run once crashed here on a word that was only an apostrophe and an "s".
    odd = ["'s", "'", "s'", "—", "", "%", "$", "Q3", "1,2,3", "USD", "per", "09:00-", "-5 %"]
    folders = [Path(__file__).parents[1] / "data", Path(__file__).parents[1] / "benchmarks/mixed"]
    texts = odd + [
        p.read_text(encoding="utf-8", errors="replace")
        for folder in folders
        for p in sorted(folder.rglob("*"))
        if p.suffix in (".md", ".txt", ".csv", ".jsonl", ".json", ".html", ".eml")
    ]
    claims = [c for text in texts for c in claims_of(text, ["E1"], "x")]
    assert len(claims) > 50  # they are read, not skipped


def test_table_rows_phone_numbers_and_references_are_no_figures() -> None:
    """The look-alikes a scripted report over data/ flagged: a row of the office list against
    a row of the quarterly report's headcount table, a phone number against "24/7", a postcode
    against "section 3 (page 3)"; and a planted conflict in prose still found beside them."""
    ev = [
        Evidence(
            "E1",
            "AUS | Austin | United States | 8800 Caliche Ridge Road, Building C, Austin, TX "
            "78744 | Manufacturing (assembly and test) | 121 | Rafael Ortega | 2020",
            "office_locations.csv",
        ),
        Evidence("E2", "Manufacturing | 98\nSales and customer support | 41", "q3.docx"),
        Evidence(
            "E3",
            "Call the 24/7 security hotline as soon as you notice. Manufacturing and warranty "
            "are in section 3 (page 3).",
            "faq.jsonl",
        ),
        Evidence("E4", "24/7 security hotline: +1 503 555 0147", "it_security_policy.html"),
    ]
    assert find_contradictions([], ev) == []
    ev.append(Evidence("E5", "The Austin site employs 121 people in manufacturing.", "a.md"))
    ev.append(Evidence("E6", "The Austin site employs 140 people in manufacturing.", "b.md"))
    (found,) = find_contradictions([], ev)
    assert found.differs == "121 people vs 140 people"
