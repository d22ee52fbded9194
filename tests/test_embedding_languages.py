"""Questions in another language than the documents: the answer prompt asks for the question's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepsearcher.config import Settings
from tests.llm_server import ScriptedLLMServer, task_of


def test_answer_prompt_asks_for_the_question_language(
    tmp_path: Path, settings: Settings, llm_server: ScriptedLLMServer, make_searcher: Any
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "security.md").write_text(
        "# Security\n\nAdministrator passwords change every ninety days.", encoding="utf-8"
    )
    (docs / "canteen.txt").write_text("员工食堂每天早上八点开门。", encoding="utf-8")
    s = settings.model_copy(deep=True)
    s.llm.base_url = llm_server.base_url
    s.llm.model = "scripted"
    ds = make_searcher(s)
    ds.load([docs], "docs")
    question = "管理员密码多久更换一次？"
    for agent in ("naive", "deep"):
        llm_server.requests.clear()
        ds.query(question, agent=agent)
        prompt = next(r for r in llm_server.requests if task_of(r) == "answer")
        text = prompt["messages"][-1]["content"]
        assert question in text
        assert "in the language of the question" in text
