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
        ({"top_k": 0}, "invalid option top_k=0: input should be greater than or equal to 1"),
        ({"top_k": 101}, "invalid option top_k=101: input should be less than or equal to 100"),
        ({"max_iter": 0}, "invalid option max_iter=0: input should be greater than or equal to 1"),
        ({"agent": "deeper"}, "invalid option agent='deeper': must be one of: deep, naive"),
        (
            {"rerank": "all"},
            "invalid option rerank='all': input should be 'lookup', 'llm', 'llm-batch' or 'none'",
        ),
        ({"timeout_s": 0}, "invalid option timeout_s=0: input should be greater than 0"),
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


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"max_sections": 0},
            "invalid option max_sections=0: input should be greater than or equal to 1",
        ),
        (
            {"max_llm_calls": 4},
            "invalid option max_llm_calls=4: input should be greater than or equal to 5",
        ),
        ({"timeout_s": -1.0}, "invalid option timeout_s=-1.0: input should be greater than 0"),
    ],
)
def test_research_limits_are_checked_like_the_settings(
    values: dict[str, object], message: str
) -> None:
    from deepsearcher.research.models import ResearchRequest

    with pytest.raises(InvalidOptionError) as err:
        ResearchRequest("Brief me", **values)  # type: ignore[arg-type]
    assert err.value.message == message
    assert (
        err.value.hint == f"leave {next(iter(values))} unset to use research.{next(iter(values))}"
    )
    assert ResearchRequest("Brief me", max_sections=12, max_revisions=0).max_sections == 12


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
        "error: invalid option top_k=0: input should be greater than or equal to 1",
        "hint: leave top_k unset to use query.top_k",
    ]


def test_cli_bad_rerank_lists_the_modes(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["query", "Who approves travel?", "--rerank", "x", "-c", str(_config(tmp_path))]
    )
    assert res.exit_code == 1
    assert res.stderr.splitlines() == [
        "error: invalid option rerank='x': input should be 'lookup', 'llm', 'llm-batch' or 'none'",
        "hint: leave rerank unset to use query.rerank",
    ]


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"vector_store:\n  uri: {tmp_path / 'm.db'}\n")
    return cfg
