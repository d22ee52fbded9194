"""Planning a question: the lookups that answer it, in order, and which depend on which.

Three shapes: one lookup (most questions), parallel parts ("X, and Y"), and a chain, where a
later lookup needs an earlier one's answer ("the office of the person who approved X": first
who approved X, then that person's office). A dependent lookup holds ``#k`` for the answer of
lookup k and is searched once that answer is known.

A 1.5B model plans badly from the question alone: asked plainly it splits one-hop questions
("Who is Maja Lindqvist?" before "When did she join?") and misses most chains. So the code
finds the wording that marks a chain (a thing described rather than named: "the person who
…", "whoever owns …", "the supplier of the part stored in …") and hands the described phrase
to the model, which then only writes the lookups; and what the model writes is checked here:
steps that are not questions, that copy the prompt's examples, or that restate the question
or another step are dropped, and a chain that only asks "Who is <a name the question
gives>?" first is collapsed into the question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from deepsearcher.agents import prompts
from deepsearcher.agents.parsing import OutputParseError, copies_example, parse_str_list
from deepsearcher.agents.queries import key_words
from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.llm import JsonSchema
from deepsearcher.prompting import ask, escape_document, messages_for
from deepsearcher.run_context import RunContext

STEPS_SCHEMA = JsonSchema(
    "steps",
    {
        "type": "object",
        "properties": {"steps": {"type": "array", "items": {"type": "string"}}},
        "required": ["steps"],
        "additionalProperties": False,
    },
)

# A step restates another query when it covers at least this share of the other's key words
# and adds at most RESTATE_NEW_TERMS of its own ("…in Västerås?" / "…in Västerås's plant?").
# Measured on paraphrases and real decompositions: benchmarks/README.md, "Restated queries".
RESTATE_SHARE = 0.8
RESTATE_NEW_TERMS = 1

# A thing described instead of named: a definite noun phrase with a relative clause ("the site
# whose lease…"), "whoever/whichever …", a role of a described thing ("the supplier of the part
# stored in…", "the customer behind ticket…"), or a free relative ("kept where the sensors are
# going"). Wording like this is what marks a question as a chain.
_RELATIVE = frozenset(["who", "whom", "whose", "which", "that", "where"])
_DETERMINERS = frozenset(["the", "whichever", "whatever"])
# Nouns that name someone or something by its relation to another thing.
_ROLES = [
    *[
        "manager",
        "supervisor",
        "boss",
        "owner",
        "author",
        "writer",
        "director",
        "producer",
        "composer",
        "founder",
    ],
    *[
        "creator",
        "supplier",
        "vendor",
        "customer",
        "client",
        "approver",
        "sender",
        "spouse",
        "wife",
        "husband",
    ],
    *[
        "father",
        "mother",
        "son",
        "daughter",
        "parent",
        "successor",
        "predecessor",
        "birthplace",
        "hometown",
    ],
    "headquarters",
]
# Roles held by a person or organisation, and other nouns for one: "Who is …?", not "What".
_PLACES = frozenset(["birthplace", "hometown", "headquarters"])
_WHO = frozenset([*(r for r in _ROLES if r not in _PLACES), "person", "people", "man", "woman",
                  "employee", "engineer", "president", "company", "organisation", "organization",
                  "firm", "team", "member", "player", "actor", "actress", "singer", "artist",
                  "leader", "chair", "chairman", "head", "ceo", "contact", "colleague"])  # fmt: skip
# Where a described phrase's head noun ends: "the account manager for …", "the site where …".
_HEAD_END = frozenset(["of", "for", "at", "behind", *_RELATIVE])
_ROLE = re.compile(
    r"\bthe\s+[\w-]+\s+(?:behind|of)\s+the\s+[\w-]+\s+(?:\w+ed|in|at|on|from|with)\b.*"
    r"|\bthe\s+[\w-]+\s+behind\s+\w.*"
    r"|\bwho(?:m)?ever\s+\w.*"
    r"|(?<=\w\s)where\s+the\s+\w.*"
    # A role held toward a named thing: "the author of Brand", "Ingrid's manager".
    rf"|\bthe\s+(?:\w+\s+)?(?:{'|'.join(_ROLES)})\s+(?:of|for|at|behind)\s+\w.*"
    rf"|(?-i:(?:\b[A-Z][\w-]*\s+)*\b[A-Z][\w-]*)['’]s\s+(?:\w+\s+)?(?:{'|'.join(_ROLES)})\b.*",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"[\w'’.-]+")
# A question that puts its verb last ("In which office is X based?", "When did X start at the
# company?"): the described phrase ends before that verb.
_AUX_FIRST = re.compile(
    r"^\s*(?:\w+\s+){0,3}?(?:is|are|was|were|would|will|did|does|do|can|could|should|has|have|had)\b",
    re.IGNORECASE,
)
_TRAILING_VERB = frozenset(
    [
        "based",
        "located",
        "born",
        "situated",
        "headquartered",
        "arbitrated",
        "settled",
        "held",
        "kept",
        "stored",
        "be",
    ]
)
_MAIN_VERB = frozenset(
    [
        "start",
        "begin",
        "join",
        "leave",
        "retire",
        "move",
        "work",
        "live",
        "die",
        "report",
        "go",
        "come",
        "earn",
        "reach",
    ]
)


# A question asking two things: a second clause ("…, and which firmware does it run?") or two
# named things compared ("Which was founded first, X or Y?", "Are X and Y both …?").
_PARTS = re.compile(
    r",?\s+(?:and|or)\s+(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|"
    r"does|did|can|could|should|has|have|had)\b"
    r"|\b(?:both|either)\b"
    r"|[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*\s+or\s+(?:the\s+)?[A-Z]",
)


def route(question: str) -> str:
    """How a question is planned: "chain" (it describes something it does not name),
    "parts" (it asks two things), or "single" (one lookup: the question itself, no plan
    call). Adaptive-RAG's routing, read from the wording: a one-hop question costs no plan."""
    if described_phrase(question):
        return "chain"
    return "parts" if _PARTS.search(question) else "single"


def described_phrase(question: str) -> str | None:
    """The part of ``question`` that describes a thing instead of naming it, or None."""
    tokens = list(_TOKEN.finditer(question))
    words = [t.group(0).casefold() for t in tokens]
    start = None
    for i, w in enumerate(words):
        # ", which" and "and which" start another clause, not a description.
        after_comma = question[: tokens[i].start()].rstrip().endswith(",")
        if (
            w in _RELATIVE
            and 0 < i < len(words) - 1
            and not after_comma
            and words[i - 1] not in ("and", "or", "but")
        ):
            back = next(
                (j for j in range(i - 1, max(-1, i - 6), -1) if words[j] in _DETERMINERS), None
            )
            if back is not None:
                start = tokens[back].start()
                rel = i
                break
    if start is None:
        m = _ROLE.search(question)
        if m is None:
            return None
        # Nested descriptions resolve inside out: "the account manager for the customer
        # behind ticket X" is looked up from "the customer behind ticket X".
        while (inner := _ROLE.search(question, m.start() + 1)) is not None:
            m = inner
        start = m.start()
        rel = next(i for i, t in enumerate(tokens) if t.start() >= start)
    end = len(question)
    if _AUX_FIRST.match(question):
        end = _predicate_start(question, tokens, words, rel, end)
    return question[start:end].strip().rstrip("?？. ") or None


def _predicate_start(
    question: str, tokens: list[re.Match[str]], words: list[str], rel: int, end: int
) -> int:
    """Where the question's own verb follows the described phrase ("… notice start at the
    company"), or ``end``."""
    for i in range(rel + 3, len(words)):
        if words[i] in _MAIN_VERB:
            return tokens[i].start()
    last = len(words)
    while last - 1 > rel + 2 and words[last - 1] in _TRAILING_VERB:
        last -= 1
    return tokens[last].start() if last < len(words) else end


_REFERENCE = re.compile(r"#\s*(\d)|\{#?(\d)\}|<#?(\d)>")
_DEFINITIONAL = re.compile(
    r"^\s*(?:who|what)\s+(?:is|are|was|were)\s+(?:the\s+|a\s+|an\s+)?(.+?)\s*[?？]?\s*$",
    re.IGNORECASE,
)
_CLAUSE_WORDS = re.compile(r"\b(?:who|whom|whose|which|that|where|of|behind)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Step:
    """One lookup. ``depends_on``: the earlier steps (1-based) whose answers it needs."""

    question: str
    depends_on: tuple[int, ...] = ()


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    dropped: tuple[str, ...] = field(default=())

    @property
    def is_chain(self) -> bool:
        return any(s.depends_on for s in self.steps)


def single(question: str) -> Plan:
    return Plan((Step(question),))


def _terms(text: str) -> set[str]:
    # Possessives and plural s folded, so "Västerås's" and "Västerås" are one term.
    out = set()
    for w in key_words(text):
        w = w.casefold().removesuffix("'s").removesuffix("’s")
        out.add(w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def restates(query: str, other: str) -> bool:
    """Whether ``query`` says what ``other`` already says: it covers nearly all of ``other``'s
    key words and adds at most one. A part of a question covers too little of it to count."""
    mine, theirs = _terms(query), _terms(other)
    if not mine or not theirs:
        return query.strip().casefold() == other.strip().casefold()
    share = len(mine & theirs) / len(theirs)
    return share >= RESTATE_SHARE and len(mine - theirs) <= RESTATE_NEW_TERMS


def normalise_references(step: str) -> str:
    """``#1`` however the model wrote it (``# 1``, ``{1}``, ``<1>``)."""
    return _REFERENCE.sub(lambda m: f"#{next(g for g in m.groups() if g)}", step)


def references(step: str) -> tuple[int, ...]:
    return tuple(sorted({int(n) for n in re.findall(r"#(\d)", step)}))


def parse_steps(text: str, *, max_steps: int) -> list[str]:
    """The steps of a plan reply: a JSON list of strings (or ``{"steps": [...]}``). A reply
    that copies the prompt's examples is refused, so it is asked again."""
    steps = [normalise_references(s) for s in parse_str_list(text)]
    if steps and all(copies_example(s) for s in steps):
        raise OutputParseError(
            "the steps copy the examples from the instructions; write the lookups for this question"
        )
    return [s for s in steps if not copies_example(s)][: max_steps + 2]


def make_plan(
    question: str, raw_steps: Sequence[str], max_steps: int, described: str | None = None
) -> Plan:
    """The checked plan: references only to earlier kept steps, dependent steps that are
    questions, independent steps about the question, no restatements of the question that
    nothing depends on, a chain that names its first answer collapsed, at most ``max_steps``.
    With ``described`` (the question describes something without naming it) the plan is a
    chain: its two lookups are the model's where they fit, else built from the phrase."""
    if described:
        return _described_chain(question, described, raw_steps)
    kept: list[Step] = []
    dropped: list[str] = []
    index: dict[int, int] = {}  # the model's step number -> the kept step's number
    q_terms = _terms(question)
    for number, text in enumerate(raw_steps, start=1):
        text = " ".join(text.split())
        refs = references(text)
        if refs:
            if not all(r in index for r in refs) or not text.rstrip().endswith(("?", "？")):
                dropped.append(text)  # an answer written as a step, or a dangling reference
                continue
            for r in refs:
                text = text.replace(f"#{r}", f"#{index[r]}")
            step = Step(text, tuple(sorted(index[r] for r in refs)))
        elif not (_terms(text) & q_terms):
            dropped.append(text)  # about something the question does not mention
            continue
        else:
            step = Step(text)
        if len(kept) < max_steps:
            kept.append(step)
            index[number] = len(kept)
        else:
            dropped.append(text)
    kept = _collapse_named_chain(question, kept, dropped)
    return _without_restatements(question, kept, dropped)


def _described_chain(question: str, described: str, raw_steps: Sequence[str]) -> Plan:
    """First who or what ``described`` is, then the question with that answer in its place.
    The model's first lookup is kept when it is about the described thing without restating
    the whole question; its second when it asks what the question asks besides the described
    thing ("What is the name of #1?" asks nothing the question asks, so it is replaced)."""
    steps = [" ".join(t.split()) for t in raw_steps]
    first = next((t for t in steps if not references(t)), None)
    second = next((t for t in steps if references(t) == (1,)), None)
    dropped = [t for t in steps if t not in (first, second)]
    rest = _terms(question) - _terms(described)
    head = _head(described)
    if (
        first is None
        or not (_terms(first) & _terms(described))
        or (rest and _terms(first) & rest)
        # "Where is the part stored in bin B-14-03?" for "the supplier of the part stored in
        # bin B-14-03" finds the part, not its supplier.
        or (head in _ROLES and not _terms(head) & _terms(first))
    ):
        if first is not None:
            dropped.append(first)
        first = _lookup_of(described)
    if (
        second is None
        or not second.rstrip().endswith(("?", "？"))
        or (rest and not (_terms(second) & rest))
    ):
        if second is not None:
            dropped.append(second)
        second = _with_reference(question, described)
    return Plan((Step(first), Step(second, (1,))), tuple(dropped))


def _lookup_of(described: str) -> str:
    """A question that finds what ``described`` names: "whoever owns X" -> "Who owns X?"."""
    m = re.match(r"(who|what|which)(?:m)?ever\s+(.*)", described, re.IGNORECASE)
    if m:
        return f"{m.group(1).capitalize()} {m.group(2)}?"
    if described.casefold().startswith("where "):
        return f"Where is it that {described[6:]}?"
    # A 1.5B model asked "Who or what is the site where the NR-7 is assembled?" names a person.
    return f"{'Who' if _head(described) in _WHO else 'What'} is {described}?"


def _head(described: str) -> str:
    """The noun a described phrase is about: "manager" in "the account manager for the
    customer …", "site" in "the site where …"; "" when it does not start with a determiner."""
    words = [w.casefold() for w in _TOKEN.findall(described)]
    if not words or words[0] not in _DETERMINERS:
        return ""
    head = ""
    for w in words[1:]:
        if w in _HEAD_END:
            break
        head = w
    return head.removesuffix("'s").removesuffix("’s")


def _with_reference(question: str, described: str) -> str:
    """``question`` with ``described`` replaced by ``#1``."""
    at = question.casefold().find(described.casefold())
    if at < 0:
        return f"{question.rstrip(' ?？')} (#1)?"
    place = "at #1" if described.casefold().startswith("where ") else "#1"
    out = question[:at] + place + question[at + len(described) :]
    return out if out.rstrip().endswith(("?", "？")) else out.rstrip(" .") + "?"


def _collapse_named_chain(question: str, steps: list[Step], dropped: list[str]) -> list[Step]:
    """A chain that first asks "Who is Maja Lindqvist?" about a name the question already
    gives finds nothing the question does not say: the question is asked as it is."""
    if not any(s.depends_on for s in steps):
        return steps
    first = next(s for s in steps if not s.depends_on)
    m = _DEFINITIONAL.match(first.question)
    if m is None or _CLAUSE_WORDS.search(m.group(1)):
        return steps
    if m.group(1).casefold() not in question.casefold():
        return steps
    dropped.extend(s.question for s in steps)
    return [Step(question)]


def _without_restatements(question: str, steps: list[Step], dropped: list[str]) -> Plan:
    needed = {d for s in steps for d in s.depends_on}
    out: list[Step] = []
    renumber: dict[int, int] = {}
    for number, step in enumerate(steps, start=1):
        if number not in needed and not step.depends_on and step.question != question:
            earlier = [question, *(s.question for s in out if not s.depends_on)]
            if any(restates(step.question, e) for e in earlier):
                dropped.append(step.question)
                continue
        text = step.question
        for d in step.depends_on:
            text = text.replace(f"#{d}", f"#{renumber[d]}")
        out.append(Step(text, tuple(renumber[d] for d in step.depends_on)))
        renumber[number] = len(out)
    if not out:
        out = [Step(question)]
    return Plan(tuple(out), tuple(dropped))


async def plan_question(
    ctx: RunContext, question: str, max_steps: int
) -> tuple[Plan, LLMError | BudgetExceeded | None]:
    """The question's plan, and why it is the question alone when planning failed. A
    question that names what it asks about and asks one thing is its own plan: no call."""
    if route(question) == "single":
        return single(question), None
    described = described_phrase(question)
    if described:
        prompt = prompts.PLAN_CHAIN.format(
            described=escape_document(described), question=escape_document(question)
        )
    else:
        prompt = prompts.PLAN.format(max_steps=max_steps, question=escape_document(question))
    try:
        raw = await ask(
            ctx,
            messages_for(prompt),
            partial(parse_steps, max_steps=max_steps),
            schema=STEPS_SCHEMA,
        )
    except (LLMError, BudgetExceeded) as exc:
        return single(question), exc
    return make_plan(question, raw, max_steps, described), None
