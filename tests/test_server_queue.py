# ruff: noqa: F811 (the shared server fixtures are imported, then named as parameters)
"""A burst beyond the search slots waits its turn instead of getting 429s; only a full queue
refuses, with a Retry-After from the expected wait."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import openai

from deepsearcher.server.guard import SearchSlots
from tests.llm_server import ScriptedLLMServer
from tests.server_fixtures import (  # noqa: F401 (fixtures are used as parameters)
    QUESTION,
    Serve,
    _chat,
    _client,
    root,
    searcher,
    serve,
)


def _ask(url: str, i: int) -> tuple[int, str | None]:
    try:
        resp = _chat(url, [{"role": "user", "content": f"{QUESTION} ({i})"}])
        return 200, resp.choices[0].message.content
    except openai.APIStatusError as exc:
        return exc.status_code, exc.response.headers.get("retry-after")


def test_burst_waits_for_a_slot(serve: Serve, llm_server: ScriptedLLMServer) -> None:
    llm_server.latency = 0.05
    url = serve(max_concurrent_searches=3)
    with ThreadPoolExecutor(20) as pool:  # clients without retries: a 429 would be an error
        results = list(pool.map(lambda i: _ask(url, i), range(20)))
    assert [s for s, _ in results] == [200] * 20
    assert all("45 euros" in (text or "") for _, text in results)


def test_full_queue_refuses_with_the_expected_wait(
    serve: Serve, llm_server: ScriptedLLMServer
) -> None:
    llm_server.latency = 0.4  # a deep search makes several rounds of calls: seconds long
    url = serve(max_concurrent_searches=1, max_queued_searches=1)
    assert _ask(url, 0)[0] == 200  # the server learns how long a search takes
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: _ask(url, i), range(4)))
    statuses = sorted(s for s, _ in results)
    assert statuses == [200, 200, 429, 429], results  # one running, one waiting, two refused
    # Refused behind one running and one waiting search: at least two searches' time.
    assert all(int(wait or 0) >= 2 for s, wait in results if s == 429), results


def test_a_waiter_that_leaves_passes_its_turn_on() -> None:
    async def scenario() -> list[str]:
        slots = SearchSlots(1, max_queued=2)
        running = await slots.acquire()
        assert running is not None
        order: list[str] = []

        async def wait(name: str) -> None:
            slot = await slots.acquire()
            assert slot is not None
            order.append(name)
            slot.release()

        leaver = asyncio.create_task(wait("leaver"))
        stayer = asyncio.create_task(wait("stayer"))
        await asyncio.sleep(0)
        assert slots.queued == 2 and await slots.acquire() is None  # the queue is full
        leaver.cancel()  # its client hung up while waiting
        running.release()
        await stayer
        assert slots.in_use == 0 and slots.queued == 0
        return order

    assert asyncio.run(scenario()) == ["stayer"]
