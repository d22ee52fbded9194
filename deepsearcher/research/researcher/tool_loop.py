"""A researcher's bounded tool loop: at most ``max_tool_steps`` replies, each calling one tool
(JSON in the reply) or several (native calls). The tools: private ``search``, ``web_search``
and ``fetch`` (with a web tool), the evidence-bound ``calculator`` (when the request asks for
figures), ``think``, and the final ``findings`` call with structured findings and hypotheses.
An unknown tool or bad arguments go back to the model as an error result."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from functools import partial
from typing import Any

import httpx

from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.llm import Message
from deepsearcher.prompting import escape_document, messages_for
from deepsearcher.research import prompts
from deepsearcher.research.events import ToolCallEvent
from deepsearcher.research.models import Finding
from deepsearcher.research.parsing import copied
from deepsearcher.research.researcher.calculator import CalculatorError, calculate
from deepsearcher.research.researcher.evidence import passage_evidence
from deepsearcher.research.researcher.registry import (
    STRING,
    STRINGS,
    THINK,
    Tool,
    ToolArgumentError,
    ToolRegistry,
    parse_tool_call,
    render_tool_call,
)
from deepsearcher.research.researcher.registry import object_schema as _args
from deepsearcher.research.researcher.workspace import Workspace
from deepsearcher.research.text import is_question
from deepsearcher.tools.fetch import FetchRefused, extract_main_text, trafilatura_available
from deepsearcher.tools.web import MAX_PAGE_CHARS, normalize_url

SEARCH_TOP_K = 4  # passages per search tool call
FINAL_TOOL = "findings"
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_CONSTANTS = frozenset({"1", "100"})  # shares and percentages need them without a source


async def use_tools(ws: Workspace) -> None:
    """At most ``max_tool_steps`` replies; each may call one tool (JSON) or several
    (native). Ends at the ``findings`` call, a reply without a call, or the bound."""
    steps = ws.deps.limits.max_tool_steps
    registry = tool_registry(ws)
    schemas = registry.schemas()
    messages = messages_for(
        prompts.RESEARCH_TOOLS.format(
            question=escape_document(ws.subtask.question),
            tools=registry.describe(),
            steps=steps,
            max_hypotheses=ws.deps.limits.max_hypotheses,
            findings=ws.findings_text(),
            evidence="\n\n".join(ws.render(k) for k in ws.evidence) or "(none)",
        )
    )
    for _ in range(steps):
        try:
            completion = await ws.complete(messages, tools=schemas)
        except (LLMError, BudgetExceeded) as exc:
            ws.note(f"researcher '{ws.title}': tool step stopped ({exc.message})")
            return
        calls = completion.tool_calls or [
            c for c in [parse_tool_call(completion.text)] if c is not None
        ]
        if not calls:
            return  # prose: the model is done; its findings are the deep search's
        turn: list[Message] = []
        for call in calls:
            result = await registry.call(call)
            ws.deps.run.emit(
                ToolCallEvent(
                    tool=call.name,
                    arguments=call.args,
                    result=result.output,
                    error=result.error,
                    section=ws.title,
                )
            )
            turn += [
                {"role": "assistant", "content": render_tool_call(call)},
                {
                    "role": "user",
                    "content": prompts.TOOL_RESULT.format(tool=call.name, output=result.output),
                },
            ]
            if ws.finished:
                return
        messages = [*messages, *turn]
    ws.note(f"researcher '{ws.title}': tool loop stopped after {steps} tool steps")


def tool_registry(ws: Workspace) -> ToolRegistry:
    tools = [
        Tool(
            "search",
            'search the private documents; args {"query": "<words to search for>"}',
            partial(_search, ws),
            _args({"query": STRING}, ["query"]),
        )
    ]
    if ws.deps.run.web is not None:
        tools.append(
            Tool(
                "web_search",
                'search the web; args {"query": "<words to search for>"}',
                partial(_web_search, ws),
                _args({"query": STRING}, ["query"]),
            )
        )
        tools.append(
            Tool(
                "fetch",
                'read a page a web_search returned; args {"url": "<a url it returned>"}',
                partial(_fetch, ws),
                _args({"url": STRING}, ["url"]),
            )
        )
    if ws.deps.run.request.figures:
        tools.append(
            Tool(
                "calculator",
                "a figure derived from numbers in the evidence (sum, difference, ratio, "
                'growth); args {"expression": "(120 - 100) / 100", "evidence": ["E1"], '
                '"claim": "what the figure is"}; every number must appear in that evidence',
                partial(_calculator, ws),
                _args(
                    {"expression": STRING, "evidence": STRINGS, "claim": STRING},
                    ["expression", "evidence", "claim"],
                ),
            )
        )
    tools.append(THINK)
    tools.append(
        Tool(
            FINAL_TOOL,
            'the last call: args {"findings": [{"claim": "<a fact the evidence states>", '
            '"evidence": ["<evidence id>"]}], "hypotheses": [{"statement": "<a claim to '
            'test>", "against": "<a search for evidence against it>"}]}',
            partial(_findings, ws),
            _args(
                {
                    "findings": {
                        "type": "array",
                        "items": _args({"claim": STRING, "evidence": STRINGS}, ["claim"]),
                    },
                    "hypotheses": {
                        "type": "array",
                        "items": _args({"statement": STRING, "against": STRING}, ["statement"]),
                    },
                },
                ["findings"],
            ),
        )
    )
    return ToolRegistry(tools)


async def _search(ws: Workspace, args: Mapping[str, Any]) -> str:
    query = _text_arg(args, "query", "search")
    hits = await ws.search(query, SEARCH_TOP_K)
    if not hits:
        return "no passages found"
    return "\n\n".join(ws.render(ws.add_hit(h)) for h in hits)


async def _web_search(ws: Workspace, args: Mapping[str, Any]) -> str:
    query = _text_arg(args, "query", "web_search")
    assert ws.deps.run.web is not None
    per_query, _ = await ws.deps.run.web.search_many([query], ws.deps.ctx)
    hits = per_query[0] if per_query else []
    if not hits:
        return "no web results (see the run's notes if web search is unavailable)"
    for hit in hits:
        ws.web_urls.add(normalize_url(hit.source))
    return "\n\n".join(ws.render(ws.add_hit(h)) + f"\nurl: {h.source}" for h in hits)


async def _fetch(ws: Workspace, args: Mapping[str, Any]) -> str:
    url = normalize_url(_text_arg(args, "url", "fetch"))
    web = ws.deps.run.web
    assert web is not None
    # Only pages a search returned: a URL the model composed could carry document text
    # out of the machine.
    if url not in ws.web_urls:
        raise ToolArgumentError("fetch only reads pages a web_search returned")
    async with httpx.AsyncClient(timeout=web.settings.timeout_s) as client:
        try:
            page = await web.fetcher.fetch(url, client)
        except FetchRefused as exc:
            raise ToolArgumentError(f"cannot fetch {url}: {exc}") from None
    if not page.content_type.startswith("text/plain") and not trafilatura_available():
        raise ToolArgumentError("page fetch is off: the web extra is not installed")
    text = await asyncio.to_thread(extract_main_text, page)
    if not text:
        raise ToolArgumentError(f"no main text in {url}")
    ev = passage_evidence("web", page.url, None, None, text[:MAX_PAGE_CHARS], kind="web")
    ws.add_evidence(ev)
    return ws.render(ev.id)


async def _calculator(ws: Workspace, args: Mapping[str, Any]) -> str:
    expression = _text_arg(args, "expression", "calculator")
    claim = _text_arg(args, "claim", "calculator")
    keys = ws.keys_of(args.get("evidence"), "calculator")
    passages = " ".join(ws.evidence[k].text for k in keys).replace(",", "")
    found = {n.rstrip(".") for n in _NUMBER.findall(passages)}
    ids = [ws.short_of(k) for k in keys]
    for number in _NUMBER.findall(expression.replace(",", "")):
        if number.rstrip(".") not in found and number not in _CONSTANTS:
            raise ToolArgumentError(f"{number} does not appear in {', '.join(ids)}")
    value = format_number(evaluate(expression))
    ws.findings.append(
        Finding(f"{claim}: {expression.strip()} = {value}", keys, ws.title, expression.strip())
    )
    return value


async def _findings(ws: Workspace, args: Mapping[str, Any]) -> str:
    items = args.get("findings", [])
    if not isinstance(items, list):
        raise ToolArgumentError('findings: "findings" is a list of {"claim", "evidence"}')
    new: list[Finding] = []
    for item in items:
        claim = item.get("claim") if isinstance(item, dict) else None
        if not isinstance(claim, str) or not claim.strip():
            raise ToolArgumentError('findings: each finding needs a "claim"')
        if copied(claim):
            raise ToolArgumentError(
                f"findings: {claim.strip()!r} is the example, not a claim; write the fact "
                "the evidence states"
            )
        keys = ws.keys_of(item.get("evidence"), f"finding {claim[:40]!r}")
        new.append(Finding(" ".join(claim.split()), keys, ws.title))
    proposed: list[tuple[str, str]] = []
    asked: list[str] = []
    for h in args.get("hypotheses") or []:
        statement = h.get("statement") if isinstance(h, dict) else h
        if not isinstance(statement, str) or not statement.strip() or copied(statement):
            continue
        statement = " ".join(statement.split())
        if is_question(statement):  # a question is a gap to report, not a claim to test
            asked.append(statement)
            continue
        against = h.get("against") if isinstance(h, dict) else None
        counter = against if isinstance(against, str) and not copied(against) else ""
        proposed.append((statement, counter or f"not {statement}"))
    ws.findings += new
    ws.proposed = proposed
    ws.questions += asked
    ws.finished = True
    said = f", {len(asked)} question(s) kept as open questions" if asked else ""
    return f"{len(new)} finding(s), {len(proposed)} hypothesis(es) recorded{said}"


def evaluate(expression: str) -> float:
    """``calculate``, its refusals as a ``ToolArgumentError`` for the model."""
    try:
        return calculate(expression)
    except CalculatorError as exc:
        raise ToolArgumentError(exc.message) from None


def format_number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _text_arg(args: Mapping[str, Any], name: str, tool: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolArgumentError(f'{tool} takes a non-empty "{name}" string')
    if copied(value):
        raise ToolArgumentError(f"{tool}: {value.strip()!r} is the example; write your own {name}")
    return value.strip()
