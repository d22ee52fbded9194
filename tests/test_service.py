"""``SearchService`` in process: the time budget it gives a run, the queue, the deadline and the
slot a stream holds. The routes over it are tested end to end in tests/test_server*.py and
tests/test_mcp.py; these pin what every front end gets from it, with no server in between."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from deepsearcher.config import Settings
from deepsearcher.options import QueryOptions
from deepsearcher.searcher import DeepSearcher
from deepsearcher.server.access import Access
from deepsearcher.server.errors import RequestError
from deepsearcher.server.openai_api import LoadRequest
from deepsearcher.server.service import SearchService


def _service(settings: Settings, remote: bool = True, **server: Any) -> SearchService:
    settings = settings.model_copy(update={"server": settings.server.model_copy(update=server)})
    return SearchService(DeepSearcher(settings), settings, remote=remote)


def test_a_remote_run_is_budgeted_inside_the_request_deadline(settings: Settings) -> None:
    svc = _service(settings, request_timeout_s=10.0)
    options = svc.query_options(QueryOptions(top_k=3))
    assert options.top_k == 3  # the caller's options stand
    assert options.timeout_s == pytest.approx(8.0)
    assert options.budget_name == "80% of server.request_timeout_s=10s"
    assert svc.research_budget() == (pytest.approx(8.0), "80% of server.request_timeout_s=10s")
    # A stdio client is the local user: the configured budget applies, not the server's.
    local = _service(settings, remote=False, request_timeout_s=10.0)
    assert local.query_options(QueryOptions(top_k=3)) == QueryOptions(top_k=3)
    # A deadline whose 80% outlasts the configured budget leaves it alone.
    long = _service(settings, request_timeout_s=settings.query.timeout_s * 2)
    assert long.query_options(QueryOptions()) == QueryOptions()


def test_a_full_queue_is_a_429_and_the_refused_work_never_starts(settings: Settings) -> None:
    svc = _service(settings, max_concurrent_searches=1, max_queued_searches=0)
    started: list[str] = []

    async def work() -> str:
        started.append("work")
        return "done"

    async def scenario() -> RequestError:
        held = await svc.acquire()
        assert held is not None
        refused = work()
        with pytest.raises(RequestError) as caught:
            await svc.queued(refused)
        assert refused.cr_frame is None  # closed, so no "never awaited" warning either
        held.release()
        assert await svc.queued(work()) == "done" and svc.slots.in_use == 0
        return caught.value

    err = asyncio.run(scenario())
    assert err.status == 429 and err.code == "server_busy" and "Retry-After" in err.headers
    assert started == ["work"]  # only the run that got the slot


def test_the_deadline_cancels_the_work_with_a_504(settings: Settings) -> None:
    svc = _service(settings, request_timeout_s=0.05)
    cancelled = asyncio.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def scenario() -> RequestError:
        with pytest.raises(RequestError) as caught:
            await svc.within_deadline(slow())
        assert cancelled.is_set()
        return caught.value

    err = asyncio.run(scenario())
    assert err.status == 504 and err.message == "the search did not finish within 0.05s"


def test_a_stream_holds_its_slot_until_closed(settings: Settings) -> None:
    svc = _service(settings, max_concurrent_searches=1)

    async def events() -> AsyncIterator[int]:
        yield 1
        await asyncio.sleep(5)  # a run that would go on: close must stop it
        yield 2

    async def scenario() -> None:
        run = await svc.stream(events())
        assert await run.next() == 1 and svc.slots.in_use == 1
        run.close()
        assert svc.slots.in_use == 0
        local = _service(settings, remote=False, max_concurrent_searches=1)
        run = await local.stream(events())  # no queue for the local user
        assert await run.next() == 1 and local.slots.in_use == 0
        run.close()

    asyncio.run(scenario())


def _status(work: Any) -> tuple[int, str]:
    """The ``RequestError`` a service call refuses with: its status and code."""
    with pytest.raises(RequestError) as caught:
        asyncio.run(work)
    return caught.value.status, caught.value.code or ""


def test_each_operation_checks_the_key_itself(
    settings: Settings, make_searcher: Any, tmp_path: Path
) -> None:
    # The front ends hand the service the caller's access and nothing else: what a key may
    # read or load is decided in the operation, the same for a REST route and an MCP tool.
    for name, text in (("hr", "The daily meal allowance is 45 euros."), ("support", SUPPORT)):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.md").write_text(text, encoding="utf-8")
    ds = make_searcher()
    for name in ("hr", "support"):
        ds.load([tmp_path / name], name)
    svc = SearchService(ds, settings, remote=True)
    support = Access("support desk", read=("support",), load=("support",))
    everything = Access("admin")

    listed = asyncio.run(svc.collections(support))
    assert [i.name for i in listed] == ["support"]
    found = asyncio.run(svc.passages(support, "meal allowance", QueryOptions()))
    assert found.hits and {h.collection for h in found.hits} == {"support"}
    named = QueryOptions(collections=["hr"])
    assert _status(svc.passages(support, "meal allowance", named)) == (403, "collection_forbidden")

    hr_hit = asyncio.run(svc.passages(everything, "meal allowance", named)).hits[0]
    assert asyncio.run(svc.passage(everything, "hr", hr_hit.id)).text == hr_hit.text
    assert _status(svc.passage(support, "hr", hr_hit.id)) == (403, "collection_forbidden")
    # Refused before it is looked for: a refused key learns nothing of what exists.
    assert _status(svc.passage(support, "finance", "0" * 40)) == (403, "collection_forbidden")
    assert _status(svc.passage(everything, "hr", "0" * 40))[0] == 404

    request = asyncio.run(svc.research_request(support, "What does support handle?"))
    assert list(request.collections or []) == ["support"]
    assert asyncio.run(svc.research_request(everything, "Everything?")).collections is None
    assert _status(svc.research_request(support, "r", ["hr"])) == (403, "collection_forbidden")
    missing = svc.research_request(everything, "r", ["finance"])
    assert _status(missing) == (404, "collection_not_found")

    # The key may not load into hr: refused before anything looks at the paths.
    load = LoadRequest(paths=["anything"], collection="hr")
    assert _status(svc.load_paths(support, load)) == (403, "load_forbidden")
    assert _status(svc.load_paths(everything, load)) == (403, "load_root_unset")


SUPPORT = "The support desk answers tickets within one working day."
