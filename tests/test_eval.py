"""`deepsearcher eval`: metric functions on hand-made cases, a full run through the CLI with the
scripted LLM, and retrieval-only recall on real embeddings."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from deepsearcher.cli.eval import eval_command
from deepsearcher.errors import ConfigError
from deepsearcher.evaluation.metrics import (
    GoldMatcher,
    all_hops_at_k,
    chunk_all_hops_at_k,
    chunk_recall_at_k,
    distinct_documents,
    exact_match,
    is_unanswerable,
    mean,
    normalize_answer,
    percentile,
    recall_at_k,
    says_not_stated,
    summarize,
    token_f1,
)
from deepsearcher.evaluation.questions import load_questions
from deepsearcher.evaluation.runner import EvalOptions, run_eval
from tests.llm_server import ScriptedLLMServer

# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------


def test_gold_matching_by_relative_path_name_and_stem() -> None:
    root = "/data/corpus"
    m = GoldMatcher(["communication/chat.md", "2023 Q1 AAPL.pdf", "00009_Al_"], root)
    assert m.key("/data/corpus/communication/chat.md") == "communication/chat.md"
    assert m.key("/data/corpus/reports/2023 Q1 AAPL.pdf") == "2023 Q1 AAPL.pdf"
    assert m.key("/data/corpus/00009_Al_.txt") == "00009_Al_"
    # Same file name in another folder is another document when gold names a path.
    assert m.key("/data/corpus/other/chat.md") == "other/chat.md"
    assert GoldMatcher(["DEV_0"], root).key("/data/corpus/DEV_0.md") == "DEV_0"


def test_recall_counts_duplicate_documents_once() -> None:
    m = GoldMatcher(["a", "b"], "/c")
    # Three chunks of a.txt, then x, then b: a takes one rank, so b is the 3rd distinct document.
    ranked = distinct_documents(["/c/a.txt", "/c/a.txt", "/c/x.txt", "/c/a.txt", "/c/b.txt"], m)
    assert ranked == ["a", "x.txt", "b"]
    assert recall_at_k(ranked, m.gold, 1) == 0.5
    assert recall_at_k(ranked, m.gold, 2) == 0.5
    assert recall_at_k(ranked, m.gold, 3) == 1.0
    assert all_hops_at_k(ranked, m.gold, 2) == 0.0
    assert all_hops_at_k(ranked, m.gold, 3) == 1.0
    # Duplicates in a raw ranking are collapsed by recall_at_k itself too.
    assert recall_at_k(["x", "x", "x", "a"], ["a"], 2) == 1.0


def test_chunk_recall_counts_chunks_document_recall_counts_documents() -> None:
    # A long document fills the first three chunks: a search for 2 chunks (`query --top-k 2`)
    # shows one of the two gold documents, while the top 2 distinct documents hold both.
    chunk_docs = ["a", "a", "a", "b", "x"]
    ranked = list(dict.fromkeys(chunk_docs))
    assert chunk_recall_at_k(chunk_docs, ["a", "b"], 2) == 0.5
    assert chunk_all_hops_at_k(chunk_docs, ["a", "b"], 2) == 0.0
    assert recall_at_k(ranked, ["a", "b"], 2) == 1.0
    assert chunk_recall_at_k(chunk_docs, ["a", "b"], 4) == 1.0
    assert chunk_all_hops_at_k(chunk_docs, ["a", "b"], 4) == 1.0
    assert chunk_recall_at_k(chunk_docs, [], 4) is None
    rows: list[dict[str, Any]] = [
        {"chunk_recall@2": 0.5, "doc_recall@2": 1.0},
        {"chunk_recall@2": 0.0, "doc_recall@2": 0.5},
    ]
    s = summarize(rows, [2])
    assert s["chunk_recall@2"] == 0.25 and s["doc_recall@2"] == 0.75


def _write_questions(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_gold_documents_under_common_field_names(tmp_path: Path) -> None:
    path = _write_questions(
        tmp_path,
        [
            {"id": "1", "question": "a?", "gold_docs": ["x/a.pdf", "b.md"]},
            {"id": "2", "question": "b?", "supporting_docs": "c.txt"},
            {"id": "3", "question": "c?", "gold_documents": []},  # present but empty: no gold
            {"id": "4", "question": "d?", "kind": "two_hop", "gold_doc_ids": ["d"]},
        ],
    )
    qs = load_questions(path)
    assert [q.gold for q in qs] == [["x/a.pdf", "b.md"], ["c.txt"], [], ["d"]]
    assert qs[3].type == "two_hop"  # `kind` groups the summary like `type`


def test_questions_without_a_gold_field_are_an_error_naming_the_fields(tmp_path: Path) -> None:
    path = _write_questions(
        tmp_path,
        [{"id": "1", "question": "a?", "gold_files": ["a.pdf"]}, {"id": "2", "question": "b?"}],
    )
    with pytest.raises(ConfigError) as err:
        load_questions(path)
    assert "no gold documents field in any question" in err.value.message
    assert "gold_doc_ids" in err.value.message and "gold_docs" in err.value.message
    # One answerable question without gold among others is named by line; an unanswerable
    # one may leave gold out.
    path = _write_questions(
        tmp_path,
        [
            {"id": "1", "question": "a?", "gold_doc_ids": ["a"]},
            {"id": "2", "question": "b?", "answerable": False},
            {"id": "3", "question": "c?", "gold_files": ["c"]},
        ],
    )
    with pytest.raises(ConfigError, match="question on line 3"):
        load_questions(path)
    path = _write_questions(tmp_path, [{"id": "1", "question": "a?", "gold_docs": {"a": 1}}])
    with pytest.raises(ConfigError, match="'gold_docs' is not a list of document ids"):
        load_questions(path)


def test_eval_with_unknown_gold_field_fails_instead_of_scoring_nothing(tmp_path: Path) -> None:
    corpus, _ = _write_eval_set(tmp_path)
    questions = _write_questions(
        tmp_path, [{"id": "1", "question": "Who founded the bakery?", "gold_files": ["x"]}]
    )
    res = CliRunner().invoke(
        _eval_app(),
        ["eval", str(questions), "--corpus", str(corpus), "--retrieval-only"],
        env={"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "eval.db")},
    )
    assert res.exit_code == 1, res.output
    assert "error:" in res.stderr and "looked for gold_doc_ids, gold_docs" in res.stderr
    assert "hint:" in res.stderr and res.stdout == ""


def test_recall_missing_docs_empty_ranking_and_empty_gold() -> None:
    assert recall_at_k(["x", "y"], ["a", "b"], 10) == 0.0
    assert recall_at_k([], ["a"], 5) == 0.0
    assert recall_at_k(["a"], [], 5) is None and all_hops_at_k(["a"], [], 5) is None
    # No gold is "no data", not zero: the mean leaves it out.
    assert mean([1.0, None, 0.0]) == 0.5 and mean([None]) is None


def test_ties_in_rank_order_and_best_gold_answer() -> None:
    # Equal-score hits keep the order the store returned: k cuts by position, not by score.
    assert recall_at_k(["b", "a", "c"], ["a"], 1) == 0.0
    # Several gold answers: the best-matching one counts.
    assert token_f1("Paris", ["London", "Paris"]) == 1.0
    assert exact_match("The  Paris!", ["paris"]) == 1.0
    assert exact_match("in Paris", ["paris"]) == 0.0
    assert token_f1("the big red dog [2]", ["a red dog"]) == pytest.approx(0.8)
    assert exact_match("anything", []) is None


def test_normalisation_and_chinese_character_f1() -> None:
    assert normalize_answer("The Cat, sat. [1]") == "cat sat"
    # Character-level tokens: 6 of the answer's 7 characters, no extra characters.
    assert token_f1("光荣和ω-force", ["光荣和ω-force"]) == 1.0
    assert token_f1("364公里", ["364.6公里"]) == pytest.approx(2 * 1 * (3 / 4) / (1 + 3 / 4))
    assert token_f1("锣鼓点。", ["锣鼓点"]) == 1.0
    assert exact_match("「战史演武」&「争霸演武」", ["战史演武争霸演武"]) == 1.0
    assert token_f1("大陆传统器乐", ["传统器乐"]) == pytest.approx(2 * (4 / 6) * 1 / (4 / 6 + 1))


def test_not_stated_and_answerability() -> None:
    assert says_not_stated("The documents do not state the answer.")
    assert says_not_stated("This is not mentioned in the handbook.")
    assert not says_not_stated("The answer is 42 [1].")
    assert is_unanswerable({"answerable": False}) is True
    assert is_unanswerable({"unanswerable": False}) is False
    assert is_unanswerable({"question": "q"}) is None


def test_percentiles_and_summary() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([1.0] * 19 + [21.0], 95) == pytest.approx(2.0)
    assert percentile([], 50) is None
    rows: list[dict[str, Any]] = [
        {
            "type": "bridge",
            "doc_recall@2": 1.0,
            "doc_all_hops@2": 1.0,
            "llm_calls": 4,
            "seconds": 1.0,
        },
        {
            "type": "comparison",
            "doc_recall@2": 0.5,
            "doc_all_hops@2": 0.0,
            "llm_calls": 6,
            "seconds": 3.0,
        },
        {
            "type": "comparison",
            "doc_recall@2": None,
            "doc_all_hops@2": None,
            "seconds": 2.0,
            "error": "x",
        },
    ]
    s = summarize(rows, [2])
    assert s["n"] == 3 and s["errors"] == 1
    assert s["doc_recall@2"] == 0.75 and s["doc_all_hops@2"] == 0.5 and s["llm_calls_mean"] == 5
    assert s["seconds_p50"] == 2.0
    assert "em" not in s  # no answers scored: left out, not reported as 0
    assert s["by_type"]["comparison"]["n"] == 2 and s["by_type"]["bridge"]["doc_recall@2"] == 1.0


# ---------------------------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------------------------

DOCS = {
    "zephyr_bakery.txt": "The Zephyr Bakery in Lisbon was founded by Marta Quintela in 1987. "
    "It is famous for its cardamom custard tarts.",
    "sub/marlow_town.txt": "Marta Quintela was born in the town of Marlow, which lies on the "
    "river Tamsworth. Marlow hosts a regatta each summer.",
    "quartz_observatory.txt": "The Quartz Observatory stands on Mount Vell. It opened to the "
    "public in 1911 and houses a refracting telescope.",
    "glacier_railway.txt": "The Glacier Railway climbs through seven tunnels and crosses the "
    "Fennel viaduct, the longest stone viaduct in the valley.",
    "beekeeping.txt": "Beekeepers harvest heather honey in late August. Smoke calms the bees "
    "while frames are lifted from the hive.",
    "chess_club.txt": "The Riverside chess club meets on Thursdays. Its champion plays the "
    "Sicilian defence with black.",
}

QUESTIONS = [
    {
        "id": "q1",
        "type": "single",
        "question": "Who founded the Zephyr Bakery in Lisbon?",
        "answers": ["Marta Quintela"],
        "gold_doc_ids": ["zephyr_bakery"],
    },
    {
        "id": "q2",
        "type": "bridge",
        "question": "Which river flows past the town where the Zephyr Bakery founder was born?",
        "answers": ["Tamsworth", "the river Tamsworth"],
        "gold_doc_ids": ["zephyr_bakery.txt", "sub/marlow_town.txt"],
    },
    {
        "id": "q3",
        "type": "follow-up",
        "question": "And when did it open to the public?",
        "answers": ["1911"],
        "gold_doc_ids": ["quartz_observatory"],
        "history": ["Where does the Quartz Observatory stand?"],
    },
    {
        "id": "q4",
        "type": "single",
        "question": "What is the name of the bakery's cat?",
        "answers": [],
        "gold_doc_ids": [],
        "answerable": False,
    },
]


def _write_eval_set(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "tiny" / "corpus"
    for name, text in DOCS.items():
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        (corpus / name).write_text(text, encoding="utf-8")
    questions = tmp_path / "tiny" / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n", encoding="utf-8")
    return corpus, questions


def _eval_app() -> typer.Typer:
    app = typer.Typer()
    app.command("eval")(eval_command)
    app.command("noop", hidden=True)(lambda: None)  # two commands: "eval" stays a subcommand
    return app


@pytest.mark.slow
def test_eval_both_agents_end_to_end(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    corpus, questions = _write_eval_set(tmp_path)
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "eval.db"),
        "DEEPSEARCHER_LLM__BASE_URL": llm_server.base_url,
    }
    out = tmp_path / "out"
    base = ["eval", str(questions), "--corpus", str(corpus), "--out", str(out)]
    res = CliRunner().invoke(_eval_app(), [*base, "--agent", "both", "--k", "1,2"], env=env)
    assert res.exit_code == 0, res.output
    assert "| agent |" in res.stdout and "| deep |" in res.stdout and "| naive |" in res.stdout

    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"deep", "naive"}
    for metrics in summary.values():
        assert {
            "doc_recall@1",
            "doc_recall@2",
            "doc_all_hops@2",
            "em",
            "f1",
            "llm_calls_mean",
        } <= set(metrics)
        assert {"prompt_tokens_mean", "completion_tokens_mean", "seconds_p95"} <= set(metrics)
        assert metrics["n"] == 4 and metrics["errors"] == 0
        assert metrics["not_stated"] in (0.0, 1.0)  # only q4 is marked unanswerable
        assert set(metrics["by_type"]) == {"single", "bridge", "follow-up"}
    assert summary["naive"]["doc_recall@2"] == 1.0  # every question's words name its documents
    assert summary["naive"]["llm_calls_mean"] < summary["deep"]["llm_calls_mean"]

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 8
    # The follow-up was made standalone (one rewrite call) before the agents saw it.
    followup = next(r for r in rows if r["id"] == "q3" and r["label"] == "naive")
    assert "Quartz Observatory" in followup["query"] and followup["llm_calls"] == 2
    assert llm_server.count("rewrite") == 2
    assert (out / "recall_at_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Again with several max_iter values: the corpus is unchanged (nothing re-embedded) and a
    # recall-vs-max_iter plot is drawn.
    more = ["--agent", "deep", "--max-iter", "1,2", "--limit", "2"]
    res = CliRunner().invoke(_eval_app(), [*base, *more], env=env)
    assert res.exit_code == 0, res.output
    run = json.loads((out / "run.json").read_text())
    assert run["load"]["files"] == {"new": 0, "changed": 0, "unchanged": 6, "failed": 0}
    assert set(json.loads((out / "summary.json").read_text())) == {
        "deep[max_iter=1]",
        "deep[max_iter=2]",
    }
    assert (out / "recall_vs_max_iter.png").read_bytes()[:4] == b"\x89PNG"


def test_eval_bad_options_are_one_line_errors(tmp_path: Path) -> None:
    corpus, questions = _write_eval_set(tmp_path)
    base = ["eval", str(questions), "--corpus", str(corpus)]
    res = CliRunner().invoke(_eval_app(), [*base, "--k", "2,x"])
    assert res.exit_code == 1 and "error: invalid --k" in res.stderr
    res = CliRunner().invoke(_eval_app(), [*base, "--agent", "smart"])
    assert res.exit_code == 1 and "error: unknown agent" in res.stderr
    res = CliRunner().invoke(
        _eval_app(), ["eval", str(tmp_path / "none.jsonl"), "--corpus", str(corpus)]
    )
    assert res.exit_code == 1 and "questions file not found" in res.stderr
    assert "Traceback" not in res.output


@pytest.mark.slow
def test_retrieval_only_without_llm_dense_and_hybrid(tmp_path: Path, make_searcher: Any) -> None:
    corpus, questions = _write_eval_set(tmp_path)
    stray = {"id": "q5", "question": "Who won?", "answers": ["x"], "gold_doc_ids": ["nowhere"]}
    with questions.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(stray) + "\n")
    ds = make_searcher()  # no LLM configured: the run falls back to retrieval-only
    opts = EvalOptions(questions=questions, corpus=corpus, ks=[1, 2, 5])
    result = asyncio.run(run_eval(ds, opts))
    assert result.mode == "retrieval" and result.labels == ["dense", "hybrid"]
    assert any("no LLM configured" in n for n in result.notes)
    assert any("1 gold document id(s) match no loaded file" in n for n in result.notes), (
        result.notes
    )
    assert result.collection == "eval_tiny"
    for label in ("dense", "hybrid"):
        rows = {r["id"]: r for r in result.rows if r["label"] == label}
        assert rows["q1"]["doc_recall@2"] == 1.0 and rows["q1"]["ranked_docs"][0] == "zephyr_bakery"
        assert rows["q4"]["doc_recall@2"] is None  # no gold: excluded, not zero
        # Retrieval-only searches a follow-up together with the previous user turn.
        assert rows["q3"]["query"].startswith("Where does the Quartz Observatory stand?")
        assert rows["q3"]["doc_recall@1"] == 1.0
        assert rows["q5"]["doc_recall@5"] == 0.0
        assert result.summary[label]["n"] == 5 and "llm_calls_mean" not in result.summary[label]


@pytest.mark.slow
def test_retrieval_only_reports_chunk_and_document_recall_apart(tmp_path: Path) -> None:
    corpus, questions = _write_eval_set(tmp_path)
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "eval.db")}
    base = ["eval", str(questions), "--corpus", str(corpus), "--retrieval-only", "--k", "1,3"]
    res = CliRunner().invoke(_eval_app(), [*base, "--out", str(tmp_path / "o1")], env=env)
    assert res.exit_code == 0, res.output
    header = next(line for line in res.stdout.splitlines() if line.startswith("| mode |"))
    for head in ("chunk R@1", "doc R@3", "chunk all@3", "doc all@1"):
        assert head in header
    assert "top k chunks" in res.stdout and "top k distinct documents" in res.stdout

    res = CliRunner().invoke(_eval_app(), [*base, "--json", "--out", str(tmp_path / "o2")], env=env)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # stdout holds the JSON object only
    assert set(out["metrics"]) == {"chunk_recall", "doc_recall", "chunk_all_hops", "doc_all_hops"}
    for label in ("dense", "hybrid"):
        m = out["summary"][label]
        for k in (1, 3):
            assert m[f"chunk_recall@{k}"] <= m[f"doc_recall@{k}"]
        # q2's two gold documents never fit in one chunk; the top 3 documents hold both.
        assert m["by_type"]["bridge"]["chunk_all_hops@1"] == 0.0
        assert m["by_type"]["bridge"]["doc_all_hops@3"] == 1.0
