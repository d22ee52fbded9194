"""A researcher's hypotheses, tested for and against: two searches each (the statement, and a
query for evidence against it) and one verdict call: supported, refuted or open, with the
evidence ids that decide it. Without passages, or without a verdict, a hypothesis stays open."""

from __future__ import annotations

import re

from deepsearcher.errors import BudgetExceeded, DeepSearcherError, LLMError
from deepsearcher.llm import JsonSchema
from deepsearcher.prompting import (
    OutputParseError,
    clean_output,
    escape_document,
    json_object,
    messages_for,
)
from deepsearcher.research import prompts
from deepsearcher.research.events import HypothesisEvent
from deepsearcher.research.models import Hypothesis, HypothesisStatus
from deepsearcher.research.researcher.workspace import Workspace
from deepsearcher.research.text import EVIDENCE_ID

HYPOTHESIS_TOP_K = 3  # passages per side of a hypothesis
# The verdict's shape, grammar-constrained where the server offers it.
VERDICT_SCHEMA = JsonSchema(
    "verdict",
    {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["supported", "refuted", "open"]},
            "evidence": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["status", "evidence"],
        "additionalProperties": False,
    },
)
_STATUS = re.compile(r"\b(supported|refuted|open)\b", re.IGNORECASE)


async def test_hypothesis(ws: Workspace, statement: str, against: str) -> None:
    """Evidence for (the statement) and against (the counter query), then one verdict;
    without passages, or without a verdict, the hypothesis stays open."""
    try:
        pro = await ws.search(statement, HYPOTHESIS_TOP_K)
        con = await ws.search(against, HYPOTHESIS_TOP_K)
    except DeepSearcherError as exc:  # out of time, or a search that failed
        ws.note(f"hypothesis not tested ({exc.message}): {statement}")
        return keep(ws, Hypothesis(statement))
    pro_keys = [ws.add_hit(h) for h in pro]
    con_keys = [k for k in (ws.add_hit(h) for h in con) if k not in pro_keys]
    if not pro_keys and not con_keys:
        return keep(ws, Hypothesis(statement))
    prompt = prompts.HYPOTHESIS.format(
        statement=escape_document(statement),
        support="\n\n".join(ws.render(k) for k in pro_keys) or "(none)",
        against="\n\n".join(ws.render(k) for k in con_keys) or "(none)",
    )
    try:
        completion = await ws.complete(messages_for(prompt), schema=VERDICT_SCHEMA)
    except (LLMError, BudgetExceeded) as exc:
        ws.note(f"hypothesis left open ({exc.message}): {statement}")
        return keep(ws, Hypothesis(statement))
    status, ids = parse_verdict(completion.text)
    keys = [ws.short[i] for i in ids if i in ws.short and ws.short[i] in pro_keys + con_keys]
    if status != "open" and not keys:
        status = "open"  # a verdict without the passages that decide it settles nothing
    # The passages that decide it bear it out or contradict it, as the verdict says.
    refuted = status == "refuted"
    keep(ws, Hypothesis(statement, status, [] if refuted else keys, keys if refuted else []))


def keep(ws: Workspace, hypothesis: Hypothesis) -> None:
    ws.hypotheses.append(hypothesis)
    shown = Hypothesis(
        hypothesis.statement,
        hypothesis.status,
        [ws.short_of(k) for k in hypothesis.evidence],
        [ws.short_of(k) for k in hypothesis.against],
    )
    ws.deps.run.emit(HypothesisEvent(hypothesis=shown, section=ws.title))


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
    found = ids if isinstance(ids, list) else EVIDENCE_ID.findall(cleaned)
    return status, [i for i in found if isinstance(i, str)]
