"""Deep search with a model weaker or stricter than the scripted default, in-process: a judge
that says NO, log-probabilities that disagree with the word, a reflection that gives up,
sub-queries that point back into the question, replies that copy the prompt's example,
answers whose citations do not hold. The HTTP path of each is in test_deep_search.py."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from deepsearcher.agents import DeepSearchAgent, NaiveRAGAgent
from deepsearcher.agents.citations import unsupported_citations
from deepsearcher.agents.judge import yes_no_margin
from deepsearcher.agents.parsing import OutputParseError, parse_queries
from deepsearcher.agents.queries import fallback_reformulations, standalone
from deepsearcher.config import Settings
from deepsearcher.llm import Completion, TokenLogprob
from deepsearcher.options import QueryOptions
from deepsearcher.retrieval import Retriever
from deepsearcher.types import Answer, Event, Hit, Usage
from tests.memory_index import CORPUS, MODEL, MemoryStore, WordHashEmbedder
from tests.scripted_model import DOCUMENT, ScriptedChatModel

ALL_TEXTS = [t for texts in CORPUS.values() for t in texts]


def _agent(llm: ScriptedChatModel, naive: bool = False, **query: Any) -> Any:
    settings = Settings()
    settings.embedding.model = MODEL
    for key, value in query.items():
        setattr(settings.query, key, value)
    embedder = WordHashEmbedder()
    store = MemoryStore(embedder)
    store.add("docs", CORPUS)
    retriever = Retriever(embedder, store, settings)
    if naive:
        return NaiveRAGAgent(settings, llm, retriever)
    return DeepSearchAgent(settings, llm, retriever)


def _run(agent: Any, question: str) -> tuple[Answer, list[Event]]:
    async def go() -> list[Event]:
        return [e async for e in agent.run(question, QueryOptions())]

    events = asyncio.run(go())
    assert events[-1].type == "done"
    return events[-1].answer, events


def _notes(events: list[Event]) -> list[str]:
    return [e.message for e in events if e.type == "note"]


def _verdict(word: str, p_yes: float) -> Completion:
    """A judge reply with log-probabilities: ``word`` said, P(YES) = ``p_yes``."""
    top = {"YES": math.log(p_yes), "NO": math.log(1 - p_yes), "Maybe": -9.0}
    return Completion(word, Usage(1, 10, 1), "stop", logprobs=[TokenLogprob(word, top[word], top)])


# -- a judge that says NO to everything ----------------------------------------------------


def test_a_judge_that_says_no_leaves_the_best_ranked_passages_unverified_with_a_note() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: decompose", '{"queries": ["The NR-7 battery"]}')
    llm.add_rule("TASK: judge", "NO")
    llm.add_rule("TASK: answer", "Kestrel Energy supplies the NR-7 battery [1].")
    agent = _agent(llm, max_iter=1, top_k=3, min_evidence=3)
    answer, _events = _run(agent, "Who supplies the NR-7 battery?")

    assert answer.chunks_kept == 0 and answer.chunks_dropped == 3
    (call,) = llm.calls("answer")
    given = DOCUMENT.findall(call[-1]["content"])
    assert len(given) == 3  # query.min_evidence passages, best ranked first
    assert given[0] == CORPUS["robots.txt"][1]
    assert answer.evidence == "unverified"
    assert [(s.text, s.verified) for s in answer.sources] == [(CORPUS["robots.txt"][1], False)]
    assert any("fewer than query.min_evidence (3)" in n and "unverified" in n for n in answer.notes)
    assert len(answer.retrieved) == 2  # given to the answer, not cited: listed apart


def test_no_floor_means_no_evidence_and_says_so() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: decompose", '{"queries": ["NR-7 battery supplier"]}')
    llm.add_rule("TASK: judge", "NO")
    llm.add_rule("TASK: answer", "The documents do not state it.")
    answer, _ = _run(_agent(llm, max_iter=1, min_evidence=0), "Who supplies the NR-7 battery?")
    assert answer.evidence == "none" and answer.sources == []


def test_with_too_little_kept_the_loop_reformulates_until_max_iter() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: decompose", '{"queries": ["battery maker"]}')
    llm.add_rule("TASK: judge", "NO")
    llm.add_rule("TASK: reflect", '{"queries": []}')  # after its first reply, it gives up
    llm.add_rule("TASK: reflect", '{"queries": ["Kestrel Energy battery"]}', times=1)
    llm.add_rule("TASK: answer", "Kestrel Energy [1].")
    answer, events = _run(_agent(llm, max_iter=3, top_k=2), "Who makes the robot's battery?")

    assert answer.iterations == 3
    reflections = llm.calls("reflect")
    assert len(reflections) == 2
    # Asked to search on with other words, not whether the evidence is complete.
    assert all(_ASKED_TO_SEARCH_ON in c[-1]["content"] for c in reflections)
    assert "<document" in reflections[0][-1]["content"]  # it sees what retrieval found
    rounds = [e.queries for e in events if e.type == "sub_queries"]
    assert rounds[1] == ["Kestrel Energy battery"]
    # The model proposed nothing new: the loop built reformulations from the question.
    assert rounds[2][0] == "makes robot's battery"  # the question's key words
    assert all(q not in rounds[0] + rounds[1] for q in rounds[2])


_ASKED_TO_SEARCH_ON = "has not found enough useful passages"


def test_enough_kept_asks_reflection_as_before() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: decompose", '{"queries": ["robot office travel"]}')
    llm.add_rule("TASK: judge", "YES")
    llm.add_rule("TASK: reflect", '{"queries": []}')
    llm.add_rule("TASK: answer", "Robots [1].")
    answer, _ = _run(_agent(llm, max_iter=3, top_k=4, min_evidence=3), "Tell me about robots")
    (reflection,) = llm.calls("reflect")
    assert answer.iterations == 1 and _ASKED_TO_SEARCH_ON not in reflection[-1]["content"]
    assert answer.evidence == "verified" and all(s.verified for s in answer.sources)


def test_fallback_reformulations_use_the_question_parts_and_passage_headings() -> None:
    hit = Hit("a#0", "text", "a.md", 1.0, "docs", heading="7.3 Per diem")
    built = fallback_reformulations("What is the per diem for Lyon, and who proposed it?", [hit], 3)
    assert built[0] == "per diem Lyon proposed"
    assert "per diem Lyon" in built
    assert any("7.3 Per diem" in q for q in built)


# -- log-probabilities: the margin, not only the word -------------------------------------


def test_a_no_with_a_fair_share_of_yes_is_kept_by_the_margin() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: decompose", '{"queries": ["NR-7 battery supplier"]}')
    # Said NO every time; P(YES) 0.3 for the Kestrel passage, 0.01 for the others.
    llm.add_rule(
        "TASK: judge",
        lambda p: _verdict("NO", 0.3 if "Kestrel" in DOCUMENT.findall(p)[0] else 0.01),
    )
    llm.add_rule("TASK: answer", "Kestrel Energy [1].")
    answer, events = _run(
        _agent(llm, max_iter=1, top_k=3, min_evidence=0), "Who supplies the NR-7 battery?"
    )
    kept = [e for e in events if e.type == "verdict" and e.kept]
    assert [e.chunk_id for e in kept] == ["robots.txt#1"]
    assert kept[0].margin is not None and math.isclose(kept[0].margin, math.log(0.3 / 0.7))
    assert answer.evidence == "verified"
    assert all(llm.logprobs[i] for i, m in enumerate(llm.history) if "TASK: judge" in str(m))


def test_threshold_zero_follows_the_word() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: decompose", '{"queries": ["NR-7 battery supplier"]}')
    llm.add_rule("TASK: judge", lambda p: _verdict("NO", 0.3))
    llm.add_rule("TASK: answer", "Nothing.")
    answer, _ = _run(
        _agent(llm, max_iter=1, top_k=3, min_evidence=0, judge_threshold=0.0),
        "Who supplies the NR-7 battery?",
    )
    assert answer.chunks_kept == 0


def test_yes_no_margin_reads_spellings_and_bounds_a_missing_side() -> None:
    tokens = [
        TokenLogprob('{"', 0.0, {'{"': 0.0}),
        TokenLogprob("NO", -0.2, {"NO": -0.2, " no": -3.0, "YES": -2.0, "Yes": -2.5}),
    ]
    yes = math.log(math.exp(-2.0) + math.exp(-2.5))
    no = math.log(math.exp(-0.2) + math.exp(-3.0))
    margin = yes_no_margin(tokens)
    assert margin is not None and math.isclose(margin, yes - no)
    only_no = [TokenLogprob("NO", -0.01, {"NO": -0.01, "The": -6.0})]
    assert yes_no_margin(only_no) == -6.0 - -0.01
    assert yes_no_margin([TokenLogprob("Sure", -0.1, {"Sure": -0.1})]) is None


# -- structured output and copied examples --------------------------------------------------


def test_decomposition_verdicts_and_reflection_ask_for_a_schema() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: decompose", '{"queries": ["robot payload"]}')
    llm.add_rule("TASK: judge", '{"verdict": "YES"}')
    llm.add_rule("TASK: reflect", '{"queries": []}')
    llm.add_rule("TASK: answer", "Twelve kilograms [1].")
    agent = _agent(llm, max_iter=2, top_k=3, min_evidence=3)
    answer, _ = _run(agent, "What does the robot carry?")
    assert answer.chunks_kept == 3
    names = {s.name for s in llm.schemas if s is not None}
    assert names == {"queries", "verdict"}
    asked = [llm.schemas[i] for i, m in enumerate(llm.history) if "TASK: reflect" in str(m)]
    assert asked and asked[0] is not None and asked[0].name == "queries"


def test_a_reply_copying_the_example_is_refused_and_asked_again() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: decompose", '{"queries": ["NR-7 payload"]}')
    llm.add_rule("TASK: decompose", '{"queries": ["<the queries, as strings>"]}', times=1)
    llm.add_rule("TASK: judge", "YES")
    llm.add_rule("TASK: reflect", "[]")
    llm.add_rule("TASK: answer", "Twelve kilograms [1].")
    answer, _ = _run(_agent(llm, max_iter=1, top_k=3), "What is the NR-7 payload?")
    retry = llm.calls("decompose")[1][-1]["content"]
    assert "copies the example" in retry
    assert answer.sub_queries == ["NR-7 payload"]


def test_parse_queries_refuses_examples_and_placeholders() -> None:
    for reply in ('["query one", "query two"]', '{"queries": ["<search phrase>"]}'):
        try:
            parse_queries(reply)
        except OutputParseError as exc:
            assert "copies the example" in str(exc)
        else:
            raise AssertionError(f"accepted {reply}")
    assert parse_queries('{"queries": ["Kestrel lead time"]}') == ["Kestrel lead time"]


# -- standalone sub-queries: a bridge question ---------------------------------------------


def test_a_bridge_sub_query_pointing_back_is_made_standalone() -> None:
    llm = ScriptedChatModel()
    question = "Who is the office manager at the site where the NR-7 is assembled?"
    llm.add_rule(
        "TASK: decompose",
        json.dumps({"queries": ["Where is the NR-7 assembled?", "Who is that office's manager?"]}),
    )
    llm.add_rule("TASK: judge", "YES")
    llm.add_rule("TASK: reflect", "[]")
    llm.add_rule("TASK: answer", "Rafael Ortega [1].")
    answer, _ = _run(_agent(llm, max_iter=1), question)
    first, second = answer.sub_queries
    assert first == "Where is the NR-7 assembled?"
    assert "that" not in second.split() and "NR-7" in second and "manager" in second


def test_standalone_leaves_self_contained_queries_alone() -> None:
    q = "Who supplies the NR-7 battery and what is its lead time?"
    assert standalone("NR-7 battery supplier", q) == "NR-7 battery supplier"
    assert standalone(q, q) == q  # the question itself
    made = standalone("What is its lead time?", q)
    assert made.startswith("What is its lead time") and "NR-7" in made and "battery" in made


# -- citations that hold ---------------------------------------------------------------------


def test_sources_are_the_cited_passages_and_unsupported_citations_are_flagged() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: decompose", '{"queries": ["The NR-7 battery"]}')
    llm.add_rule("TASK: judge", "YES")
    llm.add_rule("TASK: reflect", "[]")
    # [1] holds the battery claim; the Lyon headcount is not in the passage cited for it.
    llm.add_rule(
        "TASK: answer",
        lambda p: (
            f"Kestrel Energy supplies the NR-7 battery [{_n(p, 'Kestrel')}]. "
            f"The Lyon office employs forty engineers in robotics [{_n(p, 'payload')}]."
        ),
    )
    answer, _ = _run(_agent(llm, max_iter=1, top_k=3), "Who supplies the NR-7 battery?")
    assert len(answer.sources) == 2 and len(answer.retrieved) == 1
    assert {s.n for s in answer.sources}.isdisjoint({s.n for s in answer.retrieved})
    assert answer.unsupported_citations == [answer.answer.split(". ", 1)[1]]
    assert any("1 cited sentence(s) not found" in n for n in answer.notes)
    d = answer.to_dict()
    assert d["evidence"] == "verified" and d["unsupported_citations"] and len(d["retrieved"]) == 1


def _n(prompt: str, word: str) -> int:
    return next(i for i, t in enumerate(DOCUMENT.findall(prompt), start=1) if word in t)


def test_naive_answer_without_citations_has_no_sources_and_a_note() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: answer", "Kestrel Energy supplies it.")
    answer, events = _run(_agent(llm, naive=True, top_k=3), "Who supplies the NR-7 battery?")
    assert answer.sources == [] and len(answer.retrieved) == 3
    assert answer.evidence == "none"
    assert any("cites none of the 3 passage(s)" in n for n in _notes(events))


def test_naive_answer_with_citations_is_unverified_without_a_note() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: answer", "Kestrel Energy supplies the NR-7 battery [1].")
    answer, _ = _run(_agent(llm, naive=True, top_k=3), "Who supplies the NR-7 battery?")
    assert answer.evidence == "unverified" and [s.n for s in answer.sources] == [1]
    assert not answer.notes  # naive RAG never verifies: no degradation to report


def test_unsupported_citations_checks_each_sentence_against_its_passages() -> None:
    passages = ["The NR-7 battery is supplied by Kestrel Energy.", "Lyon has a robotics lab."]
    text = (
        "Kestrel Energy supplies the NR-7 battery [1]. "
        "Quarterly revenue in Europe grew strongly last year [2]. Short one [2]."
    )
    assert unsupported_citations(text, passages) == [
        "Quarterly revenue in Europe grew strongly last year [2]."
    ]


def test_citations_written_loosely_count_as_citations() -> None:
    """Small models write [Source 1] or [1, 2]; the answer keeps them as [1] / [1][2] and
    lists those passages as its sources instead of calling the answer uncited."""
    llm = ScriptedChatModel()
    llm.add_rule("TASK: decompose", '{"queries": ["The NR-7 battery"]}')
    llm.add_rule("TASK: judge", "YES")
    llm.add_rule("TASK: answer", "Kestrel Energy supplies the NR-7 battery [Source 1, 2].")
    answer, _ = _run(_agent(llm, max_iter=1, top_k=3), "Who supplies the NR-7 battery?")
    assert answer.answer.endswith("[1][2].")
    assert [s.n for s in answer.sources] == [1, 2]
    assert not any("cites none" in n for n in answer.notes)
