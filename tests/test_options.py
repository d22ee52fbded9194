"""QueryOptions is the one place a per-question option's value is checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepsearcher.cli import app
from deepsearcher.config import Settings
from deepsearcher.options import InvalidOptionError, QueryOptions, or_configured


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"top_k": 0}, "top_k must be from 1 to 100, not 0"),
        ({"top_k": 101}, "top_k must be from 1 to 100, not 101"),
        ({"max_iter": 0}, "max_iter must be from 1 to 10, not 0"),
        ({"agent": "deeper"}, "unknown agent 'deeper'"),
        ({"rerank": "all"}, "unknown rerank 'all'"),
        ({"timeout_s": 0}, "timeout_s must be above 0, not 0"),
    ],
)
def test_out_of_range_option_is_an_error_not_the_default(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidOptionError) as err:
        QueryOptions.from_mapping(values)
    assert err.value.message == message
    assert err.value.hint


def test_a_copy_with_a_bad_value_is_refused_too() -> None:
    with pytest.raises(InvalidOptionError):
        QueryOptions(top_k=3).with_values({"top_k": 0})


def test_the_bounds_are_the_settings_bounds() -> None:
    # The settings accept exactly what the options accept.
    assert QueryOptions(top_k=100, max_iter=10).top_k == 100
    with pytest.raises(ValueError):
        Settings.model_validate({"query": {"top_k": 101}})
    with pytest.raises(ValueError):
        Settings.model_validate({"query": {"max_iter": 11}})


def test_only_none_means_configured() -> None:
    assert or_configured(None, 10) == 10
    assert or_configured(3, 10) == 3
    assert or_configured(False, True) is False


def test_cli_bad_top_k_is_a_one_line_error_with_a_hint(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["query", "Who approves travel?", "--top-k", "0", "-c", str(_config(tmp_path))]
    )
    assert res.exit_code == 1
    assert res.stderr.splitlines() == [
        "error: top_k must be from 1 to 100, not 0",
        "hint: pass top_k from 1 to 100, or leave it unset for query.top_k",
    ]


def test_cli_bad_rerank_lists_the_modes(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["query", "Who approves travel?", "--rerank", "x", "-c", str(_config(tmp_path))]
    )
    assert res.exit_code == 1
    assert res.stderr.splitlines()[0] == "error: unknown rerank 'x'"
    assert "llm, llm-batch, none" in res.stderr.splitlines()[1]


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"vector_store:\n  uri: {tmp_path / 'm.db'}\n")
    return cfg
