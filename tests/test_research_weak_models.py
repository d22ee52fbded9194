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
from deepsearcher.research.parsing import (
    copied,
    parse_brief,
    parse_check,
    parse_draft,
    parse_plan,
)
from tests.llm_server import ScriptedLLMServer
from tests.sample_docs import write_docs
from tests.scripted_model import ScriptedChatModel, script_deep_search
from tests.test_research import _run, _script

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
OLD_CHECK = json.dumps(
    {
        "covered": [True, False],
        "gaps": ["search query"],
        "score": 0.0,
        "contradictions": [
            {"evidence": ["E1", "E2"], "subject": "...", "differs": "45 vs 50 euros"}
        ],
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
    assert report.findings and report.sources
    assert "Kestrel Energy" in md.split("## Sources")[0]
    assert "robots.txt" in md.split("## Sources")[1]
    assert re.search(r"\[\d+\]", md.split("## Sources")[0])  # the claim keeps its citation
    assert not report.missing
    # Each fallback is said: the draft listed the findings, the brief and plan fell back.
    assert any(n.startswith("draft failed") for n in report.notes)


def test_an_answer_saying_the_documents_are_silent_is_no_finding() -> None:
    llm = _ignoring_model("The documents do not state who supplies the NR-7 battery.")
    report, _ = _run(llm, request="Who supplies the NR-7 battery?")
    assert not report.findings
    assert "found no cited evidence" in report.summary


def test_a_draft_citing_none_of_the_evidence_lists_the_findings() -> None:
    llm = ScriptedChatModel()
    _script(llm)
    uncited = {
        "title": "T",
        "summary": "All is well.",
        "sections": [{"title": "A", "text": "Fine."}],
    }
    llm.add_rule("TASK: research-write", json.dumps(uncited))
    report, _ = _run(llm)
    assert any(n.startswith("the draft cited none of the evidence") for n in report.notes)
    md = report.to_markdown()
    assert "Kestrel Energy" in md and "All is well" not in md


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
    for name in ("BRIEF", "PLAN", "WRITE", "CHECK", "RESEARCH_TOOLS"):
        text = getattr(prompts, name)
        for value in ('["question"', '["search query"', "45 vs 50", '": "..."', "battery supplier"):
            assert value not in text, (name, value)
    for name in ("BRIEF", "PLAN", "WRITE", "CHECK"):  # a copied format is refused
        reply = _example_reply(getattr(prompts, name).replace("{{", "{").replace("}}", "}"))
        with pytest.raises(OutputParseError, match="copies the prompt's example"):
            {
                "BRIEF": lambda r: parse_brief(r, request="x"),
                "PLAN": lambda r: parse_plan(r, max_sections=3),
                "WRITE": parse_draft,
                "CHECK": lambda r: parse_check(r.replace("<true or false per question>", "true")
                                               .replace("<0.0 to 1.0>", "0.5"), questions=1),
            }[name](reply)  # fmt: skip


@pytest.mark.parametrize(
    ("parse", "reply"),
    [
        (lambda r: parse_brief(r, request="x"), OLD_BRIEF),
        (lambda r: parse_check(r, questions=2), OLD_CHECK),
        (
            lambda r: parse_check(r, questions=1),
            '{"covered": [false], "gaps": [], "contradictions": ["E1 and E2: 45 vs 50 euros"]}',
        ),
        (lambda r: parse_plan(r, max_sections=3), '[{"title": "...", "question": "..."}]'),
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
    check = parse_check(
        '{"covered": [false], "gaps": ["Kestrel Energy lead time"], "score": 0.4}', questions=1
    )
    assert check.gaps == ["Kestrel Energy lead time"]
    draft = parse_draft(
        json.dumps({"title": "R", "sections": [{"title": "A", "text": "Line one<br>two [E1]."}]})
    )
    assert draft.sections[0].text == "Line one<br>two [E1]."
    assert not copied("Costs rose from 45 to 50 euros [E2].")
    assert copied("<value in one> vs <value in the other>") and copied("search query")


def test_a_run_with_a_model_that_copies_the_examples_spends_nothing_on_them() -> None:
    """Brief and check copy the old examples every time, the findings tool copies its
    placeholder: no "question" to answer, no revision for "search query", no invented
    contradiction, and the claim in the report is the deep search's, with its citation."""
    llm = ScriptedChatModel()
    _script(llm)
    llm.add_rule("TASK: research-brief", OLD_BRIEF)
    llm.add_rule("TASK: research-check", OLD_CHECK)
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
    report, _ = _run(llm)
    assert llm.aborted  # the two sections' answers did collide
    assert {f.section for f in report.findings} == {"Battery supplier", "Lyon office"}
    assert report.degraded and all(d.endswith("written again") for d in report.degraded)
    assert not report.missing


def test_a_planned_section_that_found_nothing_citable_is_named_as_missing() -> None:
    llm = ScriptedChatModel()
    _script(llm)
    llm.add_rule(lambda p: "TASK: answer" in p and "Lyon" in p, "The documents do not state it.")
    report, _ = _run(llm)
    assert report.missing == ["section 'Lyon office': no cited evidence found"]
    assert "> **Missing:** section 'Lyon office'" in report.to_markdown()
    assert "Kestrel Energy" in report.to_markdown()
