"""Hops, attribution and one-shot cost, end to end: the scripted LLM server through the real
``openai`` client, real Milvus Lite and the packaged embedder. The server plays the small
models the issue describes: one that answers only the first hop, one that writes no [n], one
that writes "is [3]" where the fact belongs, and one whose judge keeps every passage."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from deepsearcher.config import Settings
from deepsearcher.types import Answer
from tests.llm_server import ScriptedLLMServer, outside_documents, task_of
from tests.sample_docs import write_docs

POLICY = "In which office is the person who approved version 3.0 of the Calibration Traceability Policy based?"
CHAIN_DOCS = {
    "policy.md": (
        "# Calibration Traceability Policy\n\nVersion 3.0 of the Calibration Traceability "
        "Policy was approved by Johan Lindqvist on 2 May 2025. It replaces version 2.4."
    ),
    "staff.md": (
        "# Staff directory\n\nJohan Lindqvist works in the Göteborg office, extension 4471.\n\n"
        "Maja Berg works in the Umeå office, extension 4410."
    ),
    "canteen.md": "# Canteen\n\nThe canteen in Umeå opens at 11:00 and serves vegetarian food.",
    "roadmap.md": "# Roadmap\n\nThe IP-4 pump launches in June 2025 after verification.",
}


RECORDS = {
    "tickets.jsonl": (
        '{"ticket_id": "SR-10482", "customer_id": "C-0117", "device": "Lumen PM-2"}\n'
        '{"ticket_id": "SR-10483", "customer_id": "C-0101", "device": "Aurora IP-3"}\n'
    ),
    "crm.json": (
        '[{"customer_id": "C-0117", "name": "Lakeside Clinic", '
        '"account_manager": "Elin Forsberg"}, {"customer_id": "C-0101", '
        '"name": "Nordic Care", "account_manager": "Karl Dahl"}]'
    ),
}


def _settings(settings: Settings, server: ScriptedLLMServer, **query: Any) -> Settings:
    s = settings.model_copy(deep=True)
    s.llm.base_url = server.base_url
    s.llm.model = "scripted"
    s.llm.timeout_s = 5
    s.llm.max_retries = 1
    for key, value in query.items():
        setattr(s.query, key, value)
    return s


@pytest.fixture
def chain(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> Any:
    """A searcher over a small folder where the approver and his office are in two files, and
    a server whose lookups answer "Johan Lindqvist", then "Göteborg"."""
    ds = make_searcher(_settings(settings, llm_server, max_iter=3))
    ds.load([write_docs(tmp_path / "chain", CHAIN_DOCS)], "docs")

    def lookup(answer: str) -> Any:
        def reply(req: dict[str, Any]) -> str:
            text = req["messages"][-1]["content"]
            docs = re.findall(r"<document[^>]*>\n(.*?)\n</document>", text, re.S)
            n = next((i for i, d in enumerate(docs, start=1) if answer in d), 0)
            reply = {"answer": answer if n else "", "document": n}
            if '"useful"' in outside_documents(text):  # query.rerank "lookup": its verdicts
                every = llm_server.keep_everything
                reply["useful"] = [i for i in range(1, len(docs) + 1) if every or i == n]
            return json.dumps(reply)

        return reply

    def first_hop(req: dict[str, Any]) -> bool:
        return task_of(
            req
        ) == "extract" and "Lookup: Who or what is the person" in outside_documents(
            req["messages"][-1]["content"]
        )

    llm_server.add_rule(lambda r: task_of(r) == "extract", lookup("Göteborg"))
    llm_server.add_rule(first_hop, lookup("Johan Lindqvist"))
    return ds


def _run(ds: Any, question: str, **options: Any) -> tuple[Answer, list[Any]]:
    async def go() -> list[Any]:
        return [e async for e in ds.astream(question, **options)]

    events = asyncio.run(go())
    return events[-1].answer, events


def _prompt(req: dict[str, Any]) -> str:
    return str(req["messages"][-1]["content"])


# -- hops, not paraphrases --------------------------------------------------------------------


def test_a_dependent_hop_is_searched_with_the_answer_it_depends_on(
    chain: Any, llm_server: ScriptedLLMServer
) -> None:
    answer, events = _run(chain, POLICY)
    plan = next(e for e in events if e.type == "plan")
    assert plan.depends_on == [[], [1]] and plan.steps[1] == "In which office is #1 based?"
    rounds = [e.queries for e in events if e.type == "sub_queries"]
    assert rounds[1] == ["In which office is Johan Lindqvist based?"]
    # The second round is searched after the first hop has its answer, not beside it.
    order = [e.type for e in events]
    first_hop = next(i for i, e in enumerate(events) if e.type == "hop")
    assert first_hop < [i for i, t in enumerate(order) if t == "sub_queries"][1]
    assert [(h.answer, h.status) for h in answer.hops] == [
        ("Johan Lindqvist", "answered"),
        ("Göteborg", "answered"),
    ]
    assert answer.hops[0].source and answer.hops[0].source.endswith("policy.md")
    assert answer.hops[1].source and answer.hops[1].source.endswith("staff.md")
    # The answer is written from the hops' answers and their passages.
    (answer_call,) = [r for r in llm_server.requests if task_of(r) == "answer"]
    prompt = _prompt(answer_call)
    assert "In which office is Johan Lindqvist based? Göteborg [" in prompt
    assert "Johan Lindqvist on 2 May 2025" in prompt and "Göteborg office" in prompt
    d = answer.to_dict()
    assert [h["answer"] for h in d["hops"]] == ["Johan Lindqvist", "Göteborg"]
    assert d["hops"][1]["depends_on"] == [1] and d["hops"][1]["n"] is not None


def test_an_answer_that_stops_at_the_first_hop_is_repaired(
    chain: Any, llm_server: ScriptedLLMServer
) -> None:
    llm_server.answer_style = "first-hop"  # "The answer is Johan Lindqvist [n]." every time
    answer, _events = _run(chain, POLICY)
    assert "Göteborg" in answer.answer and "Johan Lindqvist" in answer.answer
    assert answer.stream_replaced and answer.to_dict()["stream_replaced"] is True
    assert any(n.startswith("answer repaired") and "last lookup" in n for n in answer.notes)
    # Asked once more (the conversation so far as its prefix) before the finding was added.
    again = [r for r in llm_server.requests if "cannot be used as it is" in _prompt(r)]
    assert len(again) == 1 and "does not state what the question asks" in _prompt(again[0])
    assert any(s.source.endswith("staff.md") for s in answer.sources)


def test_an_answer_asked_again_that_states_the_last_hop_is_taken(
    chain: Any, llm_server: ScriptedLLMServer
) -> None:
    llm_server.answer_style = "first-hop"
    llm_server.add_rule(
        "cannot be used as it is",
        lambda req: "Johan Lindqvist approved it [1]; he works in the Göteborg office [2].",
    )
    answer, _ = _run(chain, POLICY)
    assert answer.answer.startswith("Johan Lindqvist approved it")
    assert any("written again" in n for n in answer.notes)


def test_a_chain_goes_on_through_a_record_identifier(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    # Exports name a ticket's customer by its id; the id is what finds the customer's record.
    ds = make_searcher(_settings(settings, llm_server, max_iter=3))
    ds.load([write_docs(tmp_path / "records", RECORDS)], "docs")

    def reply(req: dict[str, Any]) -> str:
        text = _prompt(req)
        lookup = re.search(r"Lookup: (.*)", outside_documents(text))
        wanted = "Elin Forsberg" if lookup and "C-0117" in lookup.group(1) else "C-0117"
        found = re.findall(r"<document[^>]*>\n(.*?)\n</document>", text, re.S)
        n = next((i for i, d in enumerate(found, start=1) if wanted in d), 0)
        return json.dumps({"answer": wanted, "document": n, "useful": [n] if n else []})

    llm_server.add_rule(lambda r: task_of(r) == "extract", reply)
    answer, _events = _run(
        ds, "Who is the account manager for the customer behind ticket SR-10482?"
    )
    assert [(h.answer, h.status) for h in answer.hops] == [
        ("C-0117", "answered"),
        ("Elin Forsberg", "answered"),
    ]
    assert answer.hops[1].query == "Who is the account manager for C-0117?"


def _two_lookups(first: str, then: str, second: str, page: str = "") -> Any:
    """An extraction reply that answers ``first`` (from a passage holding ``page`` too) until
    the lookup names ``then``, and ``second`` after."""

    def reply(req: dict[str, Any]) -> str:
        text = _prompt(req)
        lookup = re.search(r"Lookup: (.*)", outside_documents(text))
        later = bool(lookup and then in lookup.group(1))
        wanted, within = (second, "") if later else (first, page)
        found = re.findall(r"<document[^>]*>\n(.*?)\n</document>", text, re.S)
        n = next((i for i, d in enumerate(found, start=1) if wanted in d and within in d), 0)
        return json.dumps({"answer": wanted, "document": n, "useful": [n] if n else []})

    return reply


def _assert_chain(answer: Answer, chain: list[str], first_source: str) -> None:
    assert [(h.answer, h.status) for h in answer.hops] == [(a, "answered") for a in chain]
    assert chain[0] in answer.hops[1].query
    assert answer.hops[0].source and answer.hops[0].source.endswith(first_source)


@pytest.mark.parametrize(
    "page", [pytest.param("plant", id="the plant's page"), pytest.param("Rev C", id="the cover")]
)
def test_a_site_answered_with_its_owner_goes_on_from_the_place(
    tmp_path: Path,
    settings: Settings,
    make_searcher: Any,
    llm_server: ScriptedLLMServer,
    page: str,
) -> None:
    # The local model, asked for the site, names the company whose plant it is, citing the
    # page that places the plant or a cover whose header only names the company.
    docs = {
        "spec.md": "# NR-7 specification\n\nEvery NR-7 is assembled and tested at the "
        "Northwind Robotics plant in Austin, Texas. Each robot completes a burn-in.",
        "cover.md": "Northwind Robotics | NR7-SPEC-0012 Rev C\n\nNR-7 product "
        "specification, issued 30 August 2024. Product manager: Sofia Marquez.",
        "offices.csv": "city,office_manager\nAustin,Rafael Ortega\nPortland,Grace Liu\n",
    }
    ds = make_searcher(_settings(settings, llm_server, max_iter=3))
    ds.load([write_docs(tmp_path / "site", docs)], "docs")
    reply = _two_lookups("Northwind Robotics", "Austin", "Rafael Ortega", page)
    llm_server.add_rule(lambda r: task_of(r) == "extract", reply)
    answer, _events = _run(ds, "Who is the office manager at the site where the NR-7 is assembled?")
    _assert_chain(answer, ["Austin, Texas", "Rafael Ortega"], "spec.md")


def test_a_cell_read_from_the_wrong_row_goes_on_from_the_row_the_identifier_names(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    # The local model finds the supplier column and reads the row above the bin asked for.
    docs = {
        "parts.csv": "part_no,description,supplier,bin\n"
        "NM-35472,Valve grey,Tartu Plast OÜ,B-19-11\n"
        "NM-40213,Pressure sensor PS-220,Shenzhen Huajing Sensor,B-14-03\n"
        "NM-35586,Fuse small,Rheinform GmbH,B-09-10\n",
        "agreement.md": "# Supply agreement PS-220\n\nSupplier: Shenzhen Huajing Sensor. "
        "Disputes are settled by the Shanghai International Arbitration Center.",
    }
    ds = make_searcher(_settings(settings, llm_server, max_iter=3))
    ds.load([write_docs(tmp_path / "parts", docs)], "docs")
    arbitration = "Shanghai International Arbitration Center"
    reply = _two_lookups("Tartu Plast OÜ", "Shenzhen", arbitration)
    llm_server.add_rule(lambda r: task_of(r) == "extract", reply)
    answer, _events = _run(
        ds,
        "Where would a dispute with the supplier of the part stored in bin B-14-03 be arbitrated?",
    )
    _assert_chain(answer, ["Shenzhen Huajing Sensor", arbitration], "parts.csv")


def test_an_answer_whose_number_is_only_a_citation_marker_is_repaired(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    # The local model wrote "to 8 °C [2]" for the lookup's "2–8 °C": the marker's 2 is no
    # part of the range.
    docs = {
        "standup.md": "# Ops stand-up\n\nThe held-up HJ-5521 sensors go to Göteborg.",
        "handbook.md": "# Warehouse handbook, Göteborg\n\nSensors are stored at 2–8 °C.",
        "kpi.md": "# KPIs\n\nGöteborg shipped 3,412 orders in January.",
    }
    ds = make_searcher(_settings(settings, llm_server, max_iter=3))
    ds.load([write_docs(tmp_path / "cold", docs)], "docs")
    llm_server.add_rule(
        lambda r: task_of(r) == "extract", _two_lookups("Göteborg", "Göteborg", "2–8 °C")
    )
    llm_server.add_rule(
        lambda r: task_of(r) == "answer",
        "The range to keep where the sensors go, Göteborg, is up to 8 °C [2].",
    )
    answer, _events = _run(
        ds, "What temperature range must be kept where the held-up HJ-5521 sensors are going?"
    )
    assert [h.answer for h in answer.hops] == ["Göteborg", "2–8 °C"]
    assert "2–8 °C" in answer.answer, answer.answer
    assert any(n.startswith("answer repaired") for n in answer.notes), (answer.answer, answer.notes)


def test_a_first_lookup_found_by_reflection_still_leads_to_the_next(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    # The first reading finds nothing and names no passage useful; reflection's queries find
    # the customer; the account manager is then searched in the last round allowed. Before,
    # the dependent lookup was skipped (its lookup looked finished while searched again) and
    # the passages judged away in the first reading stopped the later readings.
    ds = make_searcher(_settings(settings, llm_server, max_iter=3))
    ds.load([write_docs(tmp_path / "records", RECORDS)], "docs")
    readings: list[str] = []

    def reply(req: dict[str, Any]) -> str:
        text = _prompt(req)
        lookup = re.search(r"Lookup: (.*)", outside_documents(text))
        readings.append(lookup.group(1) if lookup else "")
        if len(readings) == 1:
            return '{"answer": "", "document": 0, "useful": []}'
        wanted = "Elin Forsberg" if "C-0117" in readings[-1] else "C-0117"
        found = re.findall(r"<document[^>]*>\n(.*?)\n</document>", text, re.S)
        n = next((i for i, d in enumerate(found, start=1) if wanted in d), 0)
        return json.dumps({"answer": wanted, "document": n, "useful": [n] if n else []})

    llm_server.add_rule(lambda r: task_of(r) == "extract", reply)
    gaps = {"queries": ["What is the customer ID for ticket SR-10482?"]}
    llm_server.add_rule(lambda r: task_of(r) == "reflect", json.dumps(gaps))
    answer, _events = _run(
        ds, "Who is the account manager for the customer behind ticket SR-10482?"
    )
    assert [task_of(r) for r in llm_server.requests] == [
        "plan", "extract", "reflect", "extract", "extract", "answer"
    ]  # fmt: skip
    assert [(h.answer, h.status) for h in answer.hops] == [
        ("C-0117", "answered"),
        ("Elin Forsberg", "answered"),
    ]
    assert answer.iterations == 3 and "Elin Forsberg" in answer.answer


def test_restated_lookups_are_not_searched(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    # Two parts, so the plan is asked (a one-part question is its own plan).
    q = "What was the May 2025 yield of production line 2 in Västerås, and what was it in June?"
    paraphrases = [
        q.replace(" in ", " at "),
        q.replace("?", "'s factory?"),
        q.replace("?", " plant?"),
    ]
    llm_server.add_rule("TASK: plan", json.dumps({"steps": paraphrases}))
    ds = make_searcher(_settings(settings, llm_server, max_iter=2))
    ds.load(
        [
            write_docs(
                tmp_path / "d", {"yield.md": "Line 2 in Västerås yielded 97.1 % in May 2025."}
            )
        ],
        "docs",
    )
    answer, events = _run(ds, q)
    assert answer.sub_queries == [q]
    plan = next(e for e in events if e.type == "plan")
    assert plan.steps == [q] and plan.dropped == paraphrases


# -- one-shot cost when one shot suffices ---------------------------------------------------


def test_a_question_one_retrieval_answers_costs_two_calls_over_one_prefix(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    ds = make_searcher(_settings(settings, llm_server))
    ds.load([write_docs(tmp_path / "d")], "docs")
    answer, events = _run(ds, "How often do administrator passwords change?")
    # One lookup: no plan call; the lookup's call gives the verdicts (query.rerank "lookup").
    tasks = [task_of(r) for r in llm_server.requests]
    assert tasks == ["extract", "answer"], tasks
    assert answer.usage.llm_calls == 2 and answer.iterations == 1
    assert next(e for e in events if e.type == "plan").steps == [answer.question]
    verdicts = [e for e in events if e.type == "verdict"]
    assert verdicts and any(v.kept for v in verdicts) and not all(v.kept for v in verdicts)
    assert answer.chunks_kept == sum(v.kept for v in verdicts)
    # The lookup and the answer read the same passages first: a server with prefix caching
    # reads them once.
    extract, write = (_prompt(r) for r in llm_server.requests)
    head = extract[: extract.index("TASK:")]
    assert head.startswith("Documents:\n\n<document") and head.count("<document") >= 2
    assert write.startswith(head)
    assert answer.first_token_s is not None and 0 < answer.first_token_s <= answer.seconds
    assert answer.to_dict()["first_token_s"] == round(answer.first_token_s, 3)


@pytest.mark.parametrize(
    "written",
    ["The documents do not state it.", "Administrator accounts are managed centrally [1]."],
)
def test_a_one_lookup_answer_that_misses_what_the_lookup_found_is_repaired(
    tmp_path: Path,
    settings: Settings,
    make_searcher: Any,
    llm_server: ScriptedLLMServer,
    written: str,
) -> None:
    # The local model extracted "310" latches on hand, then wrote about something else, or
    # that the documents do not state it, and again when asked once more: the finding is
    # stated with its citation.
    llm_server.add_rule(
        lambda r: task_of(r) == "answer" or "cannot be used as it is" in _prompt(r),
        lambda r: written,
    )
    ds = make_searcher(_settings(settings, llm_server))
    ds.load([write_docs(tmp_path / "d")], "docs")
    answer, _events = _run(ds, "How often do administrator passwords change?")
    tasks = [task_of(r) for r in llm_server.requests]
    again = [r for r in llm_server.requests if "cannot be used as it is" in _prompt(r)]
    assert len(again) == 1 and "ninety days" in _prompt(again[0]), tasks
    assert "ninety days [" in answer.answer and "do not state" not in answer.answer
    if "managed" in written:  # what the model wrote stays beside the finding
        assert answer.answer.startswith("Administrator accounts are managed centrally")
    assert any("security.md" in s.source for s in answer.sources)
    assert any(n.startswith("answer repaired") for n in answer.notes) and answer.stream_replaced


def test_a_one_lookup_answer_that_states_the_finding_costs_no_repair(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    llm_server.add_rule(
        lambda r: task_of(r) == "answer",
        lambda r: "Administrator passwords change every ninety days [1].",
    )
    ds = make_searcher(_settings(settings, llm_server))
    ds.load([write_docs(tmp_path / "d")], "docs")
    answer, _events = _run(ds, "How often do administrator passwords change?")
    assert [task_of(r) for r in llm_server.requests] == ["extract", "answer"]
    assert not answer.stream_replaced and not any("repaired" in n for n in answer.notes)


def test_a_sentence_stating_part_of_the_finding_gives_way_to_it(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    # The local model read "2–8 °C" in its lookup, then wrote "up to 8 °C" citing the same
    # passage, and again when asked once more: the finding replaces that sentence rather
    # than standing beside a range it contradicts.
    docs = {
        "storage.md": "# Storage\n\nPressure sensors are stored at 2–8 °C in the Göteborg warehouse.",
        "canteen.md": "# Canteen\n\nThe canteen opens at 11:00 and serves 8 dishes.",
    }

    def numbered(req: dict[str, Any]) -> int:
        found = re.findall(r"<document[^>]*>\n(.*?)\n</document>", _prompt(req), re.S)
        return next(n for n, d in enumerate(found, 1) if "2–8 °C" in d)

    llm_server.add_rule(
        lambda r: task_of(r) == "extract",
        lambda r: json.dumps({"answer": "2–8 °C", "document": numbered(r)}),
    )
    llm_server.add_rule(
        lambda r: task_of(r) == "answer" or "cannot be used as it is" in _prompt(r),
        lambda r: (
            f"Sensors go to Göteborg [{numbered(r)}]. They are kept up to 8 °C [{numbered(r)}]."
        ),
    )
    ds = make_searcher(_settings(settings, llm_server))
    ds.load([write_docs(tmp_path / "d", docs)], "docs")
    answer, _events = _run(ds, "What temperature must pressure sensors be stored at?")
    assert answer.answer.startswith("Sensors go to Göteborg [")
    assert "up to 8 °C" not in answer.answer and "stored at: 2–8 °C [" in answer.answer
    assert answer.answer.count("2–8 °C") == 1 and answer.stream_replaced


SLA_TICKET = "How many minutes do we have to respond to ticket SR-10431 under the SLA?"


def _sla_docs(priorities: list[str]) -> dict[str, str]:
    minutes = {"P1": 30, "P2": 120, "P3": 480, "P4": 1440}
    sla = {
        p: {
            "description": f"priority {p}: {'a device is down' if p < 'P3' else 'degraded'} "
            "on a ward, as the customer reports it to the service desk by phone or portal",
            "response_minutes": minutes[p],
            "restore_hours": minutes[p] // 5,
        }
        for p in priorities
    }
    tickets = [
        {"ticket_id": f"SR-104{n}", "priority": p, "category": "alarm", "assignee": "Anders Holm"}
        for n, p in [(30, "P3"), (31, "P2"), (32, "P4"), (33, "P3")]
    ]
    return {
        "tickets.jsonl": "\n".join(json.dumps(t) for t in tickets) + "\n",
        "sla.json": json.dumps({"policy": "Care SLA", "sla": {"priorities": sla}}, indent=2),
    }


@pytest.mark.parametrize("priorities", [["P1", "P2", "P3", "P4"], ["P1", "P3", "P4"]])
def test_a_value_read_under_another_key_than_the_record_gives_is_read_under_its_key(
    tmp_path: Path,
    settings: Settings,
    make_searcher: Any,
    llm_server: ScriptedLLMServer,
    priorities: list[str],
) -> None:
    # The local model read the P3 row of the SLA for a ticket whose record says P2: the
    # lookup is answered from the P2 row (a passage at hand, else one search for its label,
    # no LLM call); where no passage states it, the P3 value is not taken.
    read: list[int] = []

    def reply(req: dict[str, Any]) -> str:
        docs = re.findall(r"<document[^>]*>\n(.*?)\n</document>", _prompt(req), re.S)
        read.append(next((i for i, d in enumerate(docs, 1) if "P3.response_minutes: 480" in d), 0))
        return json.dumps({"answer": "480", "document": read[-1]})

    def numbered(req: dict[str, Any]) -> int:
        docs = re.findall(r"<document[^>]*>\n(.*?)\n</document>", _prompt(req), re.S)
        return next((i for i, d in enumerate(docs, 1) if "P2.response_minutes: 120" in d), 0)

    llm_server.add_rule(lambda r: task_of(r) == "extract", reply)
    # The model writes the value but not whose priority it is, and again when asked once more.
    llm_server.add_rule(
        lambda r: task_of(r) == "answer" or "cannot be used as it is" in _prompt(r),
        lambda r: f"We have 120 minutes to respond [{numbered(r)}].",
    )
    # With P2 in the SLA, two passages a round: the ticket's record and the P3 row, not P2's.
    top_k = 2 if "P2" in priorities else 10
    ds = make_searcher(_settings(settings, llm_server, max_iter=1, top_k=top_k))
    ds.load([write_docs(tmp_path / "d", _sla_docs(priorities))], "docs")
    calls = len(llm_server.requests)
    answer, events = _run(ds, SLA_TICKET)
    assert read and all(read)  # the model did read the P3 row
    (hop,) = answer.hops
    searched = [e.query for e in events if e.type == "search"]
    assert searched == [SLA_TICKET, "sla.priorities.P2.response_minutes"]
    if "P2" in priorities:
        assert (hop.answer, hop.status) == ("120", "answered") and hop.source.endswith("sla.json")
        assert any("sla.priorities.P2.response_minutes: 120" in n for n in answer.notes)
        # The answer is written from the two fields the value rests on, each with its passage.
        (written,) = [r for r in llm_server.requests if task_of(r) == "answer"]
        assert "SR-10431 priority P2 [" in _prompt(written)
        assert "sla.priorities.P2.response_minutes 120 [" in _prompt(written)
        # The key is part of the finding: the repair adds the record's field, with its passage.
        assert answer.answer.startswith("We have 120 minutes to respond [")
        assert "SR-10431 priority: P2 [" in answer.answer and "480" not in answer.answer
        assert answer.stream_replaced
        assert {s.source.rsplit("/", 1)[-1] for s in answer.sources} >= {"sla.json"}
    else:
        assert hop.status != "answered" and hop.answer != "480"
        assert any(
            "no passage states sla.priorities.P2.response_minutes" in n for n in answer.notes
        )
    assert sum(task_of(r) == "extract" for r in llm_server.requests[calls:]) == 1


def test_the_passage_a_lookup_answered_from_is_kept_though_not_listed(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    holding: list[int] = []

    def reply(req: dict[str, Any]) -> str:
        docs = re.findall(r"<document[^>]*>\n(.*?)\n</document>", _prompt(req), re.S)
        holding.append(next(n for n, d in enumerate(docs, 1) if "ninety days" in d))
        # The answer and its document, but no passage listed useful.
        return json.dumps({"answer": "every ninety days", "document": holding[-1], "useful": []})

    llm_server.add_rule(lambda r: task_of(r) == "extract", reply)
    ds = make_searcher(_settings(settings, llm_server, top_k=4, min_evidence=0))
    ds.load([write_docs(tmp_path / "d")], "docs")
    answer, events = _run(ds, "How often do administrator passwords change?")
    kept = [n for n, e in enumerate((e for e in events if e.type == "verdict"), 1) if e.kept]
    assert kept == holding and answer.chunks_kept == 1


def test_a_lookup_that_names_no_passage_useful_judges_nothing_away(
    tmp_path: Path, settings: Settings, make_searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    # The lookup finds nothing and lists no document as useful.
    llm_server.add_rule(
        lambda r: task_of(r) == "extract", '{"answer": "", "document": 0, "useful": []}'
    )
    ds = make_searcher(_settings(settings, llm_server, top_k=4, min_evidence=2))
    ds.load([write_docs(tmp_path / "d")], "docs")
    answer, _events = _run(ds, "How often do administrator passwords change?")
    assert answer.chunks_dropped == answer.chunks_retrieved > 0  # reported ...
    write = next(_prompt(r) for r in llm_server.requests if task_of(r) == "answer")
    assert write.count("<document") == answer.chunks_retrieved  # ... and nothing thrown away
    assert any("dropped all" in n and "ranked by retrieval" in n for n in answer.notes)
    assert not any(s.verified for s in answer.sources)


def test_a_judge_that_keeps_every_passage_is_asked_once(
    chain: Any, llm_server: ScriptedLLMServer
) -> None:
    llm_server.keep_everything = True
    answer, _events = _run(chain, POLICY)
    assert answer.iterations == 2
    # The first round's verdicts (from its lookup's call) kept everything: the second
    # round's lookup is not asked for verdicts again.
    judged = [_prompt(r) for r in llm_server.requests if task_of(r) == "extract"]
    assert ['"useful"' in outside_documents(p) for p in judged] == [True, False]
    assert any("kept all" in n and "no further verdicts" in n for n in answer.notes)
    assert not any(s.verified for s in answer.sources)


# -- every answer attributed --------------------------------------------------------------------


def test_an_answer_without_markers_is_attributed_to_the_passages_that_hold_it(
    chain: Any, llm_server: ScriptedLLMServer
) -> None:
    llm_server.answer_style = "no-markers"
    answer, _ = _run(chain, POLICY)
    assert re.search(r"\[\d+\]", answer.answer), answer.answer
    assert answer.sources and all(s.attributed for s in answer.sources)
    assert answer.evidence == "attributed"
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", answer.answer)}
    assert cited == {s.n for s in answer.sources}
    assert any("attributed to the passages that hold them" in n for n in answer.notes)
    d = answer.to_dict()
    assert d["evidence"] == "attributed" and all(s["attributed"] for s in d["sources"])


def test_a_citation_standing_for_its_fact_is_never_returned(
    chain: Any, llm_server: ScriptedLLMServer
) -> None:
    from deepsearcher.agents.citations import fact_is_marker, sentences

    llm_server.answer_style = "marker-as-fact"  # "The answer to the question is [1]."
    for agent in ("deep", "naive"):
        answer, _ = _run(chain, POLICY, agent=agent)
        assert not any(fact_is_marker(s) for s in sentences(answer.answer)), answer.answer
        assert any(n.startswith("answer repaired") for n in answer.notes), (agent, answer.notes)
        assert answer.stream_replaced
