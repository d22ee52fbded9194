# ruff: noqa: F811 (the shared server fixtures are imported, then named as parameters)
"""Research reports over HTTP, end to end: uvicorn on 127.0.0.1, the handbook in real Milvus
Lite, the scripted LLM server (its default replies cover every research stage). The
``deepsearcher-research`` chat model (report, stream, the clarifying question as an assistant
turn and the reply continuing the run), ``/v1/research`` (the CLI's --json), and the limits
every search route has: per-key access, the request deadline, the body limit, the slots."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from deepsearcher.research import Report
from deepsearcher.searcher import DeepSearcher
from deepsearcher.server.access import load_keys_file
from tests.llm_server import ScriptedLLMServer, task_of
from tests.server_fixtures import (  # noqa: F401 (fixtures are used as parameters)
    Serve,
    _client,
    _write,
    root,
    searcher,
    serve,
)

MODEL = "deepsearcher-research"
REQUEST = "the daily meal allowance for business travel and the paid vacation days"
QUESTION = "Which employees do you mean: staff in Lisbon, or everyone?"
ASKING_BRIEF = {
    "goal": REQUEST,
    "must_answer": ["What is the daily meal allowance?"],
    "question": QUESTION,
}


def _cited(markdown: str) -> tuple[set[int], dict[int, str]]:
    body, _, listing = markdown.partition("## Sources")
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    sources = {int(n): label for n, label in re.findall(r"^\[(\d+)\] (.*)$", listing, re.M)}
    return cited, sources


def _frames(url: str, body: dict[str, Any], key: str | None = None) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    frames: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{url}/v1/chat/completions", json=body, headers=headers, timeout=120
    ) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line.startswith("data: {"):
                frames.append(json.loads(line[6:]))
    return frames


def test_the_research_model_writes_a_cited_report(serve: Serve, root: Path) -> None:
    url = serve()
    assert MODEL in [m.id for m in _client(url).models.list().data]
    resp = _client(url).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": REQUEST}]
    )
    content = resp.choices[0].message.content or ""
    assert resp.choices[0].finish_reason == "stop" and content.startswith(f"# {REQUEST}")
    assert "45 euros" in content and "25 days of paid vacation" in content
    cited, sources = _cited(content)
    assert cited and cited <= set(sources)  # every [n] resolves to a listed source
    files = {label.split(" (chars")[0] for label in sources.values()}
    assert files <= {"travel.md", "benefits.txt", "security.txt", "offices.md"}
    extra = resp.model_extra or {}
    details = extra["deepsearcher"]
    assert details["plan"]["sections"] and details["quality"]["coverage"] == 1.0
    assert details["usage"]["llm_calls"] >= 6 and resp.usage is not None
    assert resp.usage.total_tokens > 0
    assert str(root) not in content + json.dumps(extra)  # paths relative to the collection


def test_the_research_stream_shows_the_stages_then_the_report(
    serve: Serve, llm_server: ScriptedLLMServer
) -> None:
    url = serve()
    frames = _frames(
        url,
        {
            "model": MODEL,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": REQUEST}],
        },
    )
    deltas = [f["choices"][0]["delta"] for f in frames if f["choices"]]
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    assert "Plan: 2 section(s)" in reasoning and "Researching: " in reasoning
    assert "Check: coverage 100%" in reasoning
    events = [f["deepsearcher_event"]["type"] for f in frames if "deepsearcher_event" in f]
    assert events[:2] == ["brief", "plan"] and "researcher_finished" in events
    report = "".join(d.get("content") or "" for d in deltas)
    assert report.startswith(f"# {REQUEST}") and "## Sources" in report
    cited, sources = _cited(report)
    assert cited and cited <= set(sources)
    last = [f for f in frames if f["choices"]][-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["deepsearcher"]["usage"]["llm_calls"] == len(llm_server.requests)
    assert frames[-1]["usage"]["total_tokens"] > 0


def test_a_clarifying_question_is_an_assistant_turn_and_the_reply_continues(
    serve: Serve, llm_server: ScriptedLLMServer
) -> None:
    url = serve()
    llm_server.add_rule(
        lambda r: task_of(r) == "research-brief" and "The user answered" not in json.dumps(r),
        json.dumps(ASKING_BRIEF),
    )
    first = [{"role": "user", "content": REQUEST}]
    resp = _client(url).chat.completions.create(model=MODEL, messages=first)  # type: ignore[arg-type]
    question = resp.choices[0].message.content or ""
    assert question == f"Before I research this: {QUESTION}"
    assert resp.choices[0].finish_reason == "stop"
    assert llm_server.count("research-brief") == 1 and llm_server.count("plan") == 0
    # Streamed, the question comes the same way.
    frames = _frames(url, {"model": MODEL, "stream": True, "messages": first})
    assert "".join(f["choices"][0]["delta"].get("content") or "" for f in frames) == question

    # The client sends the conversation back with the user's reply: the run goes on with it.
    turns = [
        *first,
        {"role": "assistant", "content": question},
        {"role": "user", "content": "everyone"},
    ]
    llm_server.requests.clear()
    resp = _client(url).chat.completions.create(model=MODEL, messages=turns)  # type: ignore[arg-type]
    brief = (resp.model_extra or {})["deepsearcher"]["brief"]
    assert brief["assumptions"][0] == f"clarified: {QUESTION} -> everyone"
    # One brief call, written with the question and the reply (read from the conversation).
    asked = [json.dumps(r) for r in llm_server.requests if task_of(r) == "research-brief"]
    assert len(asked) == 1 and f"Request: {REQUEST}" in asked[0]
    assert f"Asked: {QUESTION} The user answered: everyone" in asked[0]
    assert "## Sources" in (resp.choices[0].message.content or "")

    # A conversation that already had its clarification is not asked again.
    llm_server.add_rule(lambda r: task_of(r) == "research-brief", json.dumps(ASKING_BRIEF))
    later = [
        *turns,
        {"role": "assistant", "content": "(the report)"},
        {"role": "user", "content": "the vacation days"},
    ]
    resp = _client(url).chat.completions.create(model=MODEL, messages=later)  # type: ignore[arg-type]
    brief = (resp.model_extra or {})["deepsearcher"]["brief"]
    assert brief["goal"] == REQUEST  # the scripted brief
    assert f"not asked (non-interactive): {QUESTION}" in brief["assumptions"]


def test_v1_research_returns_the_json_of_the_cli(
    serve: Serve, llm_server: ScriptedLLMServer, root: Path
) -> None:
    url = serve()
    resp = httpx.post(
        f"{url}/v1/research",
        json={"request": REQUEST, "collections": ["handbook"], "max_sections": 1},
        timeout=120,
    )
    assert resp.status_code == 200, resp.text
    data = resp.json()
    assert set(data) == set(Report(request="x").to_dict())  # the --json object's keys
    assert len(data["plan"]["sections"]) == 1
    evidence = {e["id"]: e for e in data["evidence"]}
    assert data["sources"] and all(s["evidence_id"] in evidence for s in data["sources"])
    assert {e["source"] for e in evidence.values()} <= {"travel.md", "benefits.txt"}
    assert str(root) not in resp.text
    # Asked to stop at the clarifying question, it returns the question; the reply goes on.
    llm_server.add_rule(
        lambda r: task_of(r) == "research-brief" and "The user answered" not in json.dumps(r),
        json.dumps(ASKING_BRIEF),
    )
    asked = httpx.post(f"{url}/v1/research", json={"request": REQUEST, "clarify": True}).json()
    assert asked["object"] == "research.clarification" and asked["question"] == QUESTION
    for extra in ({}, {"question": QUESTION}):  # with the question: one brief call, not two
        llm_server.requests.clear()
        answered = httpx.post(
            f"{url}/v1/research",
            json={"request": REQUEST, "clarification": "everyone", **extra},
            timeout=120,
        ).json()
        assert answered["brief"]["assumptions"][0] == f"clarified: {QUESTION} -> everyone"
        assert llm_server.count("research-brief") == (1 if extra else 2)
    # Without clarify, as for the CLI without a terminal, the brief records its assumption.
    plain = httpx.post(f"{url}/v1/research", json={"request": REQUEST}, timeout=120).json()
    assert f"not asked (non-interactive): {QUESTION}" in plain["brief"]["assumptions"]
    for body, message in (
        ({"request": ""}, "request"),
        ({"request": REQUEST, "max_section": 2}, "max_section"),
        ({"request": REQUEST, "collections": ["nope"]}, "does not exist"),
    ):
        bad = httpx.post(f"{url}/v1/research", json=body)
        assert bad.status_code in (400, 404) and message in bad.json()["error"]["message"]


KEYS = """
keys:
  - name: handbook-bot
    key_env: HANDBOOK_KEY
    read: [handbook]
  - name: admin
    key_env: ADMIN_KEY
    read: "*"
"""


def test_a_key_researches_only_the_collections_it_reads(
    serve: Serve, searcher: DeepSearcher, tmp_path: Path
) -> None:
    secret = _write(
        tmp_path / "secret",
        {
            "pay.md": "The daily meal allowance for board members is 300 euros. Paid vacation "
            "for board members is 60 days.\n"
        },
    )
    searcher.load([secret], "board", description="board papers")
    (tmp_path / "keys.yaml").write_text(KEYS, encoding="utf-8")
    keys = load_keys_file(tmp_path / "keys.yaml", {"HANDBOOK_KEY": "hb", "ADMIN_KEY": "adm"})
    url = serve(api_keys=keys)
    h = {"Authorization": "Bearer hb"}
    denied = httpx.post(
        f"{url}/v1/research", json={"request": REQUEST, "collections": ["board"]}, headers=h
    )
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "collection_forbidden"
    data = httpx.post(f"{url}/v1/research", json={"request": REQUEST}, headers=h, timeout=120)
    report = data.json()
    assert report["evidence"] and {e["collection"] for e in report["evidence"]} == {"handbook"}
    assert "300 euros" not in data.text and "pay.md" not in data.text
    frames = _frames(
        url,
        {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": REQUEST}]},
        "hb",
    )
    assert "300 euros" not in json.dumps(frames) and "pay.md" not in json.dumps(frames)
    # The admin key's run does read the board papers: the restriction is the key's.
    full = httpx.post(
        f"{url}/v1/research",
        json={"request": REQUEST},
        headers={"Authorization": "Bearer adm"},
        timeout=120,
    ).json()
    assert "board" in {e["collection"] for e in full["evidence"]}


def test_deadline_body_limit_and_slots_apply(serve: Serve, llm_server: ScriptedLLMServer) -> None:
    url = serve(
        request_timeout_s=1.0, max_request_mb=0.01, max_concurrent_searches=1, max_queued_searches=0
    )
    big = httpx.post(f"{url}/v1/research", json={"request": "x" * 20_000})
    assert big.status_code == 413
    # A slow brief is bounded by the run's own budget (80% of the request timeout): the
    # client gets a report marked cut short, naming the limit that applied, streamed or not.
    llm_server.add_rule("TASK: research-brief", "{}", latency=3.0)
    resp = httpx.post(f"{url}/v1/research", json={"request": REQUEST}, timeout=30)
    assert resp.status_code == 200 and "server.request_timeout_s=1s" in resp.json()["cut_short"]
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": REQUEST}]}
    report = "".join(
        f["choices"][0]["delta"].get("content") or "" for f in _frames(url, body) if f["choices"]
    )
    assert "**Cut short:**" in report and "server.request_timeout_s=1s" in report
    # While one report holds the only search slot, the next request is turned away.
    llm_server.reset()
    llm_server.add_rule("TASK: research-brief", "{}", latency=0.8)
    holder = threading.Thread(
        target=lambda: httpx.post(f"{url}/v1/research", json={"request": REQUEST}, timeout=30)
    )
    holder.start()
    deadline = time.monotonic() + 10
    while not llm_server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    busy = httpx.post(f"{url}/v1/research", json={"request": REQUEST})
    holder.join()
    assert busy.status_code == 429 and busy.json()["error"]["code"] == "server_busy"
