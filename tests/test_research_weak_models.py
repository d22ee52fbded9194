"""Research with models weaker than the formats assume: a model that ignores the research
formats, one that copies the prompt's example into its reply, an answer step that fails
(a stream the server aborted). Each test checks what the reader of the report would see:
cited findings instead of an empty report, no invented must-answer question, gap query or
contradiction, a failed section named in the report rather than silently missing."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepsearcher.agents.parsing import OutputParseError
from deepsearcher.cli import app
from deepsearcher.errors import LLMError
from deepsearcher.research import prompts
from deepsearcher.research.parsing import copied, parse_brief, parse_plan
from deepsearcher.research.text import sentences
from tests.llm_server import ScriptedLLMServer
from tests.sample_docs import write_docs
from tests.scripted_model import ScriptedChatModel, script_deep_search
from tests.test_research import SECTIONS, _run, _script

PROSE = "Sure! I looked into this carefully and here is a summary of what I found."
# The research prompts' example replies before they showed placeholders, as a model that
# copies them sends them back.
OLD_BRIEF = json.dumps(
    {
        "goal": "...",
        "scope": "...",
        "audience": "...",
        "must_answer": ["question"],
        "constraints": ["..."],
        "assumptions": ["..."],
        "question": "",
    }
)


def _example_reply(prompt: str) -> str:
    """The reply format a prompt shows, copied as it stands (doubled braces undone)."""
    body = prompt.split("Reply with", 1)[1].split("\n", 1)[1]
    return body.split("\nReplace every", 1)[0].replace("\\\n", "")


def _ignoring_model(answer: str) -> ScriptedChatModel:
    """A model that answers every research stage in prose and writes ``answer`` as its
    deep-search answer: the formats of the brief, plan, tools, draft and check all fail."""
    llm = ScriptedChatModel()
    llm.add_rule("TASK: research-", PROSE)
    script_deep_search(llm, answer)
    return llm


# -- a model that ignores the research formats ---------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "The NR-7 battery is supplied by Kestrel Energy [Source 1].",
        "The NR-7 battery is supplied by Kestrel Energy [1, 2].",
        "The NR-7 battery lasts ten hours and is supplied by Kestrel Energy.",  # no citation
    ],
)
def test_a_model_ignoring_the_formats_still_gets_a_report_of_its_cited_answer(answer: str) -> None:
    report, _ = _run(_ignoring_model(answer), request="Who supplies the NR-7 battery?")
    md = report.to_markdown()
    body = md.split("## Sources")[0]
    assert report.findings and report.sources
    assert "Kestrel Energy" in body and "robots.txt" in md.split("## Sources")[1]
    # The claim is prose that cites the one passage holding it: no empty claim, no list of
    # citations standing in for text.
    (section,) = report.sections
    assert re.fullmatch(r"[^\[\]]*Kestrel Energy[^\[\]]* \[1\]\.", section.text), section.text
    assert "[]" not in md and not re.search(r"(\[\d+\]){4}", md)
    assert not report.missing
    # The report says what it is: the brief and the plan fell back to the request as asked.
    assert [d.split(":")[0] for d in report.degraded] == ["brief", "plan"]
    assert "> **Degraded:** brief: brief failed" in md


def test_an_answer_saying_the_documents_are_silent_is_no_finding() -> None:
    llm = _ignoring_model("The documents do not state who supplies the NR-7 battery.")
    report, _ = _run(llm, request="Who supplies the NR-7 battery?")
    assert not report.findings and not report.sources
    assert any("no cited evidence found" in m for m in report.missing)


def test_a_scripted_server_that_ignores_the_formats_gets_a_readable_report(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    """The generic scripted server through the real client: every research stage answered
    with prose, the deep search with its default replies. Once this was a single bullet "[]"
    citing 27 passages, with two meetings' times listed as conflicting sources."""
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "r.db"),
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
    }
    docs = write_docs(tmp_path / "docs")
    loaded = CliRunner().invoke(app, ["load", str(docs), "--collection", "docs"], env=env)
    assert loaded.exit_code == 0, loaded.output
    llm_server.add_rule(re.compile(r"TASK: research-"), PROSE)
    res = CliRunner().invoke(
        app, ["research", "What is the NR-7 battery supplier's lead time?", "--json"], env=env
    )
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["sections"] and report["degraded"]
    for section in report["sections"]:
        for sentence in sentences(section["text"]):
            cited = re.findall(r"\[(\d+)\]", sentence)
            assert len(cited) <= 3 and re.sub(r"\[\d+\]|\W", "", sentence), sentence
    assert report["quality"]["contradictions"] == []


def test_research_json_out_writes_the_file_and_prints_the_json(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    """The CLI end to end with a model that ignores every research format: the report holds
    the deep search's cited answer, and --json --out both writes the file and prints it."""
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "r.db"),
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
    }
    docs = write_docs(tmp_path / "docs")
    loaded = CliRunner().invoke(app, ["load", str(docs), "--collection", "docs"], env=env)
    assert loaded.exit_code == 0, loaded.output
    llm_server.add_rule("TASK: research-", PROSE)  # its format retries too
    out = tmp_path / "report.json"
    res = CliRunner().invoke(
        app, ["research", "Who supplies the NR-7 battery?", "--json", "--out", str(out)], env=env
    )
    assert res.exit_code == 0, res.output
    printed, saved = json.loads(res.stdout), json.loads(out.read_text(encoding="utf-8"))
    assert printed == saved
    assert saved["findings"] and saved["sources"]
    assert any("Kestrel" in e["text"] for e in saved["evidence"])
    assert f"report written to {out}" in res.stderr


# -- a model that copies the prompt's example ------------------------------------------------


def test_the_prompts_show_placeholders_not_values_a_model_could_copy() -> None:
    for name in ("BRIEF", "PLAN", "RESEARCH_TOOLS", "HYPOTHESIS"):
        text = getattr(prompts, name)
        for value in ('["question"', '["search query"', "45 vs 50", '": "..."', "battery supplier"):
            assert value not in text, (name, value)
    for name in ("BRIEF", "PLAN"):  # a copied format is refused
        reply = _example_reply(getattr(prompts, name).replace("{{", "{").replace("}}", "}"))
        with pytest.raises(OutputParseError, match="copies the prompt's example"):
            {
                "BRIEF": lambda r: parse_brief(r, request="x"),
                "PLAN": lambda r: parse_plan(r, max_sections=3),
            }[name](reply)  # fmt: skip


@pytest.mark.parametrize(
    ("parse", "reply"),
    [
        (lambda r: parse_brief(r, request="x"), OLD_BRIEF),
        (lambda r: parse_plan(r, max_sections=3), '[{"title": "...", "question": "..."}]'),
        (
            lambda r: parse_plan(r, max_sections=3),
            '{"sections": [{"title": "<section title>", "question": "<a self-contained research '
            'question>", "complexity": 1}]}',
        ),
    ],
)
def test_replies_that_copy_the_old_examples_are_refused(parse, reply) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OutputParseError, match="copies the prompt's example"):
        parse(reply)


def test_own_values_pass_and_only_copied_items_are_dropped() -> None:
    brief = parse_brief(
        json.dumps(
            {
                "goal": "Brief the CFO on battery supply",
                "must_answer": ["Who supplies the NR-7 battery?", "question"],
                "assumptions": ["<a reading of the request you chose>", "the NR-7 only"],
            }
        ),
        request="x",
    )
    assert brief.must_answer == ["Who supplies the NR-7 battery?"]
    assert brief.assumptions == ["the NR-7 only"]
    assert not copied("Line one<br>two [E1].")
    assert not copied("Costs rose from 45 to 50 euros [E2].")
    assert copied("<value in one> vs <value in the other>") and copied("search query")


def test_a_run_with_a_model_that_copies_the_examples_spends_nothing_on_them() -> None:
    """The brief copies the old example every time, the findings tool copies its
    placeholder: no "question" to answer, no revision for "search query", no invented
    contradiction, and the claim in the report is the deep search's, with its citation."""
    llm = ScriptedChatModel()
    _script(llm)
    llm.add_rule("TASK: research-brief", OLD_BRIEF)
    llm.add_rule(
        "TASK: research-tools",
        '{"tool": "findings", "args": {"findings": [{"claim": "<a fact the evidence states>", '
        '"evidence": ["E1"]}]}}',
    )
    report, events = _run(llm, max_tool_steps=1)
    assert report.brief is not None and "question" not in report.brief.must_answer
    assert len(llm.calls("research-brief")) == 2  # asked once more with the problem
    assert not [e for e in events if e.type == "revision"]
    assert report.quality is not None and not report.quality.contradictions
    assert "45 vs 50" not in report.to_markdown()
    tool = [e for e in events if e.type == "tool_call" and e.tool == "findings"]
    assert tool and all(e.error and "is the example" in e.result for e in tool)
    assert all("<" not in f.claim for f in report.findings)
    assert "Kestrel Energy" in report.to_markdown()


# -- an answer step that fails -------------------------------------------------------------


def _lyon_answer_fails(llm: ScriptedChatModel, times: int | None) -> None:
    llm.add_rule(
        lambda p: "TASK: answer" in p and "Lyon" in p,
        LLMError("the server aborted the stream"),
        times=times,
    )


def test_a_section_whose_answer_failed_is_answered_once_more_and_says_so() -> None:
    llm = ScriptedChatModel()
    _script(llm)
    _lyon_answer_fails(llm, times=1)
    report, events = _run(llm)
    assert not report.missing
    assert report.degraded == [
        "section 'Lyon office': the first answer failed (answer step failed: the server "
        "aborted the stream); written again"
    ]
    assert "forty employees" in report.to_markdown()
    assert "Degraded" in report.to_markdown()
    notes = [e.message for e in events if e.type == "note"]
    assert any("Lyon office" in n and "writing the answer once more" in n for n in notes)


def test_a_section_whose_answer_fails_twice_quotes_its_passages_visibly() -> None:
    llm = ScriptedChatModel()
    _script(llm)
    _lyon_answer_fails(llm, times=None)
    report, _ = _run(llm)
    assert not report.missing
    assert len(report.degraded) == 1 and "its passages are quoted" in report.degraded[0]
    md = report.to_markdown()
    assert "> **Degraded:** section 'Lyon office'" in md
    lyon = [f for f in report.findings if f.section == "Lyon office"]
    assert lyon and all(f.evidence for f in lyon)
    assert any("forty employees" in f.claim for f in lyon)
    assert report.to_dict()["degraded"] == report.degraded


class AbortingModel(ScriptedChatModel):
    """A server that aborts a streamed reply when another request arrives (llama.cpp's
    default): a stream fails as soon as any call starts after it."""

    def __init__(self) -> None:
        super().__init__()
        self.started = 0
        self.aborted = 0

    async def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
        self.started += 1
        for _ in range(3):
            await asyncio.sleep(0)
        return await super().complete(messages, **kwargs)

    async def stream(self, messages, **kwargs):  # type: ignore[no-untyped-def]
        self.started += 1
        mine = self.started
        async for piece in super().stream(messages, **kwargs):
            await asyncio.sleep(0.01)  # a slow model: the other sections' calls come in
            if self.started != mine:
                self.aborted += 1
                raise LLMError("the server aborted the stream: another request arrived")
            yield piece


def test_streams_aborted_by_the_other_sections_are_written_again_alone() -> None:
    llm = AbortingModel()
    _script(llm)
    report, _ = _run(llm, max_concurrency=2)  # two researchers at once: their calls collide
    assert llm.aborted  # the two sections' answers did collide
    assert {f.section for f in report.findings} == {"Battery supplier", "Lyon office"}
    assert report.degraded and all(d.endswith("written again") for d in report.degraded)
    assert not report.missing


def test_a_planned_section_that_found_nothing_citable_is_named_as_missing() -> None:
    llm = ScriptedChatModel()
    _script(llm)
    # Its lookup finds nothing and its answer says so (a lookup that found something would
    # be stated: the answer must state what its one lookup found).
    llm.add_rule(lambda p: "TASK: extract" in p and "Lyon" in p, '{"answer": "", "document": 0}')
    llm.add_rule(lambda p: "TASK: answer" in p and "Lyon" in p, "The documents do not state it.")
    report, _ = _run(llm)
    assert report.missing == ["section 'Lyon office': no cited evidence found"]
    assert "> **Missing:** section 'Lyon office'" in report.to_markdown()
    assert "Kestrel Energy" in report.to_markdown()


# -- a model that states a hypothesis as a question -----------------------------------------


def test_a_hypothesis_written_as_a_question_is_an_open_question_not_a_hypothesis() -> None:
    """What the 1.5B model did: "Is there any other information about the assembly location
    of the NR-7 robot?" as a hypothesis, left open with no evidence. A question is a gap:
    it goes to the open questions, costs no verdict call, and only statements are tested,
    each with the passages for and against it."""
    llm = ScriptedChatModel()
    _script(llm, plan=[SECTIONS[0]])
    asked = [
        {"statement": "Is there any other information about the assembly location of the NR-7?"},
        {"statement": "What are the risks of the battery supply"},  # no question mark
        {"statement": "Kestrel Energy supplies the NR-7 battery", "against": "NR-7 battery maker"},
    ]
    llm.add_rule(
        "TASK: research-tools",
        json.dumps({"tool": "findings", "args": {"findings": [], "hypotheses": asked}}),
    )
    llm.add_rule(
        "TASK: research-hypothesis", lambda p: '{"status": "supported", "evidence": ["E1"]}'
    )
    report, events = _run(llm, max_tool_steps=1, max_hypotheses=3, max_revisions=0)
    assert [h.statement for h in report.hypotheses] == ["Kestrel Energy supplies the NR-7 battery"]
    (h,) = report.hypotheses
    assert h.status == "supported" and h.evidence and h.against == []
    assert len(llm.calls("research-hypothesis")) == 1
    assert report.open_questions[:2] == [asked[0]["statement"], asked[1]["statement"]]
    md = report.to_markdown()
    assert "| Hypothesis | Status | For | Against |" in md
    assert "Is there any other information" in md.split("## Open questions")[1]
    tool = next(e for e in events if e.type == "tool_call" and e.tool == "findings")
    assert "2 question(s) kept as open questions" in tool.result
