"""Deep search with a model weaker or stricter than the scripted default, in-process: a judge
that says NO (or YES) to everything, log-probabilities that disagree with the word, replies
that copy the prompt's example, answers whose citations do not hold. The HTTP path of each is
in test_deep_search.py and test_deep_search_hops.py."""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any

from deepsearcher.agents import DeepSearchAgent, NaiveRAGAgent
from deepsearcher.agents.citations import tidy, unsupported_citations
from deepsearcher.agents.judge import yes_no_margin, yes_no_margins
from deepsearcher.agents.parsing import OutputParseError, parse_queries
from deepsearcher.agents.queries import standalone
from deepsearcher.config import Settings
from deepsearcher.llm import Completion, TokenLogprob
from deepsearcher.options import QueryOptions
from deepsearcher.retrieval import Retriever
from deepsearcher.types import Answer, Event, Usage
from tests.memory_index import CORPUS, MODEL, MemoryStore, WordHashEmbedder
from tests.scripted_model import DOCUMENT, ScriptedChatModel


def _agent(llm: ScriptedChatModel, naive: bool = False, **query: Any) -> Any:
    settings = Settings()
    settings.embedding.model = MODEL
    # The bag-of-words test embedder has its own cosine scale: attribution rests on its
    # term checks here (test_attribution.py covers the threshold with the real embedder).
    settings.query.attribution_threshold = 0.0
    # The judge's own calls (the default, "lookup", takes verdicts from the lookup's call:
    # test_deep_search_hops.py covers it).
    query.setdefault("rerank", "llm-batch")
    for key, value in query.items():
        section = settings.llm if key == "llm_judge_threshold" else settings.query
        setattr(section, key.removeprefix("llm_"), value)
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


def _asked_passage(prompt: str) -> str:
    """The passage a one-verdict judge prompt asks about."""
    n = int(re.search(r"Is document (\d+) above", prompt).group(1))  # type: ignore[union-attr]
    return DOCUMENT.findall(prompt)[n - 1]


def _verdict(word: str, p_yes: float) -> Completion:
    """A judge reply with log-probabilities: ``word`` said, P(YES) = ``p_yes``."""
    top = {"YES": math.log(p_yes), "NO": math.log(1 - p_yes), "Maybe": -9.0}
    return Completion(word, Usage(1, 10, 1), "stop", logprobs=[TokenLogprob(word, top[word], top)])


def _plan(llm: ScriptedChatModel, *steps: str) -> None:
    llm.add_rule("TASK: plan", json.dumps({"steps": list(steps)}))
    llm.add_rule("TASK: extract", '{"answer": "", "document": 0}')
    llm.add_rule("TASK: reflect", '{"queries": []}')


# -- a judge whose verdicts tell nothing apart ----------------------------------------------


def test_a_judge_that_says_no_to_everything_leaves_the_passages_to_retrieval() -> None:
    llm = ScriptedChatModel()
    _plan(llm, "Who supplies the NR-7 battery?")
    llm.add_rule("TASK: judge", lambda p: json.dumps(["NO"] * len(DOCUMENT.findall(p))))
    llm.add_rule("TASK: answer", "Kestrel Energy supplies the NR-7 battery [1].")
    answer, _events = _run(_agent(llm, max_iter=1, top_k=3), "Who supplies the NR-7 battery?")
    assert answer.chunks_dropped == 3  # what the judge said is reported ...
    (call,) = llm.calls("answer")
    assert len(DOCUMENT.findall(call[-1]["content"])) == 3  # ... but nothing is thrown away
    assert DOCUMENT.findall(call[-1]["content"])[0] == CORPUS["robots.txt"][1]  # best first
    assert any("dropped all 3 passage(s)" in n and "ranked by retrieval" in n for n in answer.notes)
    assert answer.evidence == "unverified" and not any(s.verified for s in answer.sources)


def test_verdicts_that_tell_nothing_apart_are_not_paid_for_again() -> None:
    llm = ScriptedChatModel()
    _plan(llm, "Who makes the robot battery?")
    llm.add_rule("TASK: judge", lambda p: json.dumps(["YES"] * len(DOCUMENT.findall(p))))
    llm.add_rule("TASK: reflect", '{"queries": ["Kestrel Energy battery supplier"]}', times=1)
    llm.add_rule("TASK: answer", "Kestrel Energy [1].")
    answer, _events = _run(_agent(llm, max_iter=2, top_k=3), "Who makes the robot battery?")
    assert answer.iterations == 2
    assert len(llm.calls("judge-batch")) == 1  # the second round is ranked by retrieval
    assert any("kept all" in n and "no further verdicts" in n for n in answer.notes)
    assert not any(s.verified for s in answer.sources)


# -- an informative judge and the evidence floor --------------------------------------------


def test_a_judge_that_keeps_too_few_gets_the_best_ranked_rejected_unverified() -> None:
    llm = ScriptedChatModel()
    _plan(llm, "Who supplies the NR-7 battery?")
    llm.add_rule("TASK: judge", lambda p: "YES" if "Kestrel" in _asked_passage(p) else "NO")
    llm.add_rule("TASK: answer", "Kestrel Energy supplies the NR-7 battery [1].")
    agent = _agent(llm, max_iter=1, top_k=3, min_evidence=3, rerank="llm")
    answer, _ = _run(agent, "Who supplies the NR-7 battery?")
    assert answer.chunks_kept == 1 and answer.chunks_dropped == 2
    (call,) = llm.calls("answer")
    given = DOCUMENT.findall(call[-1]["content"])
    assert len(given) == 3 and given[0] == CORPUS["robots.txt"][1]  # the kept one first
    assert any("fewer than query.min_evidence (3)" in n and "unverified" in n for n in answer.notes)
    assert [(s.text, s.verified) for s in answer.sources] == [(CORPUS["robots.txt"][1], True)]
    assert answer.evidence == "verified"


def test_no_floor_trusts_an_informative_judge() -> None:
    llm = ScriptedChatModel()
    _plan(llm, "Who supplies the NR-7 battery?")
    llm.add_rule("TASK: judge", lambda p: "YES" if "Kestrel" in _asked_passage(p) else "NO")
    llm.add_rule("TASK: answer", "Kestrel Energy [1].")
    agent = _agent(llm, max_iter=1, top_k=3, min_evidence=0, rerank="llm")
    _answer, _ = _run(agent, "Who supplies the NR-7 battery?")
    (call,) = llm.calls("answer")
    assert DOCUMENT.findall(call[-1]["content"]) == [CORPUS["robots.txt"][1]]


# -- log-probabilities: the margin, not only the word -------------------------------------


def test_a_no_with_a_fair_share_of_yes_is_kept_by_the_margin() -> None:
    llm = ScriptedChatModel()
    _plan(llm, "Who supplies the NR-7 battery?")
    # Said NO every time; P(YES) 0.3 for the Kestrel passage, 0.01 for the others.
    llm.add_rule(
        "TASK: judge",
        lambda p: _verdict("NO", 0.3 if "Kestrel" in _asked_passage(p) else 0.01),
    )
    llm.add_rule("TASK: answer", "Kestrel Energy [1].")
    agent = _agent(llm, max_iter=1, top_k=3, min_evidence=0, rerank="llm")
    answer, events = _run(agent, "Who supplies the NR-7 battery?")
    kept = [e for e in events if e.type == "verdict" and e.kept]
    assert [e.chunk_id for e in kept] == ["robots.txt#1"]
    assert kept[0].margin is not None and math.isclose(kept[0].margin, math.log(0.3 / 0.7))
    assert answer.evidence == "verified"
    assert all(llm.logprobs[i] for i, m in enumerate(llm.history) if "TASK: judge" in str(m))


def test_each_verdict_of_a_batch_has_its_own_margin() -> None:
    def batch(prompt: str) -> Completion:
        docs = DOCUMENT.findall(prompt)
        tokens = [TokenLogprob('{"verdicts": ["', 0.0, {})]
        for d in docs:
            p_yes = 0.4 if "Kestrel" in d else 0.02
            top = {"NO": math.log(1 - p_yes), "YES": math.log(p_yes), "N": -9.0}
            tokens += [TokenLogprob("NO", top["NO"], top), TokenLogprob('", "', 0.0, {})]
        return Completion(json.dumps(["NO"] * len(docs)), Usage(1, 10, 5), "stop", logprobs=tokens)

    llm = ScriptedChatModel()
    _plan(llm, "Who supplies the NR-7 battery?")
    llm.add_rule("TASK: judge-batch", batch)
    llm.add_rule("TASK: answer", "Kestrel Energy [1].")
    agent = _agent(llm, max_iter=1, top_k=3, min_evidence=0, llm_judge_threshold=-1.0)
    _answer, events = _run(agent, "Who supplies the NR-7 battery?")
    verdicts = {e.chunk_id: e for e in events if e.type == "verdict"}
    assert [c for c, e in verdicts.items() if e.kept] == ["robots.txt#1"]
    assert math.isclose(verdicts["robots.txt#1"].margin or 0, math.log(0.4 / 0.6))
    assert len(llm.calls("judge-batch")) == 1 and not llm.calls("judge")


def test_threshold_zero_follows_the_word() -> None:
    llm = ScriptedChatModel()
    _plan(llm, "Who supplies the NR-7 battery?")
    llm.add_rule("TASK: judge", lambda p: _verdict("NO", 0.3))
    llm.add_rule("TASK: answer", "Nothing.")
    agent = _agent(llm, max_iter=1, top_k=3, min_evidence=0, judge_threshold=0.0, rerank="llm")
    answer, _ = _run(agent, "Who supplies the NR-7 battery?")
    assert answer.chunks_kept == 0


def test_the_models_calibrated_threshold_wins_over_the_default() -> None:
    llm = ScriptedChatModel()
    _plan(llm, "Who supplies the NR-7 battery?")
    llm.add_rule("TASK: judge", lambda p: _verdict("NO", 0.3))  # margin log(0.3/0.7) = -0.85
    llm.add_rule("TASK: answer", "Nothing.")
    agent = _agent(
        llm, max_iter=1, top_k=3, judge_threshold=-2.0, llm_judge_threshold=0.0, rerank="llm"
    )
    answer, _ = _run(agent, "Who supplies the NR-7 battery?")
    assert answer.chunks_kept == 0 and answer.chunks_dropped == 3


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
    # In a batch, every verdict word has its margin, in order; one without alternatives
    # leaves the batch without margins (they would not line up with the passages).
    two = [TokenLogprob("YES", -0.1, {"YES": -0.1, "NO": -2.4}), *tokens]
    assert [round(m, 3) for m in yes_no_margins(two)] == [2.3, round(yes - no, 3)]
    assert yes_no_margins([*two, TokenLogprob('"NO"', -0.1, {})]) == []


# -- structured output and copied examples --------------------------------------------------


def test_plan_verdicts_lookups_and_reflection_ask_for_a_schema() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: plan", '{"steps": ["What does the robot carry?", "How fast does it go?"]}')
    llm.add_rule("TASK: judge", '{"verdicts": ["YES", "NO", "YES"]}')
    llm.add_rule("TASK: extract", '{"answer": "", "document": 0}')
    llm.add_rule("TASK: reflect", '{"queries": []}')
    llm.add_rule("TASK: answer", "Twelve kilograms [1].")
    agent = _agent(llm, max_iter=2, top_k=3)
    _run(agent, "What does the robot carry, and how fast does it go?")  # two parts: a plan
    names = {s.name for s in llm.schemas if s is not None}
    assert names == {"steps", "verdicts", "extracted", "queries"}


def test_a_plan_copying_the_example_is_refused_and_asked_again() -> None:
    llm = ScriptedChatModel()
    llm.add_rule("TASK: plan", '{"steps": ["What is the NR-7 payload?"]}')
    llm.add_rule(
        "TASK: plan",
        '{"steps": ["Who is the author of the novel Dune?", "Where was #1 born?"]}',
        times=1,
    )
    llm.add_rule("TASK: judge", lambda p: json.dumps(["YES"] * len(DOCUMENT.findall(p))))
    llm.add_rule("TASK: extract", '{"answer": "twelve kilograms", "document": 1}')
    llm.add_rule("TASK: answer", "Twelve kilograms [1].")
    question = "What is the NR-7 payload, and what does it weigh?"  # two parts: a plan
    answer, _ = _run(_agent(llm, max_iter=1, top_k=3), question)
    retry = llm.calls("plan")[1][-1]["content"]
    assert "copy the examples" in retry
    assert answer.sub_queries == [question, "What is the NR-7 payload?"]
    assert [h.question for h in answer.hops] == ["What is the NR-7 payload?"]


def test_parse_queries_refuses_examples_and_placeholders() -> None:
    for reply in ('["query one", "query two"]', '{"queries": ["<search phrase>"]}'):
        try:
            parse_queries(reply)
        except OutputParseError as exc:
            assert "copies the example" in str(exc)
        else:
            raise AssertionError(f"accepted {reply}")
    assert parse_queries('{"queries": ["Kestrel lead time"]}') == ["Kestrel lead time"]


def test_standalone_leaves_self_contained_queries_alone() -> None:
    q = "Who supplies the NR-7 battery and what is its lead time?"
    assert standalone("NR-7 battery supplier", q) == "NR-7 battery supplier"
    assert standalone(q, q) == q  # the question itself
    made = standalone("What is its lead time?", q)
    assert made.startswith("What is its lead time") and "NR-7" in made and "battery" in made
    # "that" starting a relative clause points back to nothing: the lookup stays as written
    # (it lost its "that" and gained "(directed)" before).
    film = "Who directed the film that was shot in or around Leland, North Carolina in 1986"
    lookup = "What is the film that was shot in or around Leland, North Carolina in 1986?"
    assert standalone(lookup, film) == lookup
    assert standalone("Who manages that office?", "Who manages the Austin office?") == (
        "Who manages office (Austin)"
    )


# -- citations that hold ---------------------------------------------------------------------


def test_sentences_that_only_say_where_the_answer_was_found_are_left_out() -> None:
    # What the local model appends to its answers; its citation goes to the sentence before
    # when that one has none, and a sentence that states something of its own stays.
    assert (
        tidy(
            "The account manager is Elin Forsberg [1]. This information can be found in document "
            "1, which contains the details of the customer and their account manager [4]."
        )
        == "The account manager is Elin Forsberg [1]."
    )
    assert tidy("The range is 2 to 8 °C. This is stated in documents [3] and [4].") == (
        "The range is 2 to 8 °C [3][4]."
    )
    kept = "Her extension is 4471 [1]. This is stated in the directory, which lists E1163 [1]."
    assert tidy(kept) == kept
    assert tidy("This information is found in document [1].") == (
        "This information is found in document [1]."
    )  # the only sentence: nothing to give its citation to


def test_sources_are_the_cited_passages_and_unsupported_citations_are_flagged() -> None:
    llm = ScriptedChatModel()
    _plan(llm, "Who supplies the NR-7 battery?")
    llm.add_rule(
        "TASK: judge", lambda p: json.dumps(["YES", "NO", "YES"][: len(DOCUMENT.findall(p))])
    )
    # [1] holds the battery claim; the Lyon headcount is not in the passage cited for it.
    llm.add_rule(
        "TASK: answer",
        lambda p: (
            f"Kestrel Energy supplies the NR-7 battery [{_n(p, 'Kestrel')}]. "
            f"The Lyon office employs forty engineers in robotics [{_n(p, 'payload')}]."
        ),
    )
    answer, _ = _run(
        _agent(llm, max_iter=1, top_k=3, min_evidence=3), "Who supplies the NR-7 battery?"
    )
    assert len(answer.sources) == 2 and len(answer.retrieved) == 1
    assert {s.n for s in answer.sources}.isdisjoint({s.n for s in answer.retrieved})
    assert answer.unsupported_citations == [answer.answer.split(". ", 1)[1]]
    assert any("1 cited sentence(s) not found" in n for n in answer.notes)
    d = answer.to_dict()
    assert d["unsupported_citations"] and len(d["retrieved"]) == 1


def _n(prompt: str, word: str) -> int:
    return next(i for i, t in enumerate(DOCUMENT.findall(prompt), start=1) if word in t)


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
    _plan(llm, "Who supplies the NR-7 battery?")
    llm.add_rule("TASK: judge", "YES")
    llm.add_rule("TASK: answer", "Kestrel Energy supplies the NR-7 battery [Source 1, 2].")
    answer, _ = _run(_agent(llm, max_iter=1, top_k=3), "Who supplies the NR-7 battery?")
    assert answer.answer.endswith("[1][2].")
    assert [s.n for s in answer.sources] == [1, 2]
    assert not any(s.attributed for s in answer.sources)
    assert not any("cites none" in n for n in answer.notes)
