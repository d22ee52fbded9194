"""The deep-search loop's logic in-process: a scripted ChatModel, the real Retriever over a
small in-memory index. No Milvus, no embedding model, no sockets; each test runs in
milliseconds. The end-to-end path is in test_deep_search.py."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from deepsearcher import DeepSearcher
from deepsearcher.agents import DeepSearchAgent, NaiveRAGAgent
from deepsearcher.config import Settings
from deepsearcher.options import QueryOptions, UnknownOptionError
from deepsearcher.retrieval import Retriever
from deepsearcher.types import Answer, Event
from tests.memory_index import CORPUS, MODEL, MemoryStore, WordHashEmbedder
from tests.scripted_model import DOCUMENT, ScriptedChatModel


def _settings(**query: Any) -> Settings:
    settings = Settings()
    settings.embedding.model = MODEL
    for key, value in query.items():
        setattr(settings.query, key, value)
    return settings


def _retriever(settings: Settings) -> Retriever:
    embedder = WordHashEmbedder()
    store = MemoryStore(embedder)
    store.add("docs", CORPUS)
    return Retriever(embedder, store, settings)


def _deep(llm: ScriptedChatModel, **query: Any) -> DeepSearchAgent:
    # The judge's own decisions: the evidence floor (query.min_evidence) has its own tests.
    settings = _settings(**{"min_evidence": 0, **query})
    return DeepSearchAgent(settings, llm, _retriever(settings))


def _run(agent: Any, question: str, **options: Any) -> tuple[Answer, list[Event]]:
    async def go() -> list[Event]:
        return [e async for e in agent.run(question, QueryOptions(**options))]

    events = asyncio.run(go())
    last = events[-1]
    assert last.type == "done"
    return last.answer, events


def _documents(messages: list[dict[str, str]]) -> list[str]:
    return DOCUMENT.findall(messages[-1]["content"])


def _judge_yes_if(*words: str) -> Callable[[str], str]:
    """A judge that reads the passage it is asked about ("Is document n above useful"): YES
    when it holds one of ``words``."""

    def reply(prompt: str) -> str:
        n = int(re.search(r"Is document (\d+) above", prompt).group(1))  # type: ignore[union-attr]
        passage = DOCUMENT.findall(prompt)[n - 1]
        return "YES" if any(w in passage for w in words) else "NO"

    return reply


def _extract(answer: str) -> Callable[[str], str]:
    """A lookup answered ``answer`` from the first passage that holds it ("" : not found)."""

    def reply(prompt: str) -> str:
        docs = DOCUMENT.findall(prompt)
        n = next((i for i, d in enumerate(docs, start=1) if answer and answer in d), 0)
        return json.dumps({"answer": answer if n else "", "document": n})

    return reply


def _script(
    llm: ScriptedChatModel,
    *,
    plan: list[str],
    judge: str | Callable[[str], str] = "YES",
    extract: str | Callable[[str], str] = '{"answer": "", "document": 0}',
    reflect: str | Callable[[str], str] = "[]",
    answer: str = "The documents do not state it.",
) -> None:
    llm.add_rule("TASK: plan", json.dumps({"steps": plan}))
    llm.add_rule("TASK: judge", judge)
    llm.add_rule("TASK: extract", extract)
    llm.add_rule("TASK: reflect", reflect)
    llm.add_rule("TASK: answer", answer)


def test_the_plan_is_capped_at_four_lookups() -> None:
    llm = ScriptedChatModel()
    many = [f"robot question number {i}" for i in range(9)]
    _script(llm, plan=many, judge="NO")
    question = "What is the robot, and which office builds it?"  # two parts: a plan
    answer, events = _run(_deep(llm, max_iter=1), question)
    plan = next(e for e in events if e.type == "plan")
    assert plan.steps == many[:4] and len(answer.hops) == 4
    first = next(e for e in events if e.type == "sub_queries")
    # The question itself first, then the lookups, at most 4 queries a round.
    assert first.queries == [question, *many[:3]]
    assert [e.query for e in events if e.type == "search"] == first.queries
    assert "at most 4" in llm.calls("plan")[0][-1]["content"]


def test_gap_queries_are_capped_at_three() -> None:
    llm = ScriptedChatModel()
    gaps = [f"missing fact number {i}" for i in range(6)]
    _script(llm, plan=["What does the robot carry?"], judge="NO")
    llm.add_rule("TASK: reflect", json.dumps(gaps), times=1)
    answer, events = _run(_deep(llm, max_iter=3), "What does the robot carry?")
    reflection = next(e for e in events if e.type == "reflection")
    assert reflection.gap_queries == gaps[:3]
    second = [e for e in events if e.type == "sub_queries"][1]
    assert second.queries == gaps[:3] and second.iteration == 2
    assert answer.sub_queries == ["What does the robot carry?", *gaps[:3]]


@pytest.mark.parametrize(("configured", "option", "iterations"), [(2, None, 2), (2, 3, 3)])
def test_max_iter_is_respected(configured: int, option: int | None, iterations: int) -> None:
    llm = ScriptedChatModel()
    asked = iter(range(100))
    # The lookup is never answered and reflection always finds new words: only max_iter (the
    # setting, or the option) stops.
    _script(llm, plan=["robot?"], judge="NO", reflect=lambda _: f'["gap number {next(asked)}"]')
    answer, events = _run(_deep(llm, max_iter=configured), "robot?", max_iter=option)
    assert answer.iterations == iterations
    assert len([e for e in events if e.type == "sub_queries"]) == iterations
    assert len(llm.calls("reflect")) == iterations - 1  # none after the last round


def test_judge_keeps_only_the_passages_it_says_yes_to() -> None:
    llm = ScriptedChatModel()
    _script(
        llm,
        plan=["Who supplies the NR-7 battery?", "Who is the office manager in Austin?"],
        judge=_judge_yes_if("Kestrel", "Ortega"),
        answer="Kestrel Energy [1]; Rafael Ortega [2].",
    )
    agent = _deep(llm, max_iter=1, rerank="llm")
    answer, events = _run(agent, "Who supplies the battery, who runs Austin?")
    verdicts = [e for e in events if e.type == "verdict"]
    assert {e.chunk_id for e in verdicts if e.kept} == {"robots.txt#1", "offices.txt#0"}
    assert answer.chunks_kept == 2
    assert answer.chunks_dropped == len(verdicts) - 2 > 0
    (call,) = llm.calls("answer")
    assert sorted(_documents(call)) == sorted([CORPUS["robots.txt"][1], CORPUS["offices.txt"][0]])
    assert all(s.verified for s in answer.sources)


def _battery_answer(written: str) -> tuple[Answer, list[Any]]:
    """Deep search's answer when the model writes ``written`` about the NR-7 battery."""
    llm = ScriptedChatModel()
    _script(
        llm,
        plan=["Who supplies the NR-7 battery?"],
        judge=_judge_yes_if("Kestrel"),
        answer=written,
    )
    return _run(_deep(llm, max_iter=1, rerank="llm"), "Who supplies the NR-7 battery?")


def test_citations_that_point_at_no_passage_are_removed() -> None:
    answer, events = _battery_answer("Kestrel Energy supplies it [1], not the one in [4].")
    assert [(s.n, s.text) for s in answer.sources] == [(1, CORPUS["robots.txt"][1])]
    assert "[4]" not in answer.answer and "[1]" in answer.answer
    assert any(e.type == "note" and "removed 1 citation" in e.message for e in events)


def test_a_marker_written_twice_in_a_row_is_kept_once() -> None:
    answer, _events = _battery_answer(
        "Kestrel Energy supplies it [1] [1], as the spec says [1][1]."
    )
    assert answer.answer == "Kestrel Energy supplies it [1], as the spec says [1]."


def test_a_garbage_verdict_is_retried_once_then_left_unjudged_with_a_note() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=["NR-7 battery"], judge="%%% garbled ~~")
    answer, events = _run(
        _deep(llm, max_iter=1, top_k=3, rerank="llm"), "Who supplies the NR-7 battery?"
    )
    assert not [e for e in events if e.type == "verdict"]
    judge_calls = llm.calls("judge")
    assert len(judge_calls) == 2 * 3  # each passage asked twice, the second time
    assert sum("could not be used" in c[-1]["content"] for c in judge_calls) == 3
    notes = [e.message for e in events if e.type == "note"]
    assert any("3 chunk(s) unjudged: verdict failed" in n for n in notes), notes
    # Nothing was judged away: the three passages reach the answer, unverified.
    (call,) = llm.calls("answer")
    assert len(_documents(call)) == 3
    assert answer.chunks_kept == 0 and answer.chunks_dropped == 0


def test_garbage_verdict_fixed_by_the_retry_is_kept() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=["NR-7 battery"], judge="%%% garbled ~~")
    llm.add_rule(lambda p: "TASK: judge" in p and "could not be used" in p, "YES")
    answer, events = _run(
        _deep(llm, max_iter=1, top_k=2, rerank="llm"), "Who supplies the NR-7 battery?"
    )
    verdicts = [e for e in events if e.type == "verdict"]
    assert answer.chunks_kept == len(verdicts) >= 1 and answer.chunks_dropped == 0
    assert all(e.kept for e in verdicts)
    assert not any(e.type == "note" and "unjudged" in e.message for e in events)


def test_spent_budget_answers_from_what_was_found() -> None:
    llm = ScriptedChatModel()
    _script(llm, plan=["robot office travel"], answer="From what was found [1].")
    agent = _deep(llm, max_iter=3, top_k=6, max_llm_calls=3, rerank="llm")
    answer, events = _run(agent, "What do the robots carry, and where are the offices?")
    assert answer.cut_short == "LLM call budget of 3 reached"
    assert answer.usage.llm_calls <= 3
    notes = [e.message for e in events if e.type == "note"]
    assert any(n.startswith("search cut short: LLM call budget") and "unjudged" in n for n in notes)
    # The answer is still written, from what was found before the budget ran out, and the
    # model is told the search was cut short.
    (call,) = llm.calls("answer")
    assert "cut short" in call[-1]["content"]
    assert _documents(call)
    assert answer.answer == "From what was found [1]."
    assert not llm.calls("reflect") and not llm.calls("extract")


def test_unknown_option_is_an_error_listing_the_valid_ones() -> None:
    with pytest.raises(UnknownOptionError) as err:
        QueryOptions.from_mapping({"topk": 3, "agent": "naive"})
    assert "topk" in err.value.message
    assert "top_k" in err.value.hint and "max_iter" in err.value.hint


@pytest.mark.parametrize("agent", ["naive", "deep"])
def test_facade_refuses_unknown_options_for_every_agent(agent: str) -> None:
    # The naive agent used to drop unknown options silently, the deep one raised TypeError.
    settings = _settings()
    embedder = WordHashEmbedder()
    store = MemoryStore(embedder)
    store.add("docs", CORPUS)
    ds = DeepSearcher(settings, embedder=embedder, store=store, llm=ScriptedChatModel())
    with pytest.raises(UnknownOptionError):
        ds.query("Who supplies the battery?", agent=agent, max_iters=2)


def test_facade_wires_injected_components() -> None:
    settings = _settings()
    embedder = WordHashEmbedder()
    store = MemoryStore(embedder)
    store.add("docs", CORPUS)
    llm = ScriptedChatModel()
    llm.add_rule("TASK: answer", "Kestrel Energy [1].")
    ds = DeepSearcher(settings, embedder=embedder, store=store, llm=llm)
    answer = ds.query("Who supplies the NR-7 battery?", QueryOptions(agent="naive", top_k=1))
    assert answer.mode == "naive"
    assert [s.text for s in answer.sources] == [CORPUS["robots.txt"][1]]
    assert isinstance(ds.build_agent(QueryOptions(agent="naive")), NaiveRAGAgent)


def test_misconfigured_web_search_is_a_note_not_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DS_TEST_NO_SUCH_KEY", raising=False)
    settings = _settings(max_iter=1)
    settings.web_search.provider = "tavily"
    settings.web_search.api_key_env = "DS_TEST_NO_SUCH_KEY"
    embedder = WordHashEmbedder()
    store = MemoryStore(embedder)
    store.add("docs", CORPUS)
    llm = ScriptedChatModel()
    _script(llm, plan=["Who supplies the NR-7 battery?"], answer="Kestrel Energy [1].")
    ds = DeepSearcher(settings, embedder=embedder, store=store, llm=llm)
    answer = ds.query("Who supplies the NR-7 battery?", web=True)  # off in config, on here
    (note,) = [n for n in answer.notes if n.startswith("web search unavailable")]
    assert "DS_TEST_NO_SUCH_KEY is not set" in note
    assert answer.answer == "Kestrel Energy [1]." and answer.sources


def test_a_citation_carries_the_hits_location_whole() -> None:
    from deepsearcher.agents.base import hit_to_source
    from deepsearcher.types import Citation, Hit, Located

    hit = Hit(
        "c1", "text", "/d/a.pdf", 0.5, "docs", start=3, end=9, page=2, page_end=3, record_id="r"
    )
    cited = hit_to_source(1, hit, verified=True)
    assert isinstance(cited, Citation) and isinstance(cited, Located)
    assert cited.location() == hit.location()
    assert cited.label == hit.label == "/d/a.pdf p. 2–3"
    assert cited.to_dict() == {
        "n": 1,
        "source": "/d/a.pdf",
        "page": 2,
        "page_end": 3,
        "start": 3,
        "end": 9,
        "text": "text",
        "collection": "docs",
        "verified": True,
        "attributed": False,
        "record_id": "r",
    }


def test_passages_shown_after_the_llm_went_away_keep_what_the_run_recorded() -> None:
    """The retrieval-only answer of a run that was cut short and then lost its LLM says both,
    and counts what the run used (the fields come from the run, not copied by hand)."""
    from deepsearcher.agents.naive_rag import retrieval_only
    from deepsearcher.llm.base import LLMUnreachableError
    from deepsearcher.run_context import RunContext

    settings = _settings()
    ctx = RunContext.create(settings, ScriptedChatModel())
    ctx.cut_short = "LLM call budget of 3 reached"
    ctx.unreachable = LLMUnreachableError("connection refused", hint="start the server")

    async def go() -> list[Event]:
        retriever = _retriever(settings)
        return [
            e async for e in retrieval_only(settings, retriever, "robot payload", None, 2, ctx=ctx)
        ]

    answer = asyncio.run(go())[-1].answer
    assert answer.mode == "retrieval-only" and len(answer.sources) == 2
    assert answer.cut_short == "LLM call budget of 3 reached"
    assert answer.llm_unreachable and "connection refused" in answer.llm_unreachable
    assert answer.notes and answer.seconds > 0
