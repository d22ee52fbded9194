"""The scripted LLM server fixture; conftest.py re-exports it for every test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm_server import ScriptedLLMServer


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLMServer]:
    """A started scripted OpenAI-compatible server on 127.0.0.1; stopped after the test."""
    with ScriptedLLMServer() as server:
        yield server
