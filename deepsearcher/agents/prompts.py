"""Every prompt the agents send, as named constants with ``{placeholders}``.

Document text is data, never instructions: it is always wrapped in ``<document>`` tags and the
system prompt says that anything inside them is quoted material. Every untrusted string is
escaped before it is placed here (``agents.base.render_document``): a passage cannot close its
tag, and a source path, heading or web title cannot leave its attribute. Each task prompt starts
with a ``TASK:`` line so logs (and the scripted test server) can tell the steps apart.
"""

from __future__ import annotations

# The system prompt, the <document> block and the format retry are shared with research.
from deepsearcher.prompting import DOCUMENT as DOCUMENT
from deepsearcher.prompting import RETRY_FORMAT as RETRY_FORMAT
from deepsearcher.prompting import SYSTEM as SYSTEM

DECOMPOSE = """TASK: decompose
Write at most {max_queries} short search queries that together find the evidence needed to \
answer the question. A simple question stays one query. Every query must make sense on its \
own, read by someone who never saw the question: repeat the names, places and things it is \
about instead of words like "it", "they", "that office" or "this person". For a question in \
two steps (who manages the office where X works), write one query per step and name X in both.
Reply with a JSON object only: {{"queries": [<the queries, as strings>]}}.

Question: {question}"""

JUDGE = """TASK: judge
Question: {question}
Search query that found the passage: {queries}

{document}

Is this passage useful for the question or the search query: does it state a fact, name, \
number, date, rule or definition that helps answer it, even partly? YES if it does, NO only \
if it is about something else.
Reply with one word: YES or NO (in JSON: {{"verdict": "YES"}} or {{"verdict": "NO"}})."""

JUDGE_BATCH = """TASK: judge-batch
For each numbered passage from the documents, decide whether it is useful for answering the \
question: it states a fact, name, number, date, rule or definition that helps answer the \
question or the search queries, even partly (YES), or it is about something else (NO).
Question: {question}
Search queries that found them: {queries}

{documents}

Reply with a JSON object only: {{"verdicts": [...]}} holding exactly {count} strings, each \
"YES" or "NO", one per passage in order."""

REFLECT = """TASK: reflect
The question is being researched with search queries. Given the queries so far and the \
passages found helpful, decide what evidence is still missing. Propose at most {max_gaps} new \
search queries that would find it, different from the queries so far; each must make sense \
on its own (names instead of pronouns). If nothing is missing, reply with an empty list.
Reply with a JSON object only: {{"queries": [<new queries, as strings>]}}, or \
{{"queries": []}}.

Question: {question}
Queries so far: {queries}

Helpful passages:
{documents}"""

# Reflection when the judge kept too little: the same step (and TASK name), asked to search on.
REFORMULATE = """TASK: reflect
Searching the documents has not found enough useful passages for the question yet. Write at \
most {max_gaps} NEW search queries, different from the queries so far, that could find them: \
the question's key words without filler, other words for its terms, one part of the question \
at a time, or names and terms from the passages below that look related. Each query must \
make sense on its own.
Reply with a JSON object only: {{"queries": [<new queries, as strings>]}}.

Question: {question}
Queries so far: {queries}

Passages retrieved so far (judged not useful enough):
{documents}"""

# Example and placeholder texts a model might copy instead of answering; parsers refuse them.
EXAMPLE_TEXTS = frozenset(
    {
        "query one",
        "query two",
        "new query",
        "search query",
        "search phrase",
        "the queries, as strings",
        "new queries, as strings",
    }
)

ANSWER = """TASK: answer
Answer the question using only the numbered passages below. Cite every claim with the \
passage number in square brackets, like [1] or [2][3]. If the passages do not contain the \
answer, say plainly that the documents do not state it instead of guessing. Write the \
answer in the language of the question, whatever the language of the passages.
{cut_short}
Question: {question}

{documents}

Answer:"""

# One quoted passage; ``attributes`` (n, source, heading, title) and ``text`` arrive escaped.

CUT_SHORT_NOTE = (
    "Note: the search was cut short ({reason}); answer from what was found and say that the "
    "answer may be incomplete.\n"
)

ROUTE = """TASK: route
Pick the collections likely to contain evidence for the question. Reply with a JSON list of \
collection names from the list below, e.g. ["name"]; pick all if unsure.

Collections:
{collections}

Question: {question}"""

REWRITE = """TASK: rewrite
Rewrite the user's last message as one standalone question that can be understood without \
the conversation. Keep names, dates and numbers. Reply with the question only.

Conversation:
{history}

Last message: {question}"""
