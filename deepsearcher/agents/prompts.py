"""Every prompt the agents send, as named constants with ``{placeholders}``.

Document text is data, never instructions: it is always wrapped in ``<document>`` tags and the
system prompt says that anything inside them is quoted material. Every untrusted string is
escaped before it is placed here (``agents.base.render_document``): a passage cannot close its
tag, and a source path, heading or web title cannot leave its attribute.

Prompts that read passages put them first (``DOCUMENTS``) and the task after them: llama.cpp,
vLLM and Ollama reuse the evaluated prefix of the previous request, so a round's verdicts, its
lookups' answers and the final answer over the same passages pay for reading them once. Each
task starts with a ``TASK:`` line (the first line of the prompt, or the first after the
documents) so logs and the scripted test server can tell the steps apart.
"""

from __future__ import annotations

# The system prompt, the <document> block and the format retry are shared with research.
from deepsearcher.prompting import DOCUMENT as DOCUMENT
from deepsearcher.prompting import RETRY_FORMAT as RETRY_FORMAT
from deepsearcher.prompting import SYSTEM as SYSTEM

# The head of every prompt over passages; the task follows it.
DOCUMENTS = """Documents:

{documents}

"""

# The plan of a question whose wording gives no sign of a hidden step. Small models over-split
# ("Who is Maja Lindqvist?" before "When did she join?"), so the default is one lookup.
PLAN = """TASK: plan
Write the lookups needed to answer the question, in order (at most {max_steps}).
- A question about something it names (a person, product, ticket, place, document) that \
asks one thing is ONE lookup: the question itself.
- A question asking two separate things ("X, and Y") gets one lookup per thing.
- A question about something it only describes ("the person who approved the budget", "the \
town where the author was born") is a chain: first look up who or what is described, then \
ask the question with #1 standing for that answer.

Examples about other topics:
Question: When did Maria Costa move to Lisbon?
{{"steps": ["When did Maria Costa move to Lisbon?"]}}
Question: Where was the author of the novel Dune born?
{{"steps": ["Who is the author of the novel Dune?", "Where was #1 born?"]}}
Question: What are the capitals of Peru and Chile?
{{"steps": ["What is the capital of Peru?", "What is the capital of Chile?"]}}

Reply with a JSON object only: {{"steps": [...]}}.
Question: {question}"""

# The plan of a question that describes something without naming it ("the site where the NR-7
# is assembled"): the described phrase is found in code and handed to the model, which then
# only has to write the two lookups.
PLAN_CHAIN = """TASK: plan
The question asks about something it only describes: "{described}". Answer it in lookups: \
first find who or what that is, then ask the question with #1 standing for the answer of the \
first lookup. Every lookup is a question ending with "?".

Examples about other topics:
Question: Where was the author of the novel Dune born? (describes: "the author of the novel \
Dune")
{{"steps": ["Who is the author of the novel Dune?", "Where was #1 born?"]}}
Question: What is the email of the engineer who signed order 77? (describes: "the engineer \
who signed order 77")
{{"steps": ["Who signed order 77?", "What is the email of #1?"]}}
Question: What is the phone number of the office where the X-1 drone is built? (describes: \
"the office where the X-1 drone is built")
{{"steps": ["Where is the X-1 drone built?", "What is the phone number of the office in #1?"]}}

Reply with a JSON object only: {{"steps": [...]}}.
Question: {question}"""

# One verdict, after the round's documents: consecutive calls differ only in the last lines.
JUDGE = """TASK: judge
Question: {question}
Lookup: {query}
Is document {n} above useful for the question or the lookup: does it state a fact, name, \
number, date, rule or definition that helps answer it, even partly? YES if it does, NO only if \
it is about something else.
Reply with one word: YES or NO (in JSON: {{"verdict": "YES"}} or {{"verdict": "NO"}})."""

JUDGE_BATCH = """TASK: judge-batch
Question: {question}
Lookups: {queries}
For each of documents {first} to {last} above, in order, decide whether it is useful for the \
question or a lookup: it states a fact, name, number, date, rule or definition that helps \
answer it, even partly (YES), or it is about something else (NO).
Reply with a JSON object only: {{"verdicts": [...]}} holding exactly {count} strings, each \
"YES" or "NO", one per document in order."""

# A lookup's short answer: single-hop extraction, which small models do well.
EXTRACT = """TASK: extract
Lookup: {query}
Answer the lookup from the documents above: the shortest exact answer, as the document \
writes it, of the kind the lookup asks for (who: a person or organisation; where: a place; \
when: a date; how many or how much: a number with its unit), and the number of the document \
that states it. If no document states it, reply {{"answer": "", "document": 0}}.
Reply with a JSON object only: {{"answer": "...", "document": <n>}}."""

# The same, with the round's YES/NO verdicts in the one call (query.rerank: lookup): the
# documents it lists are YES, the others NO. The verdicts cost a few tokens, not a call.
EXTRACT_JUDGE = """TASK: extract
Lookup: {query}
Question: {question}
Answer the lookup from the documents above: the shortest exact answer, as the document \
writes it, of the kind the lookup asks for (who: a person or organisation; where: a place; \
when: a date; how many or how much: a number with its unit), and the number of the document \
that states it ("answer": "" and "document": 0 when no document states it). Then list the \
numbers of the documents that are useful for the lookup or the question: they state a fact, \
name, number, date or rule that helps answer it, even partly.
Reply with a JSON object only: {{"answer": "...", "document": <n>, "useful": [<n>, ...]}}."""

# Reflection asks for the missing lookup, not for another wording of the question.
REFLECT = """TASK: reflect
The lookup "{query}" (for the question "{question}") found no answer in the documents above. \
Write at most {max_gaps} other search queries that could find it: other words for its terms, \
or names and terms from the documents above that look related. Each query must make sense on \
its own, different from the queries so far: {queries}.
Reply with a JSON object only: {{"queries": [<new queries, as strings>]}}."""

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
        "when did maria costa move to lisbon?",
        "who is the author of the novel dune?",
        "where was #1 born?",
        "what is the capital of peru?",
        "what is the capital of chile?",
        "who signed order 77?",
        "what is the email of #1?",
        "where is the x-1 drone built?",
        "what is the phone number of the office in #1?",
    }
)

ANSWER = """TASK: answer
Question: {question}
{facts}Answer the question using only the numbered documents above, in a few sentences. \
State the facts themselves (names, numbers, dates, places); never write a document number in \
place of a fact. End every sentence with the numbers of the documents that support it in \
square brackets, like [1] or [2][3]. If the documents do not contain the answer, say plainly \
that the documents do not state it instead of guessing. Write the answer in the language of \
the question, whatever the language of the documents.
{cut_short}
Answer:"""

# What the lookups found, for the answer: each with the document it came from.
FACTS = "Found so far (each lookup and its answer):\n{facts}\n"

# Asked once when the answer put a citation where its fact belongs ("the extension is [3].")
# or stopped at an intermediate finding.
REPAIR = (
    "Your answer cannot be used as it is: {problems}. Write the whole answer again, answering "
    "the question itself and stating each fact (the name, number, date or place from the "
    "documents), followed by its document number in square brackets."
)

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


def over_documents(documents: str, task: str) -> str:
    """A task prompt after the passages it reads (``documents``: rendered blocks)."""
    return DOCUMENTS.format(documents=documents) + task
