# ruff: noqa: F811 (the shared server fixtures are imported, then named as parameters)
"""The answer cache end to end: real Milvus Lite in tmp_path, real embeddings, and the scripted
LLM server counting the requests a question costs."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from typer.testing import CliRunner

import deepsearcher.cache as cache_module
from deepsearcher.cache import normalise_question
from deepsearcher.cli import app
from deepsearcher.config import Settings
from deepsearcher.errors import StoreError
from deepsearcher.options import QueryOptions
from deepsearcher.store import validate_collection_name
from deepsearcher.types import Answer
from tests.llm_server import ScriptedLLMServer
from tests.sample_docs import write_docs
from tests.server_fixtures import (  # noqa: F401 (fixtures are used as parameters)
    QUESTION,
    Serve,
    root,
    searcher,
    serve,
)
from tests.test_mcp import _data, _http

ASKED = "What payload does the NR-7 robot carry?"
REPHRASED = "  what payload does the NR-7 robot   carry "


def _with_llm(settings: Settings, server: ScriptedLLMServer, **cache: Any) -> Settings:
    s = settings.model_copy(deep=True)
    s.llm.base_url = server.base_url
    s.llm.model = "scripted"
    s.query.max_iter = 1
    s.cache.enabled = True  # the settings fixture turns it off for every other test
    for key, value in cache.items():
        setattr(s.cache, key, value)
    return s


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return write_docs(tmp_path / "docs")


@pytest.fixture
def loaded(settings: Settings, make_searcher: Any, docs: Path) -> Settings:
    ds = make_searcher(settings)
    assert ds.load([docs], "docs").files_new == 4
    ds.close()
    return settings


def _ask(ds: Any, llm: ScriptedLLMServer, question: str = ASKED, **kw: Any) -> tuple[Answer, int]:
    """The answer and the LLM requests it cost."""
    before = len(llm.requests)
    answer = ds.query(question, **kw)
    return answer, len(llm.requests) - before


def _same_answer(a: Answer, b: Answer) -> None:
    assert a.answer == b.answer
    assert [s.to_dict() for s in a.sources] == [s.to_dict() for s in b.sources]


def test_question_normalisation() -> None:
    assert normalise_question("  What  is\tX? ") == normalise_question("what is X")
    assert normalise_question("What is X？！") == "what is X"  # trailing punctuation, any width
    assert normalise_question("what is x") != normalise_question("what is y")
    # The capital a sentence starts with is grammar, not meaning.
    assert normalise_question("Is it on? Where is the switch?") == "is it on? where is the switch"
    # One text in two Unicode spellings (composed / decomposed accent) is one question.
    assert normalise_question("Qu'est-ce que l'\u00e9t\u00e9 ?") == normalise_question(
        "qu'est-ce que l'e\u0301te\u0301"
    )


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Is the ceiling 5² metres?", "Is the ceiling 52 metres?"),  # superscript
        ("Is 10² the area?", "Is 102 the area?"),
        ("How much H₂O is left?", "How much H2O is left?"),  # subscript
        ("Is the budget １０ million?", "Is the budget 10 million?"),  # full-width digits
        ("Where is the ﬁle policy?", "Where is the file policy?"),  # ligature
        ("What are the Maße?", "What are the Masse?"),  # ß is not ss
        # Case next to a number is a unit's meaning: megawatt / milliwatt, megasecond / ms.
        ("Is the output 5 MW?", "Is the output 5 mW?"),
        ("Does the job take 3 Ms?", "Does the job take 3 ms?"),
        ("Is the file 8 Mb?", "Is the file 8 MB?"),  # megabit / megabyte
        ("Does US law apply?", "Does us law apply?"),  # and in words too
    ],
)
def test_question_normalisation_never_merges_distinct_texts(one: str, other: str) -> None:
    assert normalise_question(one) != normalise_question(other)


def test_cache_collection_is_reserved() -> None:
    with pytest.raises(StoreError):
        validate_collection_name("_deepsearcher_answers")


def test_repeated_question_is_answered_from_the_cache_across_restarts(
    loaded: Settings, llm_server: ScriptedLLMServer, make_searcher: Any
) -> None:
    settings = _with_llm(loaded, llm_server)
    ds = make_searcher(settings)
    first, calls = _ask(ds, llm_server)
    assert not first.cached and first.mode == "deep" and calls > 0
    assert first.to_dict()["cached"] is False

    again, calls = _ask(ds, llm_server, REPHRASED)
    assert again.cached and calls == 0
    _same_answer(first, again)
    assert again.question == REPHRASED and again.usage.llm_calls == 0
    assert again.to_dict()["cached"] is True
    # The cache lives in the store, not in the process, and is never listed as a collection.
    assert [c.name for c in ds.collections()] == ["docs"]
    ds.close()

    restarted = make_searcher(settings)
    after, calls = _ask(restarted, llm_server)
    assert after.cached and calls == 0
    _same_answer(first, after)

    # Streaming a hit: the whole answer as one delta, then the done event.
    async def events() -> list[Any]:
        return [e async for e in restarted.astream(ASKED)]

    streamed = asyncio.run(events())
    assert [e.type for e in streamed] == ["answer_delta", "done"]
    assert streamed[0].text == first.answer and streamed[1].answer.cached


def test_other_options_collections_or_access_are_asked_afresh(
    loaded: Settings, llm_server: ScriptedLLMServer, make_searcher: Any
) -> None:
    ds = make_searcher(_with_llm(loaded, llm_server))
    _ask(ds, llm_server)
    for options in (
        QueryOptions(top_k=3),
        QueryOptions(collections=["docs"]),
        QueryOptions(allowed_collections=["docs"]),  # another key's access
        QueryOptions(agent="naive"),
        QueryOptions(filter=["source=**/*.md"]),  # a metadata filter
    ):
        answer, calls = _ask(ds, llm_server, options=options)
        assert not answer.cached and calls > 0, options
    other, calls = _ask(ds, llm_server, "Who supplies the NR-7 battery?")
    assert not other.cached and calls > 0
    # ...and each of them is now cached under its own key.
    hit, calls = _ask(ds, llm_server, options=QueryOptions(allowed_collections=["docs"]))
    assert hit.cached and calls == 0


def test_questions_differing_in_a_units_case_are_asked_afresh(
    loaded: Settings, llm_server: ScriptedLLMServer, make_searcher: Any
) -> None:
    """A question about 5 MW is not one about 5 mW: the second must not get the first's
    answer. The capital that starts the question still meets its lower-case spelling."""
    ds = make_searcher(_with_llm(loaded, llm_server))
    for first, second in (
        ("Is the NR-7 motor rated 5 MW?", "Is the NR-7 motor rated 5 mW?"),
        ("Does an NR-7 cycle take 3 Ms?", "Does an NR-7 cycle take 3 ms?"),
    ):
        asked, calls = _ask(ds, llm_server, first)
        assert not asked.cached and calls > 0
        other, calls = _ask(ds, llm_server, second)
        assert not other.cached and calls > 0, second
        again, calls = _ask(ds, llm_server, " " + first[0].lower() + first[1:-1])
        assert again.cached and calls == 0, first


def test_a_load_that_changes_the_collection_invalidates(
    loaded: Settings, llm_server: ScriptedLLMServer, make_searcher: Any, docs: Path
) -> None:
    ds = make_searcher(_with_llm(loaded, llm_server))
    _ask(ds, llm_server)

    unchanged = ds.load([docs], "docs")
    assert unchanged.files_unchanged == 4 and unchanged.files_loaded == 0
    hit, calls = _ask(ds, llm_server)
    assert hit.cached and calls == 0

    victim = sorted(docs.iterdir())[0]
    victim.write_text(victim.read_text(encoding="utf-8") + "\nA new line.\n", encoding="utf-8")
    assert ds.load([docs], "docs").files_changed == 1
    miss, calls = _ask(ds, llm_server)
    assert not miss.cached and calls > 0

    hit, _ = _ask(ds, llm_server)
    assert hit.cached
    victim.unlink()
    assert ds.load([docs], "docs", prune=True).chunks_removed > 0
    pruned, calls = _ask(ds, llm_server)
    assert not pruned.cached and calls > 0

    # A new collection beside it changes what "all collections" can draw on.
    (docs.parent / "more").mkdir()
    (docs.parent / "more" / "note.txt").write_text("The NR-8 carries 9 kg.", encoding="utf-8")
    hit, _ = _ask(ds, llm_server)
    assert hit.cached
    ds.load([docs.parent / "more"], "more")
    widened, calls = _ask(ds, llm_server)
    assert not widened.cached and calls > 0


def test_expired_answers_are_asked_afresh(
    loaded: Settings,
    llm_server: ScriptedLLMServer,
    make_searcher: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ds = make_searcher(_with_llm(loaded, llm_server, ttl_s=60))
    _ask(ds, llm_server)
    assert _ask(ds, llm_server)[0].cached
    later = time.time() + 61
    monkeypatch.setattr(cache_module, "_now", lambda: later)
    expired, calls = _ask(ds, llm_server)
    assert not expired.cached and calls > 0


def test_cut_short_or_degraded_answers_are_not_cached(
    loaded: Settings, llm_server: ScriptedLLMServer, make_searcher: Any
) -> None:
    settings = _with_llm(loaded, llm_server)
    settings.llm.max_retries = 0
    ds = make_searcher(settings)
    llm_server.add_fault("500", times=None)
    degraded, _ = _ask(ds, llm_server)
    assert degraded.notes and degraded.answer.startswith("No generated answer")
    llm_server.reset()
    fresh, calls = _ask(ds, llm_server)
    assert not fresh.cached and fresh.mode == "deep" and calls > 0

    budget = _with_llm(loaded, llm_server)
    budget.query.max_llm_calls = 1
    small = make_searcher(budget)
    for _ in range(2):
        short, calls = _ask(small, llm_server, "Who supplies the NR-7 battery?")
        assert short.cut_short and not short.cached and calls > 0


def test_cache_off_in_config_or_per_call(
    loaded: Settings, llm_server: ScriptedLLMServer, make_searcher: Any
) -> None:
    off = make_searcher(_with_llm(loaded, llm_server, enabled=False))
    for _ in range(2):
        answer, calls = _ask(off, llm_server)
        assert not answer.cached and calls > 0
    off.close()
    on = make_searcher(_with_llm(loaded, llm_server))
    assert not _ask(on, llm_server)[0].cached  # nothing was stored while it was off
    bypass, calls = _ask(on, llm_server, use_cache=False)
    assert not bypass.cached and calls > 0
    assert _ask(on, llm_server)[0].cached


def test_cli_json_shows_cached_on_the_second_run(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "q.db"),
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
        "DEEPSEARCHER_QUERY__MAX_ITER": "1",
    }
    res = CliRunner().invoke(app, ["load", str(write_docs(tmp_path / "docs"))], env=env)
    assert res.exit_code == 0, res.output
    runs = []
    for extra in ([], [], ["--no-cache"]):
        before = len(llm_server.requests)
        res = CliRunner().invoke(app, ["query", ASKED, "--json", *extra], env=env)
        assert res.exit_code == 0, res.output
        runs.append((json.loads(res.stdout), len(llm_server.requests) - before))
    (first, first_calls), (second, second_calls), (bypassed, bypass_calls) = runs
    assert first["cached"] is False and first_calls > 0
    assert second["cached"] is True and second_calls == 0
    assert second["answer"] == first["answer"] and second["sources"] == first["sources"]
    assert bypassed["cached"] is False and bypass_calls > 0


def test_http_query_and_chat_show_cached(
    serve: Serve, searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    searcher.settings.cache.enabled = True  # off in the settings fixture
    url = serve()
    body = {"question": QUESTION, "max_iter": 1}
    first = httpx.post(f"{url}/v1/query", json=body, timeout=60).json()
    before = len(llm_server.requests)
    second = httpx.post(f"{url}/v1/query", json=body, timeout=60).json()
    assert first["cached"] is False and second["cached"] is True
    assert second["answer"] == first["answer"] and len(llm_server.requests) == before
    fresh = httpx.post(f"{url}/v1/query", json={**body, "cache": False}, timeout=60).json()
    assert fresh["cached"] is False and len(llm_server.requests) > before

    chat = {"messages": [{"role": "user", "content": QUESTION}], "max_iter": 1}
    reply = httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=60).json()
    assert reply["deepsearcher"]["cached"] is True
    assert reply["choices"][0]["message"]["content"].startswith(first["answer"])

    with httpx.stream(
        "POST", f"{url}/v1/chat/completions", json={**chat, "stream": True}, timeout=60
    ) as stream:
        frames = [
            json.loads(line[6:])
            for line in stream.iter_lines()
            if line.startswith("data: ") and line != "data: [DONE]"
        ]
    deltas = [f["choices"][0]["delta"].get("content") for f in frames if f["choices"]]
    assert deltas[1] == first["answer"]  # after the role frame: the answer as one delta
    assert frames[-1]["deepsearcher"]["cached"] is True


def test_mcp_deep_search_shows_cached(
    serve: Serve, searcher: Any, llm_server: ScriptedLLMServer
) -> None:
    searcher.settings.cache.enabled = True  # off in the settings fixture
    url = serve()
    ask = {"question": QUESTION, "max_iter": 1}

    async def calls() -> list[tuple[dict[str, Any], int]]:
        out = []
        async with _http(url, None) as session:
            same = "  " + QUESTION[0].lower() + QUESTION[1:-1]  # the key drops case at the start
            for args in (ask, {**ask, "question": same}, {**ask, "cache": False}):
                before = len(llm_server.requests)
                answer = _data(await session.call_tool("deep_search", args))
                out.append((answer, len(llm_server.requests) - before))
        return out

    (first, first_calls), (second, second_calls), (fresh, fresh_calls) = anyio.run(calls)
    assert first["cached"] is False and first_calls > 0
    assert second["cached"] is True and second_calls == 0
    assert second["answer"] == first["answer"] and second["sources"] == first["sources"]
    assert fresh["cached"] is False and fresh_calls > 0


def test_settings_that_steer_the_search_are_part_of_the_key(settings: Settings) -> None:
    from deepsearcher.cache import AnswerCache
    from deepsearcher.store import MilvusStore

    store = MilvusStore(settings.vector_store)
    try:
        changed = []
        for section, key, value in (
            ("vector_store", "hybrid_rrf_k", 60),
            ("query", "max_context_chunks", 5),
            ("llm", "model", "another"),
            ("embedding", "model", "another"),
        ):
            s = settings.model_copy(deep=True)
            setattr(getattr(s, section), key, value)
            changed.append(AnswerCache(store, s).key(ASKED, QueryOptions()))
        same = settings.model_copy(deep=True)
        same.llm.timeout_s = 1  # how long a call may take does not change the answer
        base = AnswerCache(store, settings).key(ASKED, QueryOptions())
        assert AnswerCache(store, same).key(ASKED, QueryOptions()) == base
        assert len({base, *changed}) == 5
    finally:
        store.close()
