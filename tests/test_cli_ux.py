"""A new user's first runs of the CLI: what it prints, and only that (issue #12, items 11-16)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepsearcher.cli import app
from deepsearcher.store import lock_holders

REPO = Path(__file__).resolve().parents[1]

# One passage longer than the 160-character excerpt, with the answer at its end.
TEST_SITE = (
    "Q: Where does Northwind run the NR-7 endurance test, and who signs off on it? "
    "The endurance test runs every robot from the assembly line for seventy-two hours "
    "with its arm loaded to the rated payload, cycling through pick, carry and place "
    "moves while the battery is drained and recharged four times. "
    "A: The test site is the Caliche Ridge proving ground outside Austin, and the "
    "quality lead Mei Tanaka signs off on every robot before it ships."
)
DOCS = {
    "testing.txt": TEST_SITE,
    "travel.md": "# Travel\n\nTravel expenses above 500 dollars need approval from the CFO.",
}


@dataclass
class Loaded:
    docs: Path
    env: dict[str, str]
    reload: subprocess.CompletedProcess[str]  # the second load of the same files


def _subprocess_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPSEARCHER_", "GRPC_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return {**env, **extra}


def _run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deepsearcher", *args],
        env=_subprocess_env(env),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    """Two documents loaded, then reloaded, by the CLI in processes of their own (Milvus Lite
    keeps a database locked by the process that opened it until that process exits)."""
    root = tmp_path_factory.mktemp("ux")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    empty_config = root / "config.yaml"
    empty_config.write_text("")
    env = {
        "DEEPSEARCHER_VECTOR_STORE__URI": str(root / "ux.db"),
        "DEEPSEARCHER_CONFIG": str(empty_config),
    }
    first = _run_cli("load", str(docs), env=env)
    assert first.returncode == 0, first.stderr
    yield Loaded(docs, env, reload=_run_cli("load", str(docs), env=env))


# -- 11 and 16: one line per skipped file, never wrapped -------------------------------------


def test_skipped_file_is_reported_once_on_one_line(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    name = "quarterly_numbers_" + "draft_" * 12 + "final.txt"  # the line is far beyond 80
    (docs / name).write_text("")
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "skip.db"), "COLUMNS": "80"}
    res = CliRunner().invoke(app, ["load", str(docs)], env=env)
    assert res.exit_code == 1  # nothing loadable
    mentions = [line for line in res.stderr.splitlines() if name in line]
    assert mentions == [f"skipped {docs / name}: empty file"], res.stderr


def test_a_load_that_loads_nothing_leaves_no_collection(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "empty.txt").write_text("")  # found, hashed and parsed, then skipped
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "none.db")}
    res = CliRunner().invoke(app, ["load", str(docs), "--collection", "ghost"], env=env)
    assert res.exit_code == 1 and "nothing could be loaded" in res.stderr
    (docs / "empty.txt").unlink()  # and with no file at all
    res = CliRunner().invoke(app, ["load", str(docs), "--collection", "ghost"], env=env)
    assert res.exit_code == 1
    listed = CliRunner().invoke(app, ["collections", "--json"], env=env)
    assert listed.exit_code == 0 and json.loads(listed.stdout) == [], listed.stdout


# -- 12: nothing from libraries at normal verbosity ------------------------------------------


_LIBRARY_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ \[|^[IWEF]\d{4} \d\d:\d\d", re.MULTILINE)


@pytest.mark.slow
def test_reload_prints_no_library_logs(loaded: Loaded) -> None:
    res = loaded.reload
    assert res.returncode == 0, res.stderr
    # pymilvus: "… [WARNING][__setup_ts_by_request]: failed to get mvccTs …" on every reload
    assert "mvccTs" not in res.stderr, res.stderr
    assert not _LIBRARY_LINE.search(res.stderr), res.stderr


@pytest.mark.slow
def test_query_prints_nothing_from_the_bm25_tokenizer(loaded: Loaded) -> None:
    # jieba (Milvus Lite's in-process BM25 analyzer) printed "Building prefix dict from the
    # default dictionary ..." and three more lines, twice, on the first search of a process.
    res = _run_cli("query", "Where is the test site?", env=loaded.env)
    assert res.returncode == 0, res.stderr
    assert "prefix dict" not in res.stderr.lower(), res.stderr
    assert "Caliche Ridge" in res.stdout


_GRPC_ERROR_LOG = """
import socket, sys
from concurrent import futures
from deepsearcher.cli.logs import setup_logging
setup_logging(int(sys.argv[1]))
import grpc
taken = socket.socket()
taken.bind(("127.0.0.1", 0))
taken.listen()
server = grpc.server(futures.ThreadPoolExecutor(1))
try:  # grpc's C core logs the failed bind to stderr itself, like chttp2's too_many_pings
    server.add_insecure_port(f"127.0.0.1:{taken.getsockname()[1]}")
except RuntimeError:
    pass
"""


@pytest.mark.parametrize(("verbose", "shown"), [(0, False), (1, False), (2, True)])
def test_grpc_core_logs_only_at_debug_verbosity(verbose: int, shown: bool) -> None:
    res = subprocess.run(
        [sys.executable, "-c", _GRPC_ERROR_LOG, str(verbose)],
        env=_subprocess_env({}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert ("Failed to add port" in res.stderr) is shown, res.stderr


# -- 13: config errors name their source -----------------------------------------------------


def test_bad_option_value_names_the_option_not_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("query:\n  top_k: 4\n")  # a file is present
    res = CliRunner().invoke(app, ["query", "anything?", "--agent", "bogus"])
    assert res.exit_code == 1
    first = res.stderr.splitlines()[0]
    # --agent is a query option (QueryOptions), refused as every front end refuses it.
    assert first == "error: invalid option agent='bogus': must be one of: deep, naive"
    assert "config.yaml" not in first


def test_misspelt_variable_is_a_warning_with_the_right_spelling() -> None:
    res = CliRunner().invoke(app, ["config"], env={"DEEPSEARCHER_QUERY_TOP_K": "5"})
    assert res.exit_code == 0
    assert (
        "warning: environment variable DEEPSEARCHER_QUERY_TOP_K matches no setting and is "
        "ignored; did you mean DEEPSEARCHER_QUERY__TOP_K?"
    ) in res.stderr
    assert "top_k: 10" in res.stdout  # ignored indeed


# -- 14: help text ----------------------------------------------------------------------------


COMMANDS = [["load"], ["query"], ["collections"], ["collections", "drop"], ["serve"]]
COMMANDS += [["config"], ["eval"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_shows_no_value_for_flags(command: list[str]) -> None:
    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0
    assert "<bool>" not in res.output
    assert not re.search(r"--verbose\s+(-v\s+)?<int>", res.output)  # -v counts, takes no value


def test_verbose_help_says_to_repeat_the_flag() -> None:
    res = CliRunner().invoke(app, ["query", "--help"], env={"COLUMNS": "100"})
    line = " ".join(res.output[res.output.index("-v, --verbose") :].split()[:12])
    assert "-vv" in line and "Repeat" in line


def test_config_help_gives_precedence_lowest_first() -> None:
    res = CliRunner().invoke(app, ["config", "--help"], env={"COLUMNS": "200"})
    about = " ".join(res.output.split("Options:")[0].split())
    layers = [about.find("defaults"), about.find("config file"), about.find("environment")]
    assert -1 not in layers and layers == sorted(layers), about


def test_readme_documents_every_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for command in ("load", "query", "collections", "serve", "eval", "config"):
        assert f"deepsearcher {command}" in readme, command


def test_verbose_query_prints_the_no_llm_note_once(loaded: Loaded) -> None:
    res = CliRunner().invoke(app, ["query", "Who approves travel expenses?", "-v"], env=loaded.env)
    assert res.exit_code == 0, res.output
    assert res.stderr.count("no LLM configured") == 1, res.stderr


# -- 15: without an LLM the passages are the answer: whole ------------------------------------


def test_retrieval_only_prints_whole_passages(loaded: Loaded) -> None:
    res = CliRunner().invoke(
        app, ["query", "Where is the NR-7 endurance test site?"], env=loaded.env
    )
    assert res.exit_code == 0, res.output
    printed = " ".join(res.stdout.split())
    assert TEST_SITE in printed  # the answer is at the end of a 440-character passage


# -- 16: the rest of the rough edges ------------------------------------------------------------


@pytest.mark.parametrize("question", ["", "   "])
def test_empty_question_is_refused(tmp_path: Path, question: str) -> None:
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "never.db")}
    res = CliRunner().invoke(app, ["query", question], env=env)
    assert res.exit_code == 1
    assert res.stderr.startswith("error: the question is empty\nhint: ")
    assert not (tmp_path / "never.db").exists()  # nothing was searched


def test_collections_json_is_what_help_says(loaded: Loaded) -> None:
    help_text = " ".join(CliRunner().invoke(app, ["collections", "--help"]).output.split())
    assert "one JSON array" in help_text
    res = CliRunner().invoke(app, ["collections", "--json"], env=loaded.env)
    listed = json.loads(res.stdout)
    assert isinstance(listed, list) and listed[0]["name"] == "deepsearcher"


@pytest.mark.slow
def test_interrupted_load_says_how_to_resume(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    # Enough text that encoding outlasts the store opening, however fast the embedder.
    for i in range(60):
        body = " ".join(f"Policy {i} clause {j} covers item {i * j}." for j in range(120))
        (docs / f"policy-{i}.txt").write_text(body, encoding="utf-8")
    db = tmp_path / "int.db"
    # Its own session, as a terminal's Ctrl-C reaches the whole foreground process group
    # (Milvus Lite's server process included).
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepsearcher", "load", str(docs)],
        env=_subprocess_env({"DEEPSEARCHER_VECTOR_STORE__URI": str(db)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # A runner started in the background (`cmd &` in a script) passes SIGINT on ignored,
        # and Python keeps it ignored: give the load the terminal's default, as a user has.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 300
        while not (db / "LOCK").exists():  # the load is under way once the store is open
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "error: load interrupted" in err and "run the same command again" in err, err
    assert "Traceback" not in err


def test_lock_holder_command_is_cut_between_arguments(tmp_path: Path) -> None:
    db = tmp_path / "held.db"
    db.mkdir()
    (db / "LOCK").write_text("")
    script = tmp_path / "hold.py"
    script.write_text(
        "import sys, time\nf = open(sys.argv[1])\nprint('ready', flush=True)\ntime.sleep(60)\n"
    )
    argv = [sys.executable, str(script), str(db / "LOCK")]
    argv += [f"--option-{i}=/some/fairly/long/path/number/{i}" for i in range(8)]
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        (described,) = [h for h in lock_holders(db) if h.startswith(f"{holder.pid} (")]
    finally:
        holder.kill()
        holder.wait()
    command = described[len(f"{holder.pid} (") : -1]
    assert command.endswith(" …") and len(command) <= 125
    shown = shlex.split(command.removesuffix(" …"))
    assert shown == argv[: len(shown)]  # whole arguments only, none cut in the middle
    assert len(shown) >= 2  # the program and its script at least


def test_pyproject_license_is_an_spdx_string() -> None:
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    # The table form makes setuptools print deprecation warnings at every install.
    assert meta["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in meta["build-system"]["requires"]
