"""Research reports (issue #14, first slice) in-process: the real stages, the real deep-search
researchers and Retriever over tests/memory_index.py, a ScriptedChatModel for the LLM. Each
test checks what a reader of the report would notice: citations that resolve, a section named
as missing, a report marked cut short, a plan that fell back."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from deepsearcher.cli import app
from deepsearcher.config import Settings
from deepsearcher.llm import Completion, Message, ToolSchema
from deepsearcher.research import Report, ResearchRequest, stream_research
from deepsearcher.research.contradictions import find_contradictions
from deepsearcher.research.events import ResearchEvent
from deepsearcher.research.models import Evidence, Finding
from deepsearcher.research.researcher.calculator import CalculatorError, calculate
from deepsearcher.research.researcher.registry import THINK, ToolCall, ToolRegistry, parse_tool_call
from deepsearcher.research.text import is_supported, sentences
from deepsearcher.retrieval import Retriever
from deepsearcher.searcher import DeepSearcher
from tests.llm_server import ScriptedLLMServer
from tests.memory_index import CORPUS, MODEL, MemoryStore, WordHashEmbedder
from tests.sample_docs import write_docs
from tests.scripted_model import DOCUMENT, ScriptedChatModel, script_deep_search, task_of

DEEP_SEARCH = {"plan", "judge", "judge-batch", "extract", "reflect", "answer"}

SECTIONS = [
    {"title": "Battery supplier", "question": "Who supplies the NR-7 battery?", "complexity": 1},
    {"title": "Lyon office", "question": "How many employees work in the Lyon office?"},
]
BRIEF = {
    "goal": "Brief on the NR-7 battery and the Lyon office",
    "must_answer": ["Who supplies the NR-7 battery?", "How large is the Lyon office?"],
    "assumptions": ["the reader is the new CFO"],
    "question": "Which office do you mean?",
}


class InFlightModel(ScriptedChatModel):
    """Counts calls in flight per task: each call yields to the loop before it answers, so
    calls that overlap (concurrent researchers) are seen together."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight: dict[str, int] = {}
        self.max_in_flight: dict[str, int] = {}

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[ToolSchema] | None = None,
        **extra: Any,
    ) -> Completion:
        task = task_of(messages)
        for key in (task, "any"):
            self.in_flight[key] = self.in_flight.get(key, 0) + 1
            self.max_in_flight[key] = max(self.max_in_flight.get(key, 0), self.in_flight[key])
        try:
            # A call that takes a while, as a real one does: a researcher whose retrieval
            # (in a thread) finishes a little later still overlaps it.
            await asyncio.sleep(0.05)
            return await super().complete(messages, max_tokens=max_tokens, tools=tools, **extra)
        finally:
            self.in_flight["any"] -= 1
            self.in_flight[task] -= 1


def _answer(prompt: str) -> str:
    """Cites the first passage with its own words, as a grounded model would."""
    docs = DOCUMENT.findall(prompt)
    if not docs:
        return "The documents do not state it."
    return f"{docs[0].rstrip('.')} [1]."


def _script(llm: ScriptedChatModel, *, plan: Any = SECTIONS) -> None:
    llm.add_rule("TASK: research-brief", json.dumps(BRIEF))
    llm.add_rule("TASK: research-plan", plan if isinstance(plan, str) else json.dumps(plan))
    script_deep_search(llm, _answer)
    llm.add_rule("TASK: research-tools", "Nothing to add.")  # prose ends the tool loop


def _settings() -> Settings:
    settings = Settings()
    settings.embedding.model = MODEL
    settings.query.top_k = 2
    return settings


def _run(
    llm: ScriptedChatModel,
    settings: Settings | None = None,
    corpus: dict[str, list[str]] = CORPUS,
    **request: Any,
) -> tuple[Report, list[ResearchEvent]]:
    settings = settings or _settings()
    store = MemoryStore(WordHashEmbedder())
    store.add("docs", corpus)
    retriever = Retriever(WordHashEmbedder(), store, settings)
    req = ResearchRequest(
        request.pop("request", "Brief me on the NR-7 battery and Lyon"), **request
    )

    async def go() -> list[ResearchEvent]:
        return [e async for e in stream_research(settings, llm, retriever, req)]

    events = asyncio.run(go())
    last = events[-1]
    assert last.type == "done" and last.report is not None
    return last.report, events


def _citations(markdown: str) -> set[int]:
    body = markdown.split("## Sources")[0]
    return {int(n) for n in re.findall(r"\[(\d+)\]", body)}


def test_report_cites_sources_that_resolve_to_evidence() -> None:
    llm = ScriptedChatModel()
    _script(llm)
    report, events = _run(llm)
    md = report.to_markdown()
    numbers = {s.n for s in report.sources}
    assert _citations(md) and _citations(md) <= numbers  # every [n] has a source
    evidence = {e.id: e for e in report.evidence}
    for source in report.sources:  # every source maps back to a passage of a file
        assert evidence[source.evidence_id] is source.evidence
        assert source.evidence.source in CORPUS
    for finding in report.findings:
        assert finding.evidence and all(e in evidence for e in finding.evidence)
    assert "Kestrel Energy" in md and "forty employees" in md
    assert "robots.txt" in md.split("## Sources")[1]
    # The brief records the question it did not ask.
    assert report.brief is not None
    assert "not asked (non-interactive): Which office do you mean?" in report.brief.assumptions
    assert report.quality is not None and report.quality.passed and report.quality.coverage == 1
    assert not report.cut_short and not report.missing and not report.degraded
    types = [e.type for e in events]
    for stage in ("brief", "plan", "researcher_started", "researcher_finished", "quality"):
        assert stage in types
    assert report.to_dict()["usage"]["llm_calls"] == len(llm.history)
    # The skeleton is code: the title is the request, the sections are the plan's, each
    # section is its researcher's answer, and the model is asked for no draft and no check.
    assert report.title == "Brief me on the NR-7 battery and Lyon"
    assert [s.title for s in report.sections] == ["Battery supplier", "Lyon office"]
    asked = {task_of(m) for m in llm.history}
    assert asked <= {"research-brief", "research-plan", "research-tools"} | DEEP_SEARCH
    # Every sentence cites one passage that holds it.
    for section in report.sections:
        for sentence in sentences(section.text):
            assert len(re.findall(r"\[(\d+)\]", sentence)) == 1, sentence


def test_json_sources_reference_evidence_that_holds_each_passage_once() -> None:
    llm = ScriptedChatModel()
    _script(llm)
    report, _ = _run(llm)
    data = json.loads(json.dumps(report.to_dict()))
    evidence = {e["id"]: e for e in data["evidence"]}
    assert data["sources"] and len(evidence) == len(data["evidence"])
    for source in data["sources"]:
        assert set(source) == {"n", "evidence_id", "label"}  # no copy of the passage's fields
        cited = evidence[source["evidence_id"]]
        assert cited["label"] == source["label"] and cited["source"] in CORPUS
        assert cited["text"]
        assert f"[{source['n']}] {cited['label']}" in report.to_markdown()


def test_the_library_facade_writes_the_same_report_with_its_own_components() -> None:
    llm = ScriptedChatModel()
    _script(llm)
    store = MemoryStore(WordHashEmbedder())
    store.add("docs", CORPUS)
    ds = DeepSearcher(_settings(), embedder=WordHashEmbedder(), store=store, llm=llm)
    seen: list[str] = []
    report = ds.research(
        "Brief me on the NR-7 battery and Lyon", on_event=lambda e: seen.append(e.type)
    )
    assert "Kestrel Energy" in report.to_markdown() and report.sources
    assert seen[0] == "brief" and seen[-1] == "done" and "researcher_started" in seen
    assert report.to_dict()["usage"]["llm_calls"] == len(llm.history)


def test_an_answered_clarifying_question_rewrites_the_brief() -> None:
    llm = ScriptedChatModel()
    _script(llm)
    asked: list[str] = []

    async def clarify(question: str) -> str:
        asked.append(question)
        return "the Lyon office in France"

    clear = dict(BRIEF, question="", goal="Lyon office headcount")
    llm.add_rule(lambda p: "The user answered: the Lyon office" in p, json.dumps(clear))
    report, _ = _run(llm, clarify=clarify)
    assert asked == ["Which office do you mean?"]
    assert report.brief is not None and report.brief.goal == "Lyon office headcount"
    assert report.brief.assumptions[0] == (
        "clarified: Which office do you mean? -> the Lyon office in France"
    )
    assert len(llm.calls("research-brief")) == 2


def test_a_clarification_from_an_earlier_turn_is_written_into_the_one_brief() -> None:
    llm = ScriptedChatModel()
    _script(llm)  # the brief would ask "Which office do you mean?" again

    async def never(question: str) -> str:
        raise AssertionError("asked again")

    answered = ("Which office do you mean?", "Lyon")
    report, _ = _run(llm, clarify=never, clarification=answered)
    assert len(llm.calls("research-brief")) == 1
    prompt = llm.calls("research-brief")[0][-1]["content"]
    assert "Asked: Which office do you mean? The user answered: Lyon" in prompt
    assert report.brief is not None and not report.brief.question
    assert report.brief.assumptions[0] == "clarified: Which office do you mean? -> Lyon"


def test_research_settings_set_the_limits_and_the_request_overrides_them() -> None:
    settings = _settings()
    settings.research.max_sections = 1
    settings.research.max_llm_calls = 40
    llm = ScriptedChatModel()
    _script(llm)
    report, events = _run(llm, settings, max_revisions=0)
    assert "at most 1 report sections" in llm.calls("research-plan")[0][-1]["content"]
    assert [e.section for e in events if e.type == "researcher_started"] == ["Battery supplier"]
    budgets = [e.budget for e in events if e.type == "researcher_started"]
    # The run's 40 calls less brief and plan, capped at one question's (the rest is code).
    assert budgets == [min(40 - 2, settings.query.max_llm_calls)]
    llm = ScriptedChatModel()
    _script(llm)
    report, events = _run(llm, settings, max_sections=2, max_llm_calls=20)
    assert len([e for e in events if e.type == "researcher_started"]) == 2
    assert report.usage.llm_calls <= 20


def test_findings_and_evidence_are_deduplicated_across_researchers() -> None:
    llm = ScriptedChatModel()
    same = {"title": "Battery again", "question": "Who supplies the NR-7 battery?"}
    _script(llm, plan=[SECTIONS[0], same])
    report, _ = _run(llm, max_revisions=0)
    claims = [f.claim for f in report.findings]
    assert len(claims) == len(set(claims)) == 1
    texts = [e.text for e in report.evidence]
    assert len(texts) == len(set(texts))


def test_unparseable_plan_becomes_one_section_with_a_note() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan="I would split this into several parts.")
    report, events = _run(llm)
    assert report.plan is not None and len(report.plan.sections) == 1
    assert report.plan.note and "plan failed" in report.plan.note
    assert any(n.startswith("plan failed") for n in report.notes)
    assert len(llm.calls("research-plan")) == 2  # asked once more with the problem
    assert [e.section for e in events if e.type == "researcher_started"] == [
        "Brief on the NR-7 battery and the Lyon office"
    ]
    assert report.findings  # the one section was still researched


def test_a_failing_researcher_leaves_its_section_named_as_missing() -> None:
    llm = ScriptedChatModel()
    _script(llm)
    # The Lyon researcher's first call (its lookup: a one-lookup question asks no plan) fails.
    llm.add_rule(
        lambda p: "TASK: extract" in p and re.search(r"^Lookup: .*Lyon", p, re.M) is not None,
        RuntimeError("index broke"),
    )
    report, events = _run(llm, max_revisions=0)
    assert report.missing == [
        "section 'Lyon office': researcher failed: RuntimeError('index broke')"
    ]
    assert "Lyon office" in report.to_markdown().split("## Summary")[0]
    assert "Kestrel Energy" in report.to_markdown()  # the other section survived
    finished = {e.section: e.error for e in events if e.type == "researcher_finished"}
    assert finished["Battery supplier"] is None and "index broke" in str(finished["Lyon office"])


def test_spent_budget_writes_a_report_marked_cut_short() -> None:
    llm = ScriptedChatModel()
    plan = [dict(SECTIONS[0], complexity=3), SECTIONS[1], {"title": "Travel", "question": "x"}]
    _script(llm, plan=plan)
    # 10 calls: brief + plan leave 8 for 5 units of complexity (the draft makes no call).
    report, _ = _run(llm, max_llm_calls=10)
    assert report.cut_short
    assert report.missing == [
        "section 'Lyon office': budget spent before it was researched (1 call(s) left)",
        "section 'Travel': budget spent before it was researched (1 call(s) left)",
    ]
    md = report.to_markdown()
    assert md.count("Cut short") == 1 and "Kestrel Energy" in md
    assert report.usage.llm_calls <= 10


def test_budget_spent_inside_the_researchers_cuts_the_report_short() -> None:
    """The token budget runs out after the researchers started: the shared budget refuses
    their next calls, each section says it has no findings and why, the report is cut short."""
    llm = ScriptedChatModel()
    _script(llm)
    _run(llm)
    brief_and_plan = (
        sum(sum(len(m["content"].split()) for m in messages) for messages in llm.history[:2])
        + len(json.dumps(BRIEF).split())
        + len(json.dumps(SECTIONS).split())
    )
    llm = ScriptedChatModel()
    _script(llm)
    report, _ = _run(llm, max_tokens=brief_and_plan + 1)
    assert report.cut_short == f"token budget of {brief_and_plan + 1} reached"
    assert [m.split(":")[0] for m in report.missing] == [
        "section 'Battery supplier'",
        "section 'Lyon office'",
    ]
    assert all("research budget spent" in m for m in report.missing)
    assert llm.calls("extract") and not llm.calls("answer")
    md = report.to_markdown()
    assert "Cut short" in md and "Missing" in md and not report.sources


def _answer_with(*sentences_: str):  # type: ignore[no-untyped-def]
    """An answer step that writes ``sentences_``, each as given (with or without [n])."""
    return lambda prompt: " ".join(sentences_)


def test_each_sentence_cites_the_passages_that_hold_it_and_no_blanket_list() -> None:
    """A model that cites nothing, one that cites every passage, one that cites the wrong
    passage, and a sentence no passage holds: the report cites one to three passages that
    hold each sentence and marks the one none holds."""
    llm = ScriptedChatModel()
    _script(llm, plan=[SECTIONS[0]])
    llm.add_rule(
        "TASK: answer",
        _answer_with(
            "The NR-7 battery is supplied by Kestrel Energy.",  # cites nothing
            "The NR-7 arm carries a payload of twelve kilograms [1][2][3][4].",  # every one
            "The battery lasts ten hours on the NR-7 [1].",  # passage 1 is about the arm
            "Penguins migrate across frozen Antarctic glaciers every winter.",  # none holds it
        ),
    )
    settings = _settings()
    settings.query.top_k = 4
    report, _ = _run(llm, settings, max_revisions=0, max_tool_steps=0)
    evidence = {s.n: s.evidence.text for s in report.sources}
    (section,) = report.sections
    said = sentences(section.text)
    assert len(said) == 4
    for sentence in said[:3]:
        cited = [int(n) for n in re.findall(r"\[(\d+)\]", sentence)]
        assert 1 <= len(cited) <= 3, sentence
        words = re.sub(r"\[\d+\]", "", sentence)
        assert any("Kestrel" in evidence[n] or "twelve" in evidence[n] for n in cited)
        assert all(is_supported(words, evidence[n]) for n in cited), sentence
    assert "Kestrel Energy" in evidence[int(re.findall(r"\[(\d+)\]", said[0])[0])]
    assert "ten hours" in evidence[int(re.findall(r"\[(\d+)\]", said[2])[0])]
    assert said[3].endswith("[not in sources].") and not re.search(r"\[\d+\]", said[3])
    assert section.unsupported == [
        "Penguins migrate across frozen Antarctic glaciers every winter."
    ]
    q = report.quality
    assert q is not None and q.uncited_sentences == section.unsupported and not q.passed
    assert "[not in sources] are not held by any passage" in report.to_markdown()


def test_researchers_run_concurrently_under_the_cap() -> None:
    llm = InFlightModel()
    _script(llm)
    _run(llm, max_concurrency=2)
    assert llm.max_in_flight["any"] == 2
    one_at_a_time = InFlightModel()
    _script(one_at_a_time)
    _run(one_at_a_time, max_concurrency=1)
    assert one_at_a_time.max_in_flight["any"] == 1


def test_a_question_the_draft_does_not_cover_triggers_one_gap_round() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=[SECTIONS[0]])  # the brief asks about Lyon too; the plan forgot it
    report, events = _run(llm, max_revisions=2)
    assert [e.gaps for e in events if e.type == "revision"] == [["How large is the Lyon office?"]]
    assert report.revisions == 1
    qualities = [e.quality for e in events if e.type == "quality" and e.quality]
    assert qualities[0].missing_questions == ["How large is the Lyon office?"]
    assert "forty employees" in report.to_markdown()
    assert report.quality is not None and report.quality.passed
    # The gap's answer joined the section sharing its words, or stands as its own.
    assert any("forty employees" in s.text for s in report.sections)


def test_figures_and_dates_the_sources_disagree_on_are_found_and_nothing_else() -> None:
    ev = [
        Evidence("E1", "The daily meal allowance for business travel is 45 euros.", "a.md"),
        Evidence("E2", "Business travel: the daily meal allowance is €50.", "b.md"),
        Evidence("E3", "The Lisbon office opened in 2019.", "c.md"),
        Evidence("E4", "The Lisbon office opened in 2021.", "d.md"),
        # Not conflicts: another unit, another measure, another period, another entity.
        Evidence("E5", "The daily meal allowance for business travel covers 3 meals.", "e.md"),
        Evidence("E6", "Parental leave lasts 20 weeks and vacation 25 days.", "f.md"),
        Evidence("E7", "Revenue of the Lisbon office was 12 million euros in 2022.", "g.md"),
        Evidence("E8", "Revenue of the Lisbon office was 15 million euros in 2023.", "h.md"),
        Evidence("E9", "Revenue of the Porto office was 9 million euros in 2022.", "i.md"),
    ]
    finding = Finding("The daily meal allowance for business travel is 45 euros", ["E1"])
    found = find_contradictions([finding], ev)
    assert [(c.evidence_a, c.evidence_b, c.differs) for c in found] == [
        (["E1"], ["E2"], "45 EUR vs 50 EUR"),
        (["E3"], ["E4"], "2019 vs 2021"),
    ]
    assert found[0].claim_b == "Business travel: the daily meal allowance is €50."
    assert "allowance" in found[0].subject


PER_DIEM = {
    "travel.md": ["The international per diem is 95 dollars per day."],
    "policy-2024.md": ["The international per diem is 120 dollars per day."],
}


def _both_passages(prompt: str) -> str:
    docs = DOCUMENT.findall(prompt)
    return " ".join(f"{d.rstrip('.')} [{i}]." for i, d in enumerate(docs[:2], 1))


def test_conflicting_sources_are_reported_and_researched_in_a_gap_round() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=[{"title": "Per diem", "question": "What is the international per diem?"}])
    llm.add_rule("TASK: answer", _both_passages)
    brief = dict(BRIEF, must_answer=["What is the international per diem?"])
    llm.add_rule("TASK: research-brief", json.dumps(brief))
    report, events = _run(llm, corpus=PER_DIEM, max_revisions=1, max_tool_steps=0)
    q = report.quality
    assert q is not None and len(q.contradictions) == 1
    c = q.contradictions[0]
    assert c.differs == "95 usd/day vs 120 usd/day"
    # Every question was covered, but the conflict went to a gap round.
    gaps = [e.gaps for e in events if e.type == "revision"]
    assert gaps == [[f"{c.subject}: 95 usd/day vs 120 usd/day?"]]
    md = report.to_markdown()
    note = md.split("**Conflicting sources:**")[1].split("## Sources")[0]
    numbers = {int(n) for n in re.findall(r"\[(\d+)\]", note)}
    assert len(numbers) == 2 and numbers <= {s.n for s in report.sources}
    assert "95 usd/day vs 120 usd/day" in note
    data = report.to_dict()["quality"]["contradictions"]
    assert {data[0]["evidence_a"][0], data[0]["evidence_b"][0]} == {"E1", "E2"}


def test_look_alike_figures_spend_no_revision_round() -> None:
    """The issue's look-alikes in one run: a margin next to a price rise and its effect on
    the margin, two meetings' times, Q2 next to Q3. No conflict is flagged, no round spent."""
    corpus = {
        "q3.md": [
            "Gross margin was 41.5% (Q2: 40.2%). Revenue for Q3 2024 was USD 11.8 million.",
            "Kestrel has also announced a 6% price increase from 1 January 2025, which would "
            "lower NR-7 gross margin by about 0.8 points.",
        ],
        "q2.md": ["Revenue for Q2 2024 was USD 10.6 million. Gross margin in Q2 was 40.2%."],
        "notes.txt": [
            "Meeting: operations. Date: 15 August 2024, 09:00-10:30 Pacific.",
            "Meeting: operations. Date: 12 September 2024, 09:00-11:00 Pacific.",
        ],
    }
    llm = ScriptedChatModel()
    _script(llm, plan=[{"title": "Margin", "question": "What was the gross margin and revenue?"}])
    llm.add_rule("TASK: answer", _both_passages)
    brief = dict(BRIEF, must_answer=["What was the gross margin?"])
    llm.add_rule("TASK: research-brief", json.dumps(brief))
    settings = _settings()
    settings.query.top_k = 6
    report, events = _run(llm, settings, corpus=corpus, max_tool_steps=0)
    read = " ".join(m[-1]["content"] for m in llm.calls("answer"))
    for look_alike in ("41.5%", "6% price increase", "10.6 million", "09:00-10:30", "09:00-11:00"):
        assert look_alike in read  # the researcher had them all: the check saw them all
    assert report.quality is not None and report.quality.contradictions == []
    assert not [e for e in events if e.type == "revision"]
    assert "Conflicting sources" not in report.to_markdown()


@pytest.mark.parametrize(
    ("expression", "value"), [("(120 - 100) / 100", 0.2), ("1,250 * 2", 2500), ("-2 ** 3", -8)]
)
def test_calculator_does_arithmetic(expression: str, value: float) -> None:
    assert calculate(expression) == pytest.approx(value)


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "x + 1",
        "(1).real",
        "'a' * 3",
        "9 ** 999",
        "10 ** 20 ** 3",
        "1 / 0",
        "[1, 2]",
        "True + 1",
        "lambda: 1",
    ],
)
def test_calculator_refuses_anything_but_arithmetic(expression: str) -> None:
    with pytest.raises(CalculatorError):
        calculate(expression)


def test_tool_calls_parse_from_plain_replies_and_errors_go_back_to_the_model() -> None:
    # The researchers' own tools (search, calculator, findings) are exercised through whole
    # runs in test_research_tools.py; this is the parsing and the registry they go through.
    call = parse_tool_call('```json\n{"tool": "calculator", "args": {"expression": "3*4"}}\n```')
    assert call == ToolCall("calculator", {"expression": "3*4"})
    said = 'I will search first. {"tool": "search", "arguments": {"query": "per diem"}}'
    assert parse_tool_call(said) == ToolCall("search", {"query": "per diem"})
    assert parse_tool_call('{"tool": "search", "args": "per diem"}') == ToolCall(
        "search", {"_invalid": "per diem"}
    )
    assert parse_tool_call("The answer is 12.") is None
    assert parse_tool_call('{"tool": 12, "args": {}}') is None
    registry = ToolRegistry([THINK])

    async def go() -> list[tuple[str, bool]]:
        calls = [
            ToolCall("think", {"thought": "search the policy first"}),
            ToolCall("shell", {"cmd": "ls"}),
            ToolCall("think", {"_invalid": "not an object"}),
        ]
        return [(r.output, r.error) for r in [await registry.call(c) for c in calls]]

    results = asyncio.run(go())
    assert results[0] == ("noted", False)
    assert results[1][1] and "unknown tool 'shell'; tools: think" in results[1][0]
    assert results[2][1] and "think takes a JSON object of arguments" in results[2][0]


def test_research_command_end_to_end(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    """Through the real CLI: Milvus Lite, the packaged embedder, the scripted LLM server."""
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "r.db"),
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
    }
    docs = write_docs(tmp_path / "docs")
    loaded = CliRunner().invoke(app, ["load", str(docs), "--collection", "docs"], env=env)
    assert loaded.exit_code == 0, loaded.output
    llm_server.add_rule("TASK: research-brief", json.dumps(BRIEF))
    llm_server.add_rule("TASK: research-plan", json.dumps(SECTIONS))
    out = tmp_path / "report.json"
    res = CliRunner().invoke(app, ["research", "Brief me", "--json", "--out", str(out)], env=env)
    assert res.exit_code == 0, res.output
    assert "plan 2 section(s): Battery supplier, Lyon office" in res.stderr
    report = json.loads(out.read_text())
    numbers = {s["n"] for s in report["sources"]}
    evidence_ids = {e["id"] for e in report["evidence"]}
    assert {s["evidence_id"] for s in report["sources"]} <= evidence_ids
    cited = {int(n) for s in report["sections"] for n in re.findall(r"\[(\d+)\]", s["text"])}
    assert cited and cited <= numbers
    assert report["usage"]["llm_calls"] == len(llm_server.requests)
    assert not report["missing"] and not report["cut_short"]
    empty = CliRunner().invoke(app, ["research", "  "], env=env)
    assert empty.exit_code == 1 and "error: the request is empty" in empty.stderr


def test_research_flags_travel_in_the_request_which_checks_their_ranges(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "r.db"),
        "DEEPSEARCHER_RESEARCH__MAX_SECTIONS": "0",
        "OPENAI_API_KEY": "",
    }
    bad = CliRunner().invoke(app, ["research", "x"], env=env)
    assert bad.exit_code == 1
    assert "invalid setting 'research.max_sections' from environment variable" in bad.stderr
    # A flag out of range is refused by the request, as the library and the server refuse
    # it (no range is restated on the typer option), in the two lines.
    env["DEEPSEARCHER_RESEARCH__MAX_SECTIONS"] = "1"
    for flag, value in (("--max-sections", "0"), ("--max-sections", "13"), ("--concurrency", "0")):
        res = CliRunner().invoke(app, ["research", "x", flag, value], env=env)
        assert res.exit_code == 1, res.output
        lines = res.stderr.strip().splitlines()
        assert lines[0].startswith("error: invalid option ") and value in lines[0], lines
        assert lines[1].startswith("hint: leave "), lines
    # The flag wins over the variable.
    env["DEEPSEARCHER_LLM__BASE_URL"] = llm_server.base_url
    ok = CliRunner().invoke(app, ["research", "x", "--max-sections", "2"], env=env)
    assert ok.exit_code == 0, ok.stderr
    plans = [r for r in llm_server.requests if "TASK: research-plan" in _server_prompt(r)]
    assert plans and "at most 2 report sections" in _server_prompt(plans[0])


def test_research_options_restate_no_range() -> None:
    import typing

    from deepsearcher.cli.research import research_command

    hints = typing.get_type_hints(research_command, include_extras=True)
    infos = [m for h in hints.values() for m in getattr(h, "__metadata__", ())]
    assert len([i for i in infos if hasattr(i, "min")]) >= 4  # the options are all seen
    assert [i.param_decls for i in infos if i.min is not None or i.max is not None] == []


def _server_prompt(req: dict[str, Any]) -> str:
    return "\n".join(
        m["content"]
        for m in req["messages"]
        if m["role"] == "user" and isinstance(m["content"], str)
    )


def test_research_help_and_readme() -> None:
    res = CliRunner().invoke(app, ["research", "--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0
    assert "<bool>" not in res.output and "--max-sections" in res.output
    assert not re.search(r"--verbose\s+(-v\s+)?<int>", res.output)
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    assert "deepsearcher research" in readme and "## Research reports (preview)" in readme


def test_live_view_shows_tool_calls_and_hypotheses_and_prints_model_text_literally() -> None:
    from io import StringIO

    from rich.console import Console

    from deepsearcher.cli.research import _stage_line
    from deepsearcher.research.events import HypothesisEvent, ResearchNoteEvent, ToolCallEvent
    from deepsearcher.research.models import Hypothesis

    call = ToolCallEvent(
        tool="search", arguments={"query": "[/bold] NR-7"}, result="2 passages", section="S"
    )
    assert _stage_line(call, verbose=False) is None
    lines = [
        _stage_line(call, verbose=True),
        _stage_line(
            HypothesisEvent(hypothesis=Hypothesis("[red]x[/] holds", "refuted", [])), False
        ),
        _stage_line(ResearchNoteEvent(message="model said [/] here"), False),
    ]
    out = StringIO()
    console = Console(file=out, width=200)
    for line in lines:
        assert line is not None
        console.print(line)  # a markup error here would be a crash of the live view
    text = out.getvalue()
    assert '"[/bold] NR-7"' in text and "2 passages" in text
    assert "refuted: [red]x[/] holds" in text and "model said [/] here" in text


def test_the_summary_skips_a_line_that_opens_a_list_and_no_sentence_ends_twice() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=[SECTIONS[0]])
    llm.add_rule(
        "TASK: answer",
        "What the NR-7 battery supply involves: [1]\n"
        "- The NR-7 battery lasts ten hours and is supplied by Kestrel Energy Co. Ltd. [1].",
    )
    report, _ = _run(llm, max_revisions=0, max_tool_steps=0)
    assert report.summary.startswith("The NR-7 battery lasts ten hours"), report.summary
    assert ".." not in report.to_markdown()


def test_citations_standing_in_for_text_are_dropped() -> None:
    """What the 1.5B model wrote at the end of a section: "Actions [3][4]"."""
    llm = ScriptedChatModel()
    _script(llm, plan=[SECTIONS[0]])
    llm.add_rule(
        "TASK: answer",
        "The NR-7 battery is supplied by Kestrel Energy [1]. Actions [1][2]\n- [2]\nSee: [1]",
    )
    report, _ = _run(llm, max_revisions=0, max_tool_steps=0)
    (section,) = report.sections
    assert section.text == "The NR-7 battery is supplied by Kestrel Energy [1].", section.text
