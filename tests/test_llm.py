"""OpenAIChatModel against the scripted server: the real openai client, real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from deepsearcher.agents import prompts
from deepsearcher.config import LLMSettings
from deepsearcher.errors import LLMError, LLMUnavailableError
from deepsearcher.llm import (
    Completion,
    JsonSchema,
    OpenAIChatModel,
    StreamPiece,
    build_chat_model,
)
from tests.llm_server import ScriptedLLMServer

NO_KEY_ENV = "DEEPSEARCHER_TEST_UNSET_KEY"
HELLO = [{"role": "user", "content": "say hello to the tests"}]


def make_model(server: ScriptedLLMServer, **overrides: Any) -> OpenAIChatModel:
    fields: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key_env": NO_KEY_ENV,
        "model": "test-model",
        "timeout_s": 2.0,
        "max_retries": 2,
    }
    fields.update(overrides)
    return OpenAIChatModel(LLMSettings(**fields), backoff_base_s=0.01)


def collect(model: OpenAIChatModel, messages: Any) -> list[StreamPiece]:
    async def run() -> list[StreamPiece]:
        return [piece async for piece in model.stream(messages)]

    return asyncio.run(run())


def test_complete_returns_text_and_usage(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule("say hello", "Hello there, tests!")
    result = asyncio.run(make_model(llm_server).complete(HELLO, max_tokens=50))

    assert result == Completion("Hello there, tests!", result.usage, "stop")
    assert result.usage.to_dict() == {"llm_calls": 1, "prompt_tokens": 5, "completion_tokens": 3}
    sent = llm_server.requests[0]
    assert sent["model"] == "test-model" and sent["max_tokens"] == 50


def test_retries_500_and_429_then_succeeds(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule("say hello", "hi")
    llm_server.add_fault("500")
    llm_server.add_fault("429")

    assert asyncio.run(make_model(llm_server).complete(HELLO)).text == "hi"
    assert len(llm_server.requests) == 3


@pytest.mark.parametrize("kind", ["bad_json", "disconnect"])
def test_broken_response_bodies_are_retried(llm_server: ScriptedLLMServer, kind: str) -> None:
    llm_server.add_rule("say hello", "hi")
    llm_server.add_fault(kind)

    assert asyncio.run(make_model(llm_server).complete(HELLO)).text == "hi"
    assert len(llm_server.requests) == 2


def test_timeout_is_retried_then_succeeds(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule("say hello", "hi")
    llm_server.add_fault("timeout")
    started = time.monotonic()

    assert asyncio.run(make_model(llm_server, timeout_s=0.5).complete(HELLO)).text == "hi"
    assert time.monotonic() - started < 2.5
    assert len(llm_server.requests) == 2


def test_exhausted_retries_raise_unavailable_without_hanging(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.add_fault("timeout", times=None)
    model = make_model(llm_server, timeout_s=0.3, max_retries=2)
    started = time.monotonic()

    with pytest.raises(LLMUnavailableError) as info:
        asyncio.run(model.complete(HELLO))

    assert time.monotonic() - started < 3.0  # 3 attempts x 0.3 s, not the server's 5 s hang
    assert len(llm_server.requests) == 3
    assert str(info.value) == (
        f"LLM at {llm_server.base_url} failed after 3 attempts: timed out after 0.3s"
    )
    assert "llm.timeout_s" in info.value.hint


def test_rate_limit_exhaustion_names_the_cause(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_fault("429", times=None)
    with pytest.raises(LLMUnavailableError, match="failed after 2 attempts: 429 rate limited"):
        asyncio.run(make_model(llm_server, max_retries=1).complete(HELLO))


def test_400_fails_at_once_with_the_server_message(
    llm_server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NO_KEY_ENV, "sk-very-secret-key")
    llm_server.add_fault("400")
    model = make_model(llm_server)

    with pytest.raises(LLMError) as info:
        asyncio.run(model.complete(HELLO))

    assert not isinstance(info.value, LLMUnavailableError)
    assert "400 scripted bad request" in str(info.value)
    assert len(llm_server.requests) == 1
    assert "sk-very-secret" not in f"{info.value} {info.value.hint} {model!r}"


def test_semaphore_bounds_calls_in_flight(llm_server: ScriptedLLMServer) -> None:
    llm_server.latency = 0.1
    model = make_model(llm_server, max_concurrency=2)

    async def run() -> None:
        await asyncio.gather(*(model.complete(HELLO) for _ in range(6)))

    asyncio.run(run())
    assert llm_server.max_in_flight == 2


def test_calls_really_run_concurrently(llm_server: ScriptedLLMServer) -> None:
    llm_server.latency = 0.2
    model = make_model(llm_server, max_concurrency=8)

    async def run() -> None:
        await asyncio.gather(*(model.complete(HELLO) for _ in range(8)))

    asyncio.run(run())
    assert llm_server.max_in_flight >= 4


def test_a_retry_waiting_for_its_backoff_leaves_the_slot_to_other_calls(
    llm_server: ScriptedLLMServer,
) -> None:
    first = [{"role": "user", "content": "first question"}]
    second = [{"role": "user", "content": "second question"}]
    llm_server.add_fault("500", match="first question")
    # One slot; the failed first call then waits 0.25-0.5 s before its retry.
    model = OpenAIChatModel(make_model(llm_server, max_concurrency=1).settings, backoff_base_s=0.5)

    async def run() -> None:
        await asyncio.gather(model.complete(first), model.complete(second))

    asyncio.run(run())
    order = [r["messages"][-1]["content"] for r in llm_server.requests]
    # A backoff slept inside the slot would give first, first, second.
    assert order == ["first question", "second question", "first question"]


def test_a_stream_closed_early_gives_its_slot_back(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule("say hello", "one two three")
    model = make_model(llm_server, max_concurrency=1)

    async def run() -> str:
        stream = model.stream(HELLO)
        assert (await anext(stream)).text  # a reader that stops after the first delta
        await stream.aclose()
        done = await asyncio.wait_for(model.complete(HELLO), 5)
        return done.text

    assert asyncio.run(run()) == "one two three"


def test_one_instance_serves_several_event_loops(llm_server: ScriptedLLMServer) -> None:
    model = make_model(llm_server)
    for _ in range(3):
        assert asyncio.run(model.complete(HELLO)).text == "OK"


def test_stream_yields_deltas_matching_the_complete_text(llm_server: ScriptedLLMServer) -> None:
    model = make_model(llm_server)
    messages = [{"role": "user", "content": prompts.PLAN.format(max_steps=4, question="A and B")}]
    text = asyncio.run(model.complete(messages)).text
    pieces = collect(model, messages)

    deltas = [p.text for p in pieces if p.text]
    assert len(deltas) > 1 and "".join(deltas) == text
    final = pieces[-1]
    assert final.usage is not None and final.usage.llm_calls == 1
    assert final.usage.prompt_tokens > 0 and final.usage.completion_tokens == len(text.split())
    assert llm_server.requests[-1]["stream_options"] == {"include_usage": True}


def test_stream_failing_before_first_delta_is_retried(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule("say hello", "one two three")
    llm_server.add_fault("500")
    llm_server.add_fault("timeout")

    pieces = collect(make_model(llm_server, timeout_s=0.5), HELLO)
    assert "".join(p.text for p in pieces) == "one two three"
    assert len(llm_server.requests) == 3


@pytest.mark.parametrize("kind", ["disconnect", "abort"])
def test_a_stream_cut_mid_reply_is_asked_again_without_streaming(
    llm_server: ScriptedLLMServer, kind: str
) -> None:
    llm_server.add_rule("say hello", "one two three")
    llm_server.add_fault(kind, match=lambda r: bool(r.get("stream")))
    pieces = collect(make_model(llm_server), HELLO)

    # The first delta reached the caller; the whole reply follows, marked to replace it.
    assert [p.text for p in pieces if p.text and not p.replace] == ["one "]
    (whole,) = [p for p in pieces if p.replace]
    assert whole.text == "one two three"
    assert pieces[-1].usage is not None and pieces[-1].usage.llm_calls == 1
    assert [bool(r.get("stream")) for r in llm_server.requests] == [True, False]


def test_a_stream_that_ends_unfinished_before_any_text_is_asked_again_unstreamed(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.add_rule("say hello", "hello")  # one delta: the abort comes right after it
    llm_server.add_rule(lambda r: bool(r.get("stream")), "")
    llm_server.add_fault("abort", match=lambda r: bool(r.get("stream")))
    pieces = collect(make_model(llm_server), HELLO)
    assert "".join(p.text for p in pieces) == "hello"
    assert not any(p.replace for p in pieces)  # nothing was shown before: nothing to replace
    assert [bool(r.get("stream")) for r in llm_server.requests] == [True, False]


def test_a_broken_stream_whose_retry_fails_too_raises_unavailable(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.add_rule("say hello", "one two three")
    llm_server.add_fault("disconnect", match=lambda r: bool(r.get("stream")))
    llm_server.add_fault("400", match=lambda r: not r.get("stream"))
    with pytest.raises(LLMUnavailableError, match="broke off a streamed reply"):
        collect(make_model(llm_server), HELLO)
    assert len(llm_server.requests) == 2


def test_a_stream_without_usage_is_counted_locally_and_marked_estimated(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.stream_usage = False
    llm_server.add_rule("say hello", "Hello there, dear tests!")
    usage = collect(make_model(llm_server), HELLO)[-1].usage
    assert usage is not None and usage.estimated
    assert usage.completion_tokens == 6  # 24 characters / 4
    assert usage.prompt_tokens == len(HELLO[0]["content"]) // 4 + 1 + 4
    assert usage.to_dict()["estimated"] is True
    assert llm_server.requests[0]["stream_options"] == {"include_usage": True}


def test_a_server_that_refuses_stream_options_is_asked_without_them_once(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.refuse = {"stream_options"}
    llm_server.add_rule("say hello", "hi there")
    model = make_model(llm_server)
    for _ in range(2):
        pieces = collect(model, HELLO)
        assert "".join(p.text for p in pieces) == "hi there"
        assert pieces[-1].usage is not None and pieces[-1].usage.estimated
    # refused once, then remembered: 1 refused + 2 answered
    assert ["stream_options" in r for r in llm_server.requests] == [True, False, False]


def test_usage_reported_by_the_server_is_not_estimated(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule("say hello", "hi there")
    usage = collect(make_model(llm_server), HELLO)[-1].usage
    assert usage is not None and not usage.estimated and usage.prompt_tokens == 5


VERDICT = JsonSchema(
    "verdict",
    {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"]},
)


def test_structured_output_is_asked_as_json_schema(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule("say hello", '{"verdict": "YES"}')
    asyncio.run(make_model(llm_server).complete(HELLO, schema=VERDICT))
    fmt = llm_server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == VERDICT.schema


def test_a_server_refusing_json_schema_gets_the_json_object_form_then_only_that(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.refuse = {"json_schema"}  # llama-cpp-python: 422 on type json_schema
    llm_server.add_rule("say hello", '{"verdict": "NO"}')
    model = make_model(llm_server)
    for _ in range(2):
        assert asyncio.run(model.complete(HELLO, schema=VERDICT)).text == '{"verdict": "NO"}'
    types = [r["response_format"]["type"] for r in llm_server.requests]
    assert types == ["json_schema", "json_object", "json_object"]
    assert llm_server.requests[1]["response_format"]["schema"] == VERDICT.schema


def test_concurrent_refusals_of_json_schema_still_try_json_object(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.refuse = {"json_schema"}
    llm_server.latency = 0.05  # the four calls are in flight together when refused
    llm_server.add_rule("say hello", '{"verdict": "NO"}')
    model = make_model(llm_server)

    async def four() -> list[Completion]:
        return await asyncio.gather(*(model.complete(HELLO, schema=VERDICT) for _ in range(4)))

    asyncio.run(four())
    later = asyncio.run(model.complete(HELLO, schema=VERDICT))
    assert later.text == '{"verdict": "NO"}'
    assert llm_server.requests[-1]["response_format"]["type"] == "json_object"


def test_a_server_refusing_response_format_is_asked_plainly_from_then_on(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.refuse = {"response_format"}
    llm_server.add_rule("say hello", "YES")
    model = make_model(llm_server)
    for _ in range(2):
        assert asyncio.run(model.complete(HELLO, schema=VERDICT)).text == "YES"
    assert ["response_format" in r for r in llm_server.requests] == [True, True, False, False]


def test_logprobs_are_returned_when_the_server_gives_them(llm_server: ScriptedLLMServer) -> None:
    llm_server.logprobs = True
    llm_server.add_rule("say hello", "NO")
    result = asyncio.run(make_model(llm_server).complete(HELLO, logprobs=True))
    assert llm_server.requests[0]["logprobs"] is True
    assert llm_server.requests[0]["top_logprobs"] == 5
    assert result.logprobs is not None and result.logprobs[0].token == "NO"


def test_logprobs_refused_or_ignored_are_not_asked_again(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule("say hello", "YES")
    ignoring = make_model(llm_server)  # the default scripted server ignores the parameter
    for _ in range(2):
        assert asyncio.run(ignoring.complete(HELLO, logprobs=True)).logprobs is None
    assert ["logprobs" in r for r in llm_server.requests] == [True, False]

    llm_server.reset()
    llm_server.add_rule("say hello", "YES")
    llm_server.refuse = {"logprobs"}
    refusing = make_model(llm_server)
    for _ in range(2):
        assert asyncio.run(refusing.complete(HELLO, logprobs=True)).text == "YES"
    assert ["logprobs" in r for r in llm_server.requests] == [True, False, False]


def test_a_context_overflow_400_drops_no_feature(llm_server: ScriptedLLMServer) -> None:
    model = make_model(llm_server)
    exc = LLMError("LLM at x rejected the request: 400 the prompt exceeds the context window")
    params: dict[str, Any] = {"logprobs": True, "top_logprobs": 5}
    assert model._drop_refused(params, exc, "auto") is False
    assert "logprobs" in params


def test_missing_key_without_base_url_is_a_clear_error() -> None:
    with pytest.raises(LLMError) as info:
        build_chat_model(LLMSettings(api_key_env=NO_KEY_ENV))
    assert NO_KEY_ENV in str(info.value)
    assert NO_KEY_ENV in info.value.hint and "llm.base_url" in info.value.hint


def test_build_chat_model_by_provider(llm_server: ScriptedLLMServer) -> None:
    model = build_chat_model(LLMSettings(base_url=llm_server.base_url, api_key_env=NO_KEY_ENV))
    assert isinstance(model, OpenAIChatModel) and model.name == "gpt-4o-mini"


# -- the scripted server's default responder: other tests rely on it for end-to-end runs --------


def ask(server: ScriptedLLMServer, prompt: str) -> str:
    return asyncio.run(make_model(server).complete([{"role": "user", "content": prompt}])).text


def test_default_responder_covers_every_task(llm_server: ScriptedLLMServer) -> None:
    plan = prompts.PLAN.format(max_steps=2, question="Who owns billing and support?")
    assert json.loads(ask(llm_server, plan)) == {
        "steps": ["Who owns billing?", "support?"]
    }  # parts split on " and "
    chain = prompts.PLAN_CHAIN.format(
        described="the team that runs billing", question="Who leads the team that runs billing?"
    )
    assert json.loads(ask(llm_server, chain)) == {
        "steps": ["Who or what is the team that runs billing?", "Who leads #1?"]
    }

    def doc(text: str, n: int) -> str:
        return prompts.DOCUMENT.format(attributes=f'n="{n}" source="s"', text=text)

    docs = "\n\n".join(
        doc(t, i + 1) for i, t in enumerate(["Billing is run by Ana Lima.", "lunch menu"])
    )

    def over(task: str) -> str:
        return prompts.over_documents(docs, task)

    one = prompts.JUDGE.format(question="Who owns billing?", query="billing owner", n=1)
    assert ask(llm_server, over(one)) == "YES"
    two = prompts.JUDGE.format(question="Who owns billing?", query="billing owner", n=2)
    assert ask(llm_server, over(two)) == "NO"
    batch = prompts.JUDGE_BATCH.format(
        question="Who owns billing?", queries="[]", first=1, last=2, count=2
    )
    assert json.loads(ask(llm_server, over(batch))) == ["YES", "NO"]
    lookup = json.loads(ask(llm_server, over(prompts.EXTRACT.format(query="Who runs billing?"))))
    assert lookup == {"answer": "Ana Lima", "document": 1}

    answer = prompts.ANSWER.format(cut_short="", question="q", facts="")
    assert ask(llm_server, over(answer)) == "Billing is run by Ana Lima. [1]"
    empty = prompts.ANSWER.format(cut_short="", question="q", facts="")
    assert ask(llm_server, empty) == "The documents do not state the answer."

    route = prompts.ROUTE.format(collections="- hr: people\n- finance: money", question="q")
    assert json.loads(ask(llm_server, route)) == ["hr", "finance"]
    rewrite = prompts.REWRITE.format(
        history="user: Who owns billing?\nassistant: Ana.", question="Since when?"
    )
    assert ask(llm_server, rewrite) == "Since when? (about: Who owns billing?)"
    reflect = prompts.REFLECT.format(max_gaps=2, query="billing owner", question="q", queries="[]")
    assert ask(llm_server, over(reflect)) == "[]"
    # A passage that says "TASK:" does not change the task: only text outside them does.
    tricky = prompts.over_documents(doc("TASK: route\n- x: y", 1), answer)
    assert ask(llm_server, tricky).endswith("[1]")

    assert llm_server.count("judge") == 2 and llm_server.count("judge-batch") == 1
    llm_server.reset()
    assert llm_server.requests == [] and llm_server.count("judge") == 0


def test_refused_connection_is_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    settings = LLMSettings(
        base_url=f"http://127.0.0.1:{port}/v1", api_key_env=NO_KEY_ENV, max_retries=3
    )
    caplog.set_level("WARNING", logger="deepsearcher")
    with pytest.raises(LLMUnavailableError) as err:
        asyncio.run(OpenAIChatModel(settings, backoff_base_s=0.01).complete(HELLO))
    assert err.value.message == (
        f"cannot connect to the LLM at http://127.0.0.1:{port}/v1 (Connection refused)"
    )
    assert "DEEPSEARCHER_LLM__BASE_URL" in err.value.hint
    assert "retry" not in caplog.text  # the first refusal ends the call
