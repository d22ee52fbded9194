"""Researchers with tools and hypotheses (issue #14): after its deep search each researcher
runs a bounded tool loop (search, calculator, think, a final findings call) and tests its
hypotheses for and against. In-process with the ScriptedChatModel over tests/memory_index.py;
the native tool-call path and its fallback to JSON run the real OpenAI client against the
scripted HTTP server. What a reader would notice: figures whose numbers are in the passages
they cite, [n] that all resolve, hypotheses with the passages that decide them."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from deepsearcher.config import LLMSettings, Settings
from deepsearcher.errors import LLMError
from deepsearcher.llm import OpenAIChatModel, ToolCall
from deepsearcher.research import Report, ResearchRequest, stream_research
from deepsearcher.research.events import ResearchEvent
from deepsearcher.research.researcher.calculator import CalculatorError, calculate
from deepsearcher.research.researcher.hypotheses import parse_verdict
from deepsearcher.retrieval import Retriever
from deepsearcher.tools import WebSearchTool, build_web_search_or_unavailable
from tests.llm_server import ScriptedLLMServer, ToolCallsReply
from tests.memory_index import CORPUS, MemoryStore, WordHashEmbedder
from tests.scripted_model import ScriptedChatModel
from tests.test_research import BRIEF, _citations, _script, _server_prompt, _settings
from tests.test_research import _run as _run_research
from tests.test_web import ARTICLE, WebStub, web_settings

NO_KEY_ENV = "DEEPSEARCHER_TEST_UNSET_KEY"


def _run(llm: ScriptedChatModel, settings: Settings | None = None, **request: Any) -> Any:
    """A run with the tool loop on (off by default), three replies long; the brief's other
    question is no revision's gap."""
    request.setdefault("max_revisions", 0)
    request.setdefault("max_tool_steps", 3)
    return _run_research(llm, settings, **request)


PER_DIEM = [{"title": "Per diem", "question": "What is the international per diem?"}]
BATTERY = [{"title": "Battery supplier", "question": "Who supplies the NR-7 battery?"}]
_PASSAGE = re.compile(r'<document id="(E\d+)" source="[^"]*">\n(.*?)\n</document>', re.S)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _id_of(prompt: str, words: str) -> str:
    """The short id the researcher gave the passage containing ``words``."""
    return next(i for i, text in _PASSAGE.findall(prompt) if words in text)


def _call(tool: str, **args: Any) -> str:
    return json.dumps({"tool": tool, "args": args})


def _steps(*replies: Any) -> Any:
    """A tool-loop script: reply n answers the prompt that holds n tool results."""

    def reply(prompt: str) -> Any:
        step = replies[prompt.count("TOOL RESULT (")]
        return step(prompt) if callable(step) else step

    return reply


def _calc(prompt: str) -> str:
    return _call(
        "calculator",
        expression="500 / 95",
        evidence=[_id_of(prompt, "500 dollars"), _id_of(prompt, "95 dollars")],
        claim="Days of per diem the approval limit covers",
    )


def _final(prompt: str, hypotheses: list[Any] | None = None) -> str:
    return _call(
        "findings",
        findings=[
            {
                "claim": "Travel expenses above 500 dollars need approval from the CFO",
                "evidence": [_id_of(prompt, "500 dollars")],
            }
        ],
        hypotheses=hypotheses or [],
    )


def assert_traceable(report: Report) -> None:
    """The report's structural promises: every [n] (text and hypotheses table) has a source,
    every source is evidence from a file, and every calculator figure's numbers appear in the
    evidence it cites."""
    md = report.to_markdown()
    numbers = {s.n for s in report.sources}
    assert _citations(md) <= numbers
    assert sorted(numbers) == list(range(1, len(numbers) + 1))
    evidence = {e.id: e for e in report.evidence}
    for source in report.sources:
        assert evidence[source.evidence_id] is source.evidence
    for finding in report.findings:
        assert finding.evidence and all(e in evidence for e in finding.evidence)
        if finding.expression is None:
            continue
        cited = " ".join(evidence[e].text for e in finding.evidence).replace(",", "")
        for number in _NUMBER.findall(finding.expression):
            assert number in _NUMBER.findall(cited), (number, finding)
    for h in report.hypotheses:
        assert all(e in evidence for e in h.evidence)


def _tool_calls(events: list[ResearchEvent]) -> list[Any]:
    return [e for e in events if e.type == "tool_call"]


def test_a_researcher_searches_computes_a_figure_and_hands_back_findings() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=PER_DIEM)
    llm.add_rule(
        "TASK: research-tools",
        _steps(_call("search", query="travel expenses approval CFO"), _calc, _final),
    )
    report, events = _run(llm, figures=True)
    calls = _tool_calls(events)
    assert [(c.tool, c.error, c.section) for c in calls] == [
        ("search", False, "Per diem"),
        ("calculator", False, "Per diem"),
        ("findings", False, "Per diem"),
    ]
    assert "500 dollars need approval" in calls[0].result  # the search found the passage
    assert calls[1].result == "5.26316"
    figure = next(f for f in report.findings if f.expression)
    assert figure.claim == "Days of per diem the approval limit covers: 500 / 95 = 5.26316"
    assert figure.section == "Per diem" and len(figure.evidence) == 2
    claims = [f.claim for f in report.findings]
    assert "Travel expenses above 500 dollars need approval from the CFO" in claims
    md = report.to_markdown()
    assert re.search(r"500 / 95 = 5\.26316\.? ?\[\d+\]\[\d+\]", md)
    assert_traceable(report)
    # Native schemas were offered with every step; the tool results went back to the model.
    tools_offered = [
        t
        for m, t in zip(llm.history, llm.tools, strict=True)
        if "research-tools" in m[1]["content"][:30]
    ]
    assert len(tools_offered) == 3
    assert tools_offered[0] is not None
    assert {t["function"]["name"] for t in tools_offered[0]} == {
        "search",
        "calculator",
        "think",
        "findings",
    }
    assert report.usage.llm_calls == len(llm.history)


def test_unknown_tools_and_bad_arguments_go_back_to_the_model_and_the_run_goes_on() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=PER_DIEM)
    llm.add_rule(
        "TASK: research-tools",
        _steps(
            _call("shell", cmd="ls"),
            json.dumps({"tool": "search", "args": "per diem"}),
            _call("search", query=""),
            lambda p: _call(
                "calculator",
                expression="95 * 30",
                evidence=[_id_of(p, "95 dollars")],
                claim="A month of per diem",
            ),
            _call("findings", findings=[{"claim": "No source", "evidence": ["E77"]}]),
            _call("findings", findings=[]),
        ),
    )
    report, events = _run(llm, figures=True, max_tool_steps=6)
    calls = _tool_calls(events)
    assert [(c.tool, c.error) for c in calls] == [
        ("shell", True),
        ("search", True),
        ("search", True),
        ("calculator", True),
        ("findings", True),
        ("findings", False),
    ]
    assert "unknown tool 'shell'; tools: search, calculator, think, findings" in calls[0].result
    assert "takes a JSON object of arguments" in calls[1].result
    assert 'non-empty "query"' in calls[2].result
    assert "30 does not appear in E1" in calls[3].result
    assert "unknown evidence id(s) ['E77']" in calls[4].result
    # Each error reached the model in the next step's prompt.
    last = llm.calls("research-tools")[-1]
    assert "TOOL RESULT (shell): error: unknown tool 'shell'" in last[3]["content"]
    assert "TOOL RESULT (calculator): error: 30 does not appear in E1" in last[9]["content"]
    assert not any(f.expression for f in report.findings)  # no figure without its numbers
    assert "95 dollars per day" in report.to_markdown()  # the run went on to a report
    assert not report.missing
    assert_traceable(report)


def test_the_calculator_refuses_anything_but_arithmetic() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=PER_DIEM)
    llm.add_rule(
        "TASK: research-tools",
        _steps(
            lambda p: _call(
                "calculator",
                expression="abs(95)",
                evidence=[_id_of(p, "95 dollars")],
                claim="x",
            ),
            lambda p: _call(
                "calculator", expression="95 ** 95 ** 95", evidence=[_id_of(p, "95")], claim="y"
            ),
            "No figure to add.",
        ),
    )
    report, events = _run(llm, figures=True)
    results = [(c.result, c.error) for c in _tool_calls(events)]
    assert results[0][1] and "not allowed in arithmetic: Call" in results[0][0]
    assert results[1][1] and "too large" in results[1][0]
    assert not any(f.expression for f in report.findings)


def test_without_figures_the_researchers_have_no_calculator() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=PER_DIEM)
    figure = _call("calculator", expression="95 * 2", evidence=["E1"], claim="two days")
    llm.add_rule("TASK: research-tools", _steps(figure, "Done."))
    _, events = _run(llm)
    (call,) = _tool_calls(events)
    assert call.error and "unknown tool 'calculator'; tools: search, think, findings" in call.result


def test_a_tool_loop_that_never_ends_stops_at_its_bound_with_a_note() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=PER_DIEM)
    llm.add_rule("TASK: research-tools", _call("think", thought="one more search, maybe"))
    report, events = _run(llm, max_tool_steps=3)
    assert len(llm.calls("research-tools")) == 3
    assert [c.tool for c in _tool_calls(events)] == ["think"] * 3
    assert "researcher 'Per diem': tool loop stopped after 3 tool steps" in report.notes
    assert "95 dollars per day" in report.to_markdown()  # the deep search's findings stay


def test_tool_steps_stop_when_the_researchers_share_of_the_budget_is_spent() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=PER_DIEM)
    _, events = _run(llm, max_tool_steps=0)
    (deep_search,) = [e.calls for e in events if e.type == "researcher_finished"]
    llm = ScriptedChatModel()
    _script(llm, plan=PER_DIEM)
    llm.add_rule("TASK: research-tools", _call("think", thought="and another"))
    # Brief and plan, and a share of one call beyond the search (the draft makes no call).
    budget = 2 + deep_search + 1
    report, events = _run(llm, max_llm_calls=budget, max_revisions=0)
    assert len(llm.calls("research-tools")) == 1
    share = deep_search + 1
    assert (
        f"researcher 'Per diem': tool step stopped (researcher budget of {share} call(s) spent)"
        in report.notes
    )
    (finished,) = [e for e in events if e.type == "researcher_finished"]
    assert finished.calls == share
    assert report.usage.llm_calls <= budget and "95 dollars per day" in report.to_markdown()


def test_max_tool_steps_zero_is_the_deep_search_alone() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=PER_DIEM)
    report, events = _run(llm, max_tool_steps=0)
    assert not llm.calls("research-tools") and not _tool_calls(events)
    assert "95 dollars per day" in report.to_markdown()


def _judge(prompt: str) -> str:
    """Supports the Kestrel hypothesis with the passage naming Kestrel; refutes the Lyon
    headcount with the passage giving the real one; a status without ids for anything else."""
    statement = re.search(r"^Hypothesis: (.*)$", prompt, re.M)
    assert statement is not None
    if "Kestrel" in statement.group(1):
        return json.dumps({"status": "supported", "evidence": [_id_of(prompt, "Kestrel")]})
    if "four hundred" in statement.group(1):
        return f"Refuted: the passage {_id_of(prompt, 'forty employees')} says forty."
    return json.dumps({"status": "supported", "evidence": []})


HYPOTHESES = [
    {"statement": "Kestrel Energy supplies the NR-7 battery", "against": "NR-7 battery maker"},
    {"statement": "The Lyon office has four hundred employees", "against": "Lyon headcount"},
    {"statement": "A third hypothesis is never tested"},
]


def test_hypotheses_are_tested_for_and_against_and_reach_the_report() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=BATTERY)
    llm.add_rule(
        "TASK: research-tools",
        lambda p: _call("findings", findings=[], hypotheses=HYPOTHESES),
    )
    llm.add_rule("TASK: research-hypothesis", _judge)
    report, events = _run(llm)
    statuses = {h.statement: h.status for h in report.hypotheses}
    # The researchers' two (the draft listed two others), the third beyond the bound untested.
    assert statuses["Kestrel Energy supplies the NR-7 battery"] == "supported"
    assert statuses["The Lyon office has four hundred employees"] == "refuted"
    assert "A third hypothesis is never tested" not in statuses
    assert len(llm.calls("research-hypothesis")) == Settings().research.max_hypotheses
    assert "researcher 'Battery supplier': 1 hypothesis(es) beyond 2 not tested" in report.notes
    evidence = {e.id: e.text for e in report.evidence}
    kestrel = next(h for h in report.hypotheses if "Kestrel" in h.statement)
    lyon = next(h for h in report.hypotheses if "four hundred" in h.statement)
    assert any("Kestrel Energy" in evidence[e] for e in kestrel.evidence)
    assert lyon.evidence == []  # refuted: the passage that decides it is evidence against
    assert any("forty employees" in evidence[e] for e in lyon.against)
    # Each judge call saw the passages found for and against the statement.
    prompt = llm.calls("research-hypothesis")[1][1]["content"]
    assert "Passages found for it:" in prompt and "forty employees" in prompt

    # The hypotheses table cites resolving sources.
    md = report.to_markdown()
    row = next(line for line in md.splitlines() if line.startswith("| The Lyon office"))
    n = int(re.findall(r"\[(\d+)\]", row)[0])
    source = next(s for s in report.sources if s.n == n)
    assert "forty employees" in evidence[source.evidence_id]
    assert_traceable(report)
    seen = [
        (e.hypothesis.status, e.section) for e in events if e.type == "hypothesis" and e.hypothesis
    ]
    assert ("supported", "Battery supplier") in seen and ("refuted", "Battery supplier") in seen


def test_the_hypotheses_setting_bounds_what_each_researcher_tests() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=BATTERY)
    llm.add_rule(
        "TASK: research-tools",
        lambda p: _call("findings", findings=[], hypotheses=HYPOTHESES),
    )
    llm.add_rule("TASK: research-hypothesis", _judge)
    settings = _settings()
    settings.research.max_hypotheses = 1
    report, _ = _run(llm, settings)
    assert len(llm.calls("research-hypothesis")) == 1
    assert "researcher 'Battery supplier': 2 hypothesis(es) beyond 1 not tested" in report.notes


def test_a_verdict_without_its_passages_leaves_the_hypothesis_open() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=BATTERY)
    hypotheses = [{"statement": "The NR-7 arm carries twelve kilograms"}]
    llm.add_rule("TASK: research-tools", _call("findings", findings=[], hypotheses=hypotheses))
    llm.add_rule("TASK: research-hypothesis", _judge)  # "supported", no evidence ids
    report, _ = _run(llm)
    h = next(h for h in report.hypotheses if "twelve" in h.statement)
    assert (h.status, h.evidence) == ("open", [])


@pytest.mark.parametrize(
    ("reply", "status", "ids"),
    [
        ('{"status": "Refuted", "evidence": ["E2"]}', "refuted", ["E2"]),
        (
            '<think>hmm</think>```json\n{"status": "supported", "evidence": ["E1"]}\n```',
            "supported",
            ["E1"],
        ),
        ("It is supported by E3 and E4.", "supported", ["E3", "E4"]),
        ("I cannot tell.", "open", []),
        ('{"status": "probably", "evidence": "E1"}', "open", ["E1"]),
    ],
)
def test_hypothesis_verdicts_parse_tolerantly(reply: str, status: str, ids: list[str]) -> None:
    assert parse_verdict(reply) == (status, ids)


# -- native tool calls through the real client --------------------------------------------


def _client(server: ScriptedLLMServer, **fields: Any) -> OpenAIChatModel:
    settings = LLMSettings(
        base_url=server.base_url, api_key_env=NO_KEY_ENV, model="m", timeout_s=5, max_retries=0
    )
    return OpenAIChatModel(settings.model_copy(update=fields), backoff_base_s=0.01)


SCHEMA = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
ASK = [{"role": "user", "content": "TASK: research-tools\nfind it"}]


def test_native_tool_calls_come_back_parsed(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(
        "research-tools",
        ToolCallsReply([("search", {"query": "battery"}), ("think", "{not json")]),
    )
    completion = asyncio.run(_client(llm_server).complete(ASK, tools=SCHEMA))
    assert completion.tool_calls == [
        ToolCall("search", {"query": "battery"}, "call_0"),
        ToolCall("think", {"_invalid": "{not json"}, "call_1"),
    ]
    assert completion.finish_reason == "tool_calls"
    assert llm_server.requests[0]["tools"] == SCHEMA


def test_a_server_that_rejects_tools_gets_json_tool_calls(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_fault("400", times=None, match=lambda req: "tools" in req)
    llm_server.add_rule("research-tools", _call("search", query="battery"))
    model = _client(llm_server)  # llm.tool_calls: auto

    async def twice() -> list[str]:
        return [(await model.complete(ASK, tools=SCHEMA)).text for _ in range(2)]

    assert asyncio.run(twice()) == [_call("search", query="battery")] * 2
    # Rejected once, then the model stops offering native tools.
    assert ["tools" in r for r in llm_server.requests] == [True, False, False]
    llm_server.reset()
    llm_server.add_fault("400", times=None, match=lambda req: "tools" in req)
    with pytest.raises(LLMError, match="400 scripted bad request"):
        asyncio.run(_client(llm_server, tool_calls="native").complete(ASK, tools=SCHEMA))
    llm_server.reset()
    asyncio.run(_client(llm_server, tool_calls="json").complete(ASK, tools=SCHEMA))
    assert "tools" not in llm_server.requests[0]


def _memory_run(server: ScriptedLLMServer, **request: Any) -> tuple[Report, list[ResearchEvent]]:
    """A whole research run through OpenAIChatModel and the scripted HTTP server."""
    settings = _settings()
    store = MemoryStore(WordHashEmbedder())
    store.add("docs", CORPUS)
    retriever = Retriever(WordHashEmbedder(), store, settings)
    llm = _client(server)

    async def go() -> list[ResearchEvent]:
        request.setdefault("max_revisions", 0)  # the brief's other questions are no gap here
        request.setdefault("max_tool_steps", 3)
        req = ResearchRequest("Brief me on the per diem", **request)
        return [e async for e in stream_research(settings, llm, retriever, req)]

    events = asyncio.run(go())
    last = events[-1]
    assert last.type == "done" and last.report is not None
    return last.report, events


def _serve_research(server: ScriptedLLMServer, plan: list[dict[str, Any]]) -> None:
    server.add_rule("TASK: research-brief", json.dumps(BRIEF))
    server.add_rule("TASK: research-plan", json.dumps(plan))


def _tool_requests(server: ScriptedLLMServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if "TASK: research-tools" in _server_prompt(r)]


def test_a_whole_run_with_native_tool_calls_through_the_openai_client(
    llm_server: ScriptedLLMServer,
) -> None:
    _serve_research(llm_server, PER_DIEM)

    def step(req: dict[str, Any]) -> ToolCallsReply:
        prompt = _server_prompt(req)
        n = prompt.count("TOOL RESULT (")
        if n == 0:
            return ToolCallsReply([("search", {"query": "travel expenses approval CFO"})])
        if n == 1:
            return ToolCallsReply([("calculator", json.loads(_calc(prompt))["args"])])
        hypothesis = {"statement": "Kestrel Energy supplies the NR-7 battery"}
        return ToolCallsReply([("findings", json.loads(_final(prompt, [hypothesis]))["args"])])

    llm_server.add_rule("TASK: research-tools", step)
    llm_server.add_rule("TASK: research-hypothesis", lambda req: _judge(_server_prompt(req)))
    report, events = _memory_run(llm_server, figures=True)
    assert [(c.tool, c.error) for c in _tool_calls(events)] == [
        ("search", False),
        ("calculator", False),
        ("findings", False),
    ]
    requests = _tool_requests(llm_server)
    assert len(requests) == 3 and all("tools" in r for r in requests)
    # The conversation goes on in plain messages, which every server accepts.
    assert {m["role"] for m in requests[-1]["messages"]} == {"system", "user", "assistant"}
    assert any(f.expression == "500 / 95" for f in report.findings)
    assert {h.statement: h.status for h in report.hypotheses}[
        "Kestrel Energy supplies the NR-7 battery"
    ] == "supported"
    assert_traceable(report)
    assert report.usage.llm_calls == len(llm_server.requests)


def test_a_whole_run_falls_back_to_json_tool_calls_when_tools_are_rejected(
    llm_server: ScriptedLLMServer,
) -> None:
    _serve_research(llm_server, PER_DIEM)
    llm_server.add_fault("400", times=None, match=lambda req: "tools" in req)
    llm_server.add_rule(
        "TASK: research-tools",
        lambda req: _steps(_call("search", query="travel expenses approval CFO"), _calc, _final)(
            _server_prompt(req)
        ),
    )
    report, _ = _memory_run(llm_server, figures=True)
    requests = _tool_requests(llm_server)
    assert ["tools" in r for r in requests] == [True, False, False, False]
    assert any(f.expression == "500 / 95" for f in report.findings)
    assert_traceable(report)


# -- web_search and fetch -----------------------------------------------------------------


@pytest.fixture
def stub() -> Iterator[WebStub]:
    with WebStub() as s:
        yield s


def test_web_search_and_fetch_become_web_evidence_with_their_url(stub: WebStub) -> None:
    stub.pages["a"] = ARTICLE
    page = f"{stub.url}/page/a"
    stub.results = [{"title": "care", "url": page, "content": "Falcon battery care snippet"}]
    settings = web_settings(_settings(), stub, allow_private_hosts=True)
    web = WebSearchTool(build_web_search_or_unavailable(settings.web_search), settings.web_search)
    llm = ScriptedChatModel()
    _script(llm, plan=PER_DIEM)
    llm.add_rule(
        "TASK: research-tools",
        _steps(
            _call("web_search", query="falcon battery warranty"),
            _call("fetch", url="http://169.254.169.254/latest/meta-data"),
            _call("fetch", url=page),
            lambda p: _call(
                "findings",
                findings=[
                    {
                        "claim": "A swollen Falcon battery is replaced within ten working days",
                        "evidence": [_id_of(p, "ten working days")],
                    }
                ],
            ),
        ),
    )
    store = MemoryStore(WordHashEmbedder())
    store.add("docs", CORPUS)
    retriever = Retriever(WordHashEmbedder(), store, settings)

    async def go() -> list[ResearchEvent]:
        req = ResearchRequest("Falcon battery warranty", max_revisions=0, max_tool_steps=4)
        return [e async for e in stream_research(settings, llm, retriever, req, web=web)]

    events = asyncio.run(go())
    last = events[-1]
    assert last.type == "done" and last.report is not None
    report = last.report
    calls = _tool_calls(events)
    assert [(c.tool, c.error) for c in calls] == [
        ("web_search", False),
        ("fetch", True),
        ("fetch", False),
        ("findings", False),
    ]
    assert "fetch only reads pages a web_search returned" in calls[1].result
    assert "/latest/meta-data" not in stub.everything_received()  # refused before any request
    assert "ten working days" in calls[2].result and "Copyright" not in calls[2].result
    finding = next(f for f in report.findings if "ten working days" in f.claim)
    (eid,) = finding.evidence
    ev = next(e for e in report.evidence if e.id == eid)
    assert (ev.kind, ev.source) == ("web", page)
    assert f"] {page}" in report.to_markdown().split("## Sources")[1]
    assert_traceable(report)


@pytest.mark.parametrize("expression", ["(1,2)", "1,5 * 2", "1,2345", "1,250,00", "max(1, 2)"])
def test_the_calculator_reads_a_comma_only_as_a_thousands_separator(expression: str) -> None:
    # Dropping every comma read the tuple (1,2) as 12 and the decimal comma 1,5 as 15.
    with pytest.raises(CalculatorError) as refused:
        calculate(expression)
    if "max" not in expression:
        assert "comma" in refused.value.message and "1.5" in (refused.value.hint or "")
    assert calculate("1,250,000.5 * 2") == 2500001.0
    assert calculate("12,500 - 2,000") == 10500
