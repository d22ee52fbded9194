"""One researcher: the deep-search loop on its subtask, then a bounded ReAct phase with its own
tools, then its hypotheses tested for and against.

1. The existing ``DeepSearchAgent`` loop answers the subtask; each cited sentence becomes a
   finding (no extra call).
2. At most ``research.max_tool_steps`` replies of a tool loop: private ``search``,
   ``web_search`` and ``fetch`` (with a web tool), the evidence-bound ``calculator`` (when the
   request asks for figures), ``think``, and a final ``findings`` call with structured findings
   and hypotheses. Calls are native (``tools=`` schemas) or JSON in the reply; an unknown tool
   or bad arguments go back to the model as an error result. The model sees short evidence ids
   (E1, E2...); the ``SectionResult`` carries passage keys that ``_Run.merge`` maps to the
   run's ids.
3. Up to ``research.max_hypotheses`` hypotheses: two searches each (the statement, and a query for
   evidence against it) and one verdict call: supported, refuted or open, with evidence ids.

Every call goes through ``SharedBudgetModel`` (the run's one budget) and stays within the
researcher's share of it."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from deepsearcher.agents import DeepSearchAgent
from deepsearcher.agents.base import (
    escape_attribute,
    escape_document,
    messages_for,
    new_answer,
    write_answer,
)
from deepsearcher.agents.parsing import OutputParseError, clean_output
from deepsearcher.config import Settings
from deepsearcher.errors import BudgetExceeded, DeepSearcherError, LLMError
from deepsearcher.llm import ChatModel, Completion, Message, ToolSchema
from deepsearcher.options import QueryOptions
from deepsearcher.research import prompts
from deepsearcher.research.budget import (
    MIN_RESEARCHER_CALLS,
    WRITE_RESERVE_CALLS,
    CallGate,
    SharedBudgetModel,
)
from deepsearcher.research.events import (
    HypothesisEvent,
    ResearchEvent,
    ResearchNoteEvent,
    ToolCallEvent,
)
from deepsearcher.research.evidence import (
    answer_as_finding,
    evidence_of,
    findings_from_answer,
    passage_evidence,
)
from deepsearcher.research.models import (
    Evidence,
    Finding,
    Hypothesis,
    HypothesisStatus,
    ResearchRequest,
    SectionResult,
    Subtask,
)
from deepsearcher.research.parsing import copied, json_object
from deepsearcher.research.tools import (
    STRING,
    STRINGS,
    THINK,
    Tool,
    ToolArgumentError,
    ToolRegistry,
    evaluate,
    format_number,
    parse_tool_call,
    render_tool_call,
)
from deepsearcher.research.tools import (
    object_schema as _args,
)
from deepsearcher.retrieval import Retriever
from deepsearcher.run_context import RunContext
from deepsearcher.tools.fetch import FetchRefused, extract_main_text, trafilatura_available
from deepsearcher.tools.web import MAX_PAGE_CHARS, WebSearchTool, normalize_url
from deepsearcher.types import Answer, Hit, Source

logger = logging.getLogger(__name__)

SEARCH_TOP_K = 4  # passages per search tool call
HYPOTHESIS_TOP_K = 3  # passages per side of a hypothesis
PROMPT_EVIDENCE_CHARS = 400
FINAL_TOOL = "findings"
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_CONSTANTS = frozenset({"1", "100"})  # shares and percentages need them without a source
_STATUS = re.compile(r"\b(supported|refuted|open)\b", re.IGNORECASE)
_SHORT_ID = re.compile(r"E\d+")
# Notes of a researcher whose answer step produced no generated answer (only passages).
_NO_ANSWER_NOTES = ("answer step failed", "no time left to write the answer", "LLM unreachable")


@dataclass
class ResearcherDeps:
    """What every researcher of a run shares: its components and the run's one budget."""

    settings: Settings
    llm: ChatModel
    retriever: Retriever
    request: ResearchRequest
    ctx: RunContext
    emit: Callable[[ResearchEvent], None]
    web: WebSearchTool | None = None
    max_tool_steps: int = 3  # the run's limits (research.* unless the request set them)
    max_hypotheses: int = 2  # each costs 2 searches and 1 verdict call
    gate: CallGate = field(default_factory=CallGate)  # one per run: every researcher's calls


@dataclass
class Researcher:
    deps: ResearcherDeps
    subtask: Subtask
    budget: int  # LLM calls, its share of the run's budget
    left: int = field(default=0, init=False)  # after the deep search: tools, hypotheses
    model: ChatModel = field(init=False)
    evidence: dict[str, Evidence] = field(default_factory=dict)  # passage key -> evidence
    short: dict[str, str] = field(default_factory=dict)  # E1 -> passage key (what prompts see)
    short_ids: dict[str, str] = field(default_factory=dict)  # passage key -> E1
    findings: list[Finding] = field(default_factory=list)
    hypotheses: list[Hypothesis] = field(default_factory=list)
    proposed: list[tuple[str, str]] = field(default_factory=list)  # (statement, counter query)
    web_urls: set[str] = field(default_factory=set)  # fetch only what web_search returned
    calls: int = 0  # LLM calls after the deep search
    finished: bool = False
    _collections: list[str] | None = None

    def __post_init__(self) -> None:
        self.model = SharedBudgetModel(
            self.deps.llm, self.deps.ctx, WRITE_RESERVE_CALLS, self.deps.gate
        )

    @property
    def title(self) -> str:
        return self.subtask.title

    def note(self, message: str) -> None:
        self.deps.ctx.note(message)
        self.deps.emit(ResearchNoteEvent(message=message))

    async def research(self) -> SectionResult:
        extra = self.deps.max_tool_steps + self.deps.max_hypotheses
        # The deep search leaves the tools their calls only when that still leaves it enough.
        reserve = extra if self.budget - extra >= 2 * MIN_RESEARCHER_CALLS else 0
        answer = await self.deep_search(self.budget - reserve)
        result = SectionResult(self.subtask, budget=self.budget, calls=answer.usage.llm_calls)
        result.cut_short = answer.cut_short
        self.left = self.budget - answer.usage.llm_calls
        failed = next((n for n in answer.notes if n.startswith(_NO_ANSWER_NOTES)), None)
        if (
            answer.mode == "retrieval-only"
            or (failed and not answer.sources)
            or (failed and self.budget_spent())
        ):
            result.error = f"no findings: {failed or 'the LLM could not be reached'}"
            return result
        if failed:
            answer, result.degraded = await self.answer_again(answer, failed)
        findings, evidence = findings_from_answer(answer, self.title)
        if not findings:  # no usable [n]: the answer itself, where its passages bear it out
            findings, evidence = answer_as_finding(answer, self.title)
            if findings:
                self.note(
                    f"researcher '{self.title}': its answer cited no passage; kept as one "
                    f"finding on the {len(evidence)} passage(s) that hold its terms"
                )
        for ev in evidence:
            self.add_evidence(ev)
        self.findings = findings
        if self.deps.max_tool_steps > 0:
            await self.use_tools()
        if len(self.proposed) > self.deps.max_hypotheses:
            dropped = len(self.proposed) - self.deps.max_hypotheses
            self.note(
                f"researcher '{self.title}': {dropped} hypothesis(es) beyond "
                f"{self.deps.max_hypotheses} not tested"
            )
        for statement, against in self.proposed[: self.deps.max_hypotheses]:
            await self.test_hypothesis(statement, against)
        result.calls += self.calls
        result.findings, result.hypotheses = self.findings, self.hypotheses
        cited = {k for f in self.findings for k in f.evidence}
        cited |= {k for h in self.hypotheses for k in h.evidence}
        result.evidence = [e for k, e in self.evidence.items() if k in cited]
        return result

    def budget_spent(self) -> bool:
        """The run's budget refuses more calls: the section ends, cut short, as it is."""
        try:
            self.deps.ctx.check_budget(WRITE_RESERVE_CALLS)
        except BudgetExceeded:
            return True
        return self.deps.ctx.search_remaining_s() <= 0

    async def answer_again(self, first: Answer, failed: str) -> tuple[Answer, str]:
        """The section's answer written once more from the passages its search kept (an
        answer step fails on a stream the server aborted or a timeout, not on the evidence);
        when that fails too, the first answer, which quotes the passages with their
        citations. Either way the section says so (the second value), in the report too."""
        self.note(f"researcher '{self.title}': {failed}; writing the answer once more")
        hits = [_hit_of(s) for s in first.sources]
        settings = self.deps.settings.model_copy(deep=True)
        settings.query.max_llm_calls = max(1, self.left - self.calls)
        # Alone: no other researcher's request can abort this stream (the first one may have
        # failed that way); the others wait for this one call.
        model = SharedBudgetModel(self.deps.llm, self.deps.ctx, WRITE_RESERVE_CALLS)
        answer = new_answer(self.subtask.question, "deep")
        if self.calls < self.left:
            async with self.deps.gate.alone():
                ctx = RunContext.create(
                    settings,
                    model,
                    max(self.deps.ctx.search_remaining_s(), 0.001),
                    "research time budget",
                )
                async for _ in write_answer(ctx, self.subtask.question, hits, answer):
                    pass
            self.calls += 1
            again = next((n for n in ctx.notes if n.startswith(_NO_ANSWER_NOTES)), None)
            if again is None and answer.answer:
                return answer, f"the first answer failed ({failed}); written again"
            failed = again or failed
        else:
            failed = f"{failed}; no call left to write it again"
        return first, f"no answer was written ({failed}); its passages are quoted as found"

    async def deep_search(self, budget: int) -> Answer:
        run = self.deps
        settings = run.settings.model_copy(deep=True)
        settings.query.max_llm_calls = budget
        agent = DeepSearchAgent(settings, self.model, run.retriever, run.web)
        options = QueryOptions(
            collections=run.request.collections,
            timeout_s=max(run.ctx.search_remaining_s(), 0.001),
            budget_name="research time budget",
        )
        answer: Answer | None = None
        async for event in agent.run(self.subtask.question, options):
            if event.type == "done":
                answer = event.answer
        assert answer is not None, "the deep-search loop ended without an answer"
        return answer

    # -- evidence the model can cite by short id ----------------------------------------------

    def add_evidence(self, ev: Evidence) -> str:
        """The short id of a passage (E1, E2... in this researcher's prompts)."""
        if ev.id not in self.evidence:
            self.evidence[ev.id] = ev
            self.short[f"E{len(self.short) + 1}"] = ev.id
            self.short_ids[ev.id] = f"E{len(self.short)}"
        return self.short_ids[ev.id]

    def short_of(self, key: str) -> str:
        return self.short_ids[key]

    def keys_of(self, ids: Any, what: str) -> list[str]:
        """Passage keys of the short ids a tool call names; an unknown id is an error."""
        if isinstance(ids, str):
            ids = _SHORT_ID.findall(ids)
        if not isinstance(ids, list) or not ids:
            raise ToolArgumentError(f'{what}: name the evidence ids it rests on, e.g. ["E1"]')
        unknown = [i for i in ids if i not in self.short]
        if unknown:
            known = ", ".join(self.short) or "none yet: search first"
            raise ToolArgumentError(f"{what}: unknown evidence id(s) {unknown}; known: {known}")
        return list(dict.fromkeys(self.short[i] for i in ids))

    def render(self, key: str) -> str:
        ev = self.evidence[key]
        attributes = f'id="{self.short_of(key)}" source="{escape_attribute(ev.label)}"'
        text = escape_document(ev.text[:PROMPT_EVIDENCE_CHARS])
        return f"<document {attributes}>\n{text}\n</document>"

    def findings_text(self) -> str:
        lines = []
        for f in self.findings:
            refs = "".join(f"[{self.short_of(k)}]" for k in f.evidence)
            lines.append(f"- {escape_document(f.claim)} {refs}")
        return "\n".join(lines) or "(none)"

    # -- 2. the tool loop -------------------------------------------------------------------

    def registry(self) -> ToolRegistry:
        tools = [
            Tool(
                "search",
                'search the private documents; args {"query": "<words to search for>"}',
                self._search,
                _args({"query": STRING}, ["query"]),
            )
        ]
        if self.deps.web is not None:
            tools.append(
                Tool(
                    "web_search",
                    'search the web; args {"query": "<words to search for>"}',
                    self._web_search,
                    _args({"query": STRING}, ["query"]),
                )
            )
            tools.append(
                Tool(
                    "fetch",
                    'read a page a web_search returned; args {"url": "<a url it returned>"}',
                    self._fetch,
                    _args({"url": STRING}, ["url"]),
                )
            )
        if self.deps.request.figures:
            tools.append(
                Tool(
                    "calculator",
                    "a figure derived from numbers in the evidence (sum, difference, ratio, "
                    'growth); args {"expression": "(120 - 100) / 100", "evidence": ["E1"], '
                    '"claim": "what the figure is"}; every number must appear in that evidence',
                    self._calculator,
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
                self._findings,
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

    async def use_tools(self) -> None:
        """At most ``max_tool_steps`` replies; each may call one tool (JSON) or several
        (native). Ends at the ``findings`` call, a reply without a call, or the bound."""
        steps = self.deps.max_tool_steps
        registry = self.registry()
        schemas = registry.schemas()
        messages = messages_for(
            prompts.RESEARCH_TOOLS.format(
                question=escape_document(self.subtask.question),
                tools=registry.describe(),
                steps=steps,
                max_hypotheses=self.deps.max_hypotheses,
                findings=self.findings_text(),
                evidence="\n\n".join(self.render(k) for k in self.evidence) or "(none)",
            )
        )
        for _ in range(steps):
            try:
                completion = await self.complete(messages, tools=schemas)
            except (LLMError, BudgetExceeded) as exc:
                self.note(f"researcher '{self.title}': tool step stopped ({exc.message})")
                return
            calls = completion.tool_calls or [
                c for c in [parse_tool_call(completion.text)] if c is not None
            ]
            if not calls:
                return  # prose: the model is done; its findings are the deep search's
            turn: list[Message] = []
            for call in calls:
                result = await registry.call(call)
                self.deps.emit(
                    ToolCallEvent(
                        tool=call.name,
                        arguments=call.args,
                        result=result.output,
                        error=result.error,
                        section=self.title,
                    )
                )
                turn += [
                    {"role": "assistant", "content": render_tool_call(call)},
                    {
                        "role": "user",
                        "content": prompts.TOOL_RESULT.format(tool=call.name, output=result.output),
                    },
                ]
                if self.finished:
                    return
            messages = [*messages, *turn]
        self.note(f"researcher '{self.title}': tool loop stopped after {steps} tool steps")

    async def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSchema] | None = None
    ) -> Completion:
        """One call within the researcher's share and the run's search time."""
        if self.calls >= self.left:
            raise BudgetExceeded(f"researcher budget of {self.budget} call(s) spent")
        left = self.deps.ctx.search_remaining_s()
        if left <= 0:
            raise BudgetExceeded(self.deps.ctx.time_reason())
        try:
            completion = await asyncio.wait_for(self.model.complete(messages, tools=tools), left)
        except asyncio.TimeoutError:
            raise BudgetExceeded(self.deps.ctx.time_reason()) from None
        self.calls += 1
        return completion

    async def search(self, query: str, top_k: int) -> list[Hit]:
        run = self.deps
        if self._collections is None:
            infos = await run.retriever.available_collections()
            self._collections, _ = await run.retriever.searchable(run.request.collections, infos)
        hits = await run.ctx.in_time(run.retriever.search([query], self._collections, top_k))
        return hits[0] if hits else []

    async def _search(self, args: Mapping[str, Any]) -> str:
        query = _text_arg(args, "query", "search")
        hits = await self.search(query, SEARCH_TOP_K)
        if not hits:
            return "no passages found"
        return "\n\n".join(self.render(self.add_hit(h)) for h in hits)

    def add_hit(self, hit: Hit) -> str:
        """The passage key of a hit, its evidence registered."""
        ev = evidence_of(hit)
        self.add_evidence(ev)
        return ev.id

    async def _web_search(self, args: Mapping[str, Any]) -> str:
        query = _text_arg(args, "query", "web_search")
        assert self.deps.web is not None
        per_query, _ = await self.deps.web.search_many([query], self.deps.ctx)
        hits = per_query[0] if per_query else []
        if not hits:
            return "no web results (see the run's notes if web search is unavailable)"
        for hit in hits:
            self.web_urls.add(normalize_url(hit.source))
        return "\n\n".join(self.render(self.add_hit(h)) + f"\nurl: {h.source}" for h in hits)

    async def _fetch(self, args: Mapping[str, Any]) -> str:
        url = normalize_url(_text_arg(args, "url", "fetch"))
        web = self.deps.web
        assert web is not None
        # Only pages a search returned: a URL the model composed could carry document text
        # out of the machine.
        if url not in self.web_urls:
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
        self.add_evidence(ev)
        return self.render(ev.id)

    async def _calculator(self, args: Mapping[str, Any]) -> str:
        expression = _text_arg(args, "expression", "calculator")
        claim = _text_arg(args, "claim", "calculator")
        keys = self.keys_of(args.get("evidence"), "calculator")
        passages = " ".join(self.evidence[k].text for k in keys).replace(",", "")
        found = {n.rstrip(".") for n in _NUMBER.findall(passages)}
        ids = [self.short_of(k) for k in keys]
        for number in _NUMBER.findall(expression.replace(",", "")):
            if number.rstrip(".") not in found and number not in _CONSTANTS:
                raise ToolArgumentError(f"{number} does not appear in {', '.join(ids)}")
        value = format_number(evaluate(expression))
        self.findings.append(
            Finding(
                f"{claim}: {expression.strip()} = {value}", keys, self.title, expression.strip()
            )
        )
        return value

    async def _findings(self, args: Mapping[str, Any]) -> str:
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
            keys = self.keys_of(item.get("evidence"), f"finding {claim[:40]!r}")
            new.append(Finding(" ".join(claim.split()), keys, self.title))
        proposed: list[tuple[str, str]] = []
        for h in args.get("hypotheses") or []:
            statement = h.get("statement") if isinstance(h, dict) else h
            if isinstance(statement, str) and statement.strip() and not copied(statement):
                against = h.get("against") if isinstance(h, dict) else None
                counter = against if isinstance(against, str) and not copied(against) else ""
                proposed.append((" ".join(statement.split()), counter or f"not {statement}"))
        self.findings += new
        self.proposed = proposed
        self.finished = True
        return f"{len(new)} finding(s), {len(proposed)} hypothesis(es) recorded"

    # -- 3. hypotheses --------------------------------------------------------------------

    async def test_hypothesis(self, statement: str, against: str) -> None:
        """Evidence for (the statement) and against (the counter query), then one verdict;
        without passages, or without a verdict, the hypothesis stays open."""
        try:
            pro = await self.search(statement, HYPOTHESIS_TOP_K)
            con = await self.search(against, HYPOTHESIS_TOP_K)
        except DeepSearcherError as exc:  # out of time, or a search that failed
            self.note(f"hypothesis not tested ({exc.message}): {statement}")
            return self.keep(Hypothesis(statement))
        pro_keys = [self.add_hit(h) for h in pro]
        con_keys = [k for k in (self.add_hit(h) for h in con) if k not in pro_keys]
        if not pro_keys and not con_keys:
            return self.keep(Hypothesis(statement))
        prompt = prompts.HYPOTHESIS.format(
            statement=escape_document(statement),
            support="\n\n".join(self.render(k) for k in pro_keys) or "(none)",
            against="\n\n".join(self.render(k) for k in con_keys) or "(none)",
        )
        try:
            completion = await self.complete(messages_for(prompt))
        except (LLMError, BudgetExceeded) as exc:
            self.note(f"hypothesis left open ({exc.message}): {statement}")
            return self.keep(Hypothesis(statement))
        status, ids = parse_verdict(completion.text)
        keys = [
            self.short[i] for i in ids if i in self.short and self.short[i] in pro_keys + con_keys
        ]
        if status != "open" and not keys:
            status = "open"  # a verdict without the passages that decide it settles nothing
        self.keep(Hypothesis(statement, status, keys))

    def keep(self, hypothesis: Hypothesis) -> None:
        self.hypotheses.append(hypothesis)
        shown = Hypothesis(
            hypothesis.statement,
            hypothesis.status,
            [self.short_of(k) for k in hypothesis.evidence],
        )
        self.deps.emit(HypothesisEvent(hypothesis=shown, section=self.title))


def parse_verdict(text: str) -> tuple[HypothesisStatus, list[str]]:
    """A hypothesis verdict: the JSON asked for, else the first status word and the ids in
    the reply; "open" when neither is there."""
    cleaned = clean_output(text)
    try:
        data = json_object(cleaned)
    except OutputParseError:
        data = {}
    raw = data.get("status")
    word = raw if isinstance(raw, str) else (m.group(1) if (m := _STATUS.search(cleaned)) else "")
    status: HypothesisStatus = "open"
    if word.strip().lower() in ("supported", "refuted"):
        status = "supported" if word.strip().lower() == "supported" else "refuted"
    ids = data.get("evidence")
    found = ids if isinstance(ids, list) else _SHORT_ID.findall(cleaned)
    return status, [i for i in found if isinstance(i, str)]


def _text_arg(args: Mapping[str, Any], name: str, tool: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolArgumentError(f'{tool} takes a non-empty "{name}" string')
    if copied(value):
        raise ToolArgumentError(f"{tool}: {value.strip()!r} is the example; write your own {name}")
    return value.strip()


def _hit_of(source: Source) -> Hit:
    """A cited source back as the passage it was (for answering from it again)."""
    return Hit(
        id=f"{source.collection}|{source.source}|{source.start}|{source.end}",
        text=source.text,
        source=source.source,
        score=0.0,
        collection=source.collection,
        start=source.start,
        end=source.end,
        page=source.page,
        kind=source.kind,
        title=source.title,
        page_end=source.page_end,
        record_id=source.record_id,
    )
