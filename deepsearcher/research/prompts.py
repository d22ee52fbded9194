"""The research stages' prompts. As in ``deepsearcher.agents.prompts``: each starts with a
``TASK:`` line, and untrusted text (the request, passages, findings) is escaped and quoted.

The model writes no report structure: the brief and the plan are small JSON replies
(grammar-constrained where the server offers it, ``parsing.BRIEF_SCHEMA``/``PLAN_SCHEMA``), the
researchers' prose is the deep-search answer, and the draft and check are code.

The reply formats show ``<placeholders>``, never plausible values: a small model copies an
example that reads like an answer ("45 vs 50 euros", a search for "search query") into its
reply, and the parsers (``research.parsing``) reject a reply that still holds a placeholder."""

from __future__ import annotations

BRIEF = """TASK: research-brief
Turn the request into a research brief for a report written from the team's private documents.
Do not ask the user anything: when the request is ambiguous, choose the most likely reading and \
state it under "assumptions"; put the question you would have asked under "question".
Reply with one JSON object only:
{{"goal": "<what the report is for>", "scope": "<what it covers>", \
"audience": "<who reads it>", "must_answer": ["<a question the report must answer>"], \
"constraints": [], "assumptions": ["<a reading of the request you chose>"], "question": ""}}
Replace every <...> with your own text from the request; leave a list empty when nothing fits.

Request: {request}"""

PLAN = """TASK: research-plan
Split the research brief into at most {max_sections} report sections. Each section gets one \
self-contained research question for a researcher who searches the documents, and a \
complexity from 1 (one fact) to 3 (many facts to gather and compare).
Reply with one JSON object only:
{{"sections": [{{"title": "<section title>", "question": "<a self-contained research \
question>", "complexity": 1}}]}}
Replace every <...> with your own text.

Brief:
{brief}"""

RESEARCH_TOOLS = """TASK: research-tools
You research one section of a report from the team's documents. A search already found the \
findings and evidence below. Check and complete them with tools: one tool call per reply, as \
one JSON object:
{{"tool": "search", "args": {{"query": "<words to search for>"}}}}
Tools:
{tools}
You have at most {steps} replies. End with the findings tool: each claim cites the evidence \
ids it rests on; add up to {max_hypotheses} hypotheses the question raises, each with a search \
that would find evidence against it:
{{"tool": "findings", "args": {{"findings": [{{"claim": "<a fact the evidence states>", \
"evidence": ["<evidence id>"]}}], "hypotheses": [{{"statement": "<a claim to test>", \
"against": "<a search for evidence against it>"}}]}}}}
Replace every <...> with your own text.

Question: {question}

Findings so far:
{findings}

Evidence:
{evidence}"""

HYPOTHESIS = """TASK: research-hypothesis
Judge the hypothesis from the passages only: "supported" when a passage states it, "refuted" \
when a passage contradicts it, "open" when they do not settle it. Name the ids of the passages \
that decide it.
Reply with one JSON object only:
{{"status": "<supported, refuted or open>", "evidence": ["<evidence id>"]}}

Hypothesis: {statement}

Passages found for it:
{support}

Passages found against it:
{against}"""

TOOL_RESULT = "TOOL RESULT ({tool}): {output}"
