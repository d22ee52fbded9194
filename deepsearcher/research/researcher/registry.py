"""The registry of a researcher's tools. Tool calls come natively (``Completion.tool_calls``,
from the OpenAI ``tools`` schemas of ``ToolRegistry.schemas``) or parsed from plain JSON
replies (small local models lack native tool calling): ``{"tool": "calculator", "args":
{...}}``. An unknown tool or bad arguments come back as an error result for the model to read,
never a crash."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic

from deepsearcher.errors import DeepSearcherError
from deepsearcher.llm import ToolCall, ToolSchema
from deepsearcher.prompting import OutputParseError, clean_output, parse_model

ToolFunction = Callable[[Mapping[str, Any]], Awaitable[str]]


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


STRING = {"type": "string"}
STRINGS = {"type": "array", "items": {"type": "string"}}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str  # shown to the model, with the argument names
    run: ToolFunction
    parameters: dict[str, Any] = field(default_factory=lambda: object_schema({}, []))

    def schema(self) -> ToolSchema:
        """The OpenAI function schema for native tool calls."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True)
class ToolResult:
    call: ToolCall
    output: str
    error: bool = False


class ToolRegistry:
    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def names(self) -> list[str]:
        return list(self._tools)

    def describe(self) -> str:
        return "\n".join(f"- {t.name}: {t.description}" for t in self._tools.values())

    def schemas(self) -> list[ToolSchema]:
        return [t.schema() for t in self._tools.values()]

    async def call(self, call: ToolCall) -> ToolResult:
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return ToolResult(call, f"error: unknown tool {call.name!r}; tools: {known}", True)
        if "_invalid" in call.args:
            return ToolResult(call, f"error: {call.name} takes a JSON object of arguments", True)
        try:
            return ToolResult(call, await tool.run(call.args))
        except ToolArgumentError as exc:
            return ToolResult(call, f"error: {exc}", True)
        except DeepSearcherError as exc:  # a search that failed: the model may try otherwise
            return ToolResult(call, f"error: {call.name} failed: {exc.message}", True)


class ToolArgumentError(ValueError):
    """Arguments a tool cannot use; the message goes back to the model."""


class _JsonToolCall(pydantic.BaseModel):
    """A tool call written as JSON text: ``{"tool": "<name>", "args": {...}}``."""

    tool: pydantic.StrictStr
    args: Any = None
    arguments: Any = None  # what some models call "args"


def parse_tool_call(reply: str) -> ToolCall | None:
    """The tool call in a reply (a JSON object with ``tool`` and optional ``args``), else None:
    a reply that is not a tool call is the model's final answer."""
    try:
        call = parse_model(clean_output(reply), _JsonToolCall)
    except OutputParseError:
        return None
    given = call.model_fields_set
    args = call.args if "args" in given else call.arguments if "arguments" in given else {}
    return ToolCall(call.tool, args if isinstance(args, dict) else {"_invalid": args})


def render_tool_call(call: ToolCall) -> str:
    """A call as the JSON form the prompts teach; it goes back into the conversation as the
    assistant's turn, so native and JSON calls leave the same history (and servers without
    tool support accept it)."""
    return json.dumps({"tool": call.name, "args": call.args}, ensure_ascii=False)


async def _think(args: Mapping[str, Any]) -> str:
    # A scratchpad: the thought is kept in the conversation, nothing is looked up.
    return "noted"


THINK = Tool(
    "think",
    'a scratchpad step: plan or weigh the evidence; args {"thought": "..."}',
    _think,
    object_schema({"thought": STRING}, ["thought"]),
)
