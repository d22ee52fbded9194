"""Tolerant parsing of LLM replies, and the one format retry of complete_parsed."""

from __future__ import annotations

import asyncio
from functools import partial

import pytest

from deepsearcher.agents import prompts
from deepsearcher.agents.parsing import (
    OutputParseError,
    clean_output,
    complete_parsed,
    parse_queries,
    parse_str_list,
    parse_yes_no,
    parse_yes_no_list,
)
from deepsearcher.config import LLMSettings
from deepsearcher.errors import LLMOutputError
from deepsearcher.llm import OpenAIChatModel
from deepsearcher.types import Usage
from tests.llm_server import GARBAGE_REPLY, ScriptedLLMServer


def test_clean_output_strips_reasoning_and_fences() -> None:
    assert clean_output('<think>\nlet me see\n</think>\n\n```json\n["a"]\n```\n') == '["a"]'
    assert clean_output("reasoning only</think> YES") == "YES"
    assert clean_output("<think>cut off before the answer") == ""
    assert clean_output('```\n["unclosed"]') == '["unclosed"]'


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('["a", "b"]', ["a", "b"]),
        ('```json\n["a", "b"]\n```', ["a", "b"]),
        ("['a', 'b', \"it's\"]", ["a", "b", "it's"]),
        ("['a', 'b',]", ["a", "b"]),
        ('<think>maybe ["x"]?</think>\n["a", "b"]', ["a", "b"]),
        ('Sure! Here: ["a", "b"] hope it helps', ["a", "b"]),
        ("Here you go: ['a', 'b'].", ["a", "b"]),
        ('{"queries": ["a", "b"]}', ["a", "b"]),
        ('[{"query": "a"}, {"query": "b"}]', ["a", "b"]),
        ('Queries:\n1. a\n2) b\n- c\n* "d"', ["a", "b", "c", "d"]),
        ("first query\nsecond query", ["first query", "second query"]),
        ('["a", " A ", "", "b"]', ["a", "b"]),
        ("[]", []),
        ("Nothing is missing: []", []),
    ],
)
def test_parse_str_list_accepts_messy_forms(reply: str, expected: list[str]) -> None:
    assert parse_str_list(reply) == expected


def test_parse_str_list_caps_items() -> None:
    assert parse_str_list('["a", "b", "c"]', max_items=2) == ["a", "b"]


@pytest.mark.parametrize("reply", [GARBAGE_REPLY, "I cannot help with that.", "", "<think>hmm"])
def test_parse_str_list_rejects_non_lists(reply: str) -> None:
    with pytest.raises(OutputParseError, match="list of strings"):
        parse_str_list(reply)


@pytest.mark.parametrize(
    "reply",
    [
        "The passages already answer the question [1]",  # the reply from issue #12
        "Nothing is missing, the battery supplier is named in [2][3].",
        "See [the manual] for the rest",
        "The payload is stated.\nThe supplier is stated [1].",  # sentences are not a list
    ],
)
def test_a_bracket_in_prose_is_not_a_list(reply: str) -> None:
    with pytest.raises(OutputParseError, match="list of strings"):
        parse_str_list(reply)


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("[1]", '"1" is not a search query'),
        ('["NR-7 battery", 2]', '"2" is not a search query'),
        ('["x", "battery supplier"]', '"x" is not a search query'),
        ("Queries: [1, 2]", '"1" is not a search query'),
        ('["2023", "--"]', '"2023" is not a search query'),
    ],
)
def test_parse_queries_rejects_numbers_and_single_characters(reply: str, problem: str) -> None:
    with pytest.raises(OutputParseError, match=problem):
        parse_queries(reply)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            '["NR-7 battery supplier", "Q3 travel policy"]',
            ["NR-7 battery supplier", "Q3 travel policy"],
        ),
        ('Queries:\n["per diem 2024"]', ["per diem 2024"]),
        ("Here you go: ['C++ build flags', 'Go']", ["C++ build flags", "Go"]),
        ("[]", []),
    ],
)
def test_parse_queries_accepts_real_queries(reply: str, expected: list[str]) -> None:
    assert parse_queries(reply) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("YES", True),
        ("  no.", False),
        ("**Yes**", True),
        ("Answer: no", False),
        ("<think>yes? no?</think>\nNO", False),
        ("Yes, the passage names the owner.", True),
    ],
)
def test_parse_yes_no(reply: str, expected: bool) -> None:
    assert parse_yes_no(reply) is expected


@pytest.mark.parametrize("reply", ["maybe", "YES or NO", "", GARBAGE_REPLY])
def test_parse_yes_no_rejects_unclear_replies(reply: str) -> None:
    with pytest.raises(OutputParseError, match="YES or NO"):
        parse_yes_no(reply)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('["YES", "no", "Yes"]', [True, False, True]),
        ("```json\n['YES', 'NO']\n```", [True, False, None]),  # short: missing ones are None
        ('["YES", "NO", "YES", "NO"]', [True, False, True]),  # long: extras dropped
        ("1. YES\n2. NO\n3. YES", [True, False, True]),
        ("1. YES\n3. NO", [True, None, False]),
        ('["YES", "unsure", "NO"]', [True, None, False]),
    ],
)
def test_parse_yes_no_list(reply: str, expected: list[bool | None]) -> None:
    assert parse_yes_no_list(reply, 3) == expected


def test_parse_yes_no_list_rejects_garbage() -> None:
    with pytest.raises(OutputParseError, match="3 strings"):
        parse_yes_no_list(GARBAGE_REPLY, 3)


def _model(server: ScriptedLLMServer) -> OpenAIChatModel:
    settings = LLMSettings(base_url=server.base_url, api_key_env="DEEPSEARCHER_TEST_UNSET_KEY")
    return OpenAIChatModel(settings, backoff_base_s=0.01)


PLAN = [
    {
        "role": "user",
        "content": prompts.PLAN.format(max_steps=3, question="Who owns billing?"),
    }
]


def test_complete_parsed_retries_once_with_the_problem(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_fault("garbage")
    usage = Usage()
    result = asyncio.run(complete_parsed(_model(llm_server), PLAN, parse_str_list, usage=usage))

    assert result == ["Who owns billing?"]
    assert usage.llm_calls == 2 and usage.prompt_tokens > 0
    retry = llm_server.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": GARBAGE_REPLY}
    assert retry[-1]["content"].startswith("Your previous reply could not be used: expected a JSON")


def test_complete_parsed_gives_up_after_two_bad_replies(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_fault("garbage", times=2)
    usage = Usage()
    with pytest.raises(LLMOutputError, match="unusable format twice"):
        asyncio.run(
            complete_parsed(
                _model(llm_server), PLAN, partial(parse_str_list, max_items=2), usage=usage
            )
        )
    assert usage.llm_calls == 2 and len(llm_server.requests) == 2


@pytest.mark.parametrize(
    "reply",
    [
        "<think>Let me check passage [1] first.</think>\n\nPasswords change every 90 days [1].",
        "Answer first. <THINK>hidden</Think> More text, 3 < 5 and <b>bold</b>.",
        "a<think>x</think>b<think>y</think>c",
        "No tags, only a <thin edge",
        "<think>cut off before the answer",
    ],
)
def test_reasoning_filter_matches_clean_output_however_the_stream_is_split(reply: str) -> None:
    from deepsearcher.agents.parsing import ReasoningFilter

    for i in range(len(reply) + 1):
        for j in range(i, len(reply) + 1):
            visible = ReasoningFilter()
            parts = [visible.feed(reply[:i]), visible.feed(reply[i:j]), visible.feed(reply[j:])]
            streamed = "".join(parts) + visible.flush()
            assert streamed.strip() == clean_output(reply), (i, j, streamed)


def test_the_json_in_a_reply_is_found_in_prose_in_fences_or_whole() -> None:
    from deepsearcher.prompting import find_json, json_object

    assert json_object('{"goal": "g"}') == {"goal": "g"}
    assert json_object('Here it is:\n```json\n{"goal": "g"}\n```\nDone.') == {"goal": "g"}
    assert json_object('Sure. {"goal": "g", "scope": "s"} Anything else?') == {
        "goal": "g",
        "scope": "s",
    }
    # A list around the object is not the object asked for; the object inside it is.
    assert json_object('[{"goal": "g"}]') == {"goal": "g"}
    assert find_json('The plan: [{"title": "t"}] as asked', "[]") == [{"title": "t"}]
    with pytest.raises(OutputParseError, match="expected a JSON object"):
        json_object("no JSON here")
    with pytest.raises(OutputParseError, match="expected a JSON list"):
        find_json("no list here", "[]")


def test_a_reply_parsed_into_a_model_names_the_field_that_does_not_fit() -> None:
    import pydantic

    from deepsearcher.prompting import parse_model

    class Verdict(pydantic.BaseModel):
        status: str
        evidence: list[str] = []

    assert parse_model('{"status": "supported", "evidence": ["E1"]}', Verdict) == Verdict(
        status="supported", evidence=["E1"]
    )
    with pytest.raises(OutputParseError, match=r"^evidence\.0: "):
        parse_model('{"status": "open", "evidence": [{"id": 1}]}', Verdict)
    with pytest.raises(OutputParseError, match=r"^status: Field required"):
        parse_model('{"evidence": []}', Verdict)
