"""The lane lists in conftest.py name tests and fixtures that exist, and `make test` plus
`make test-slow` (what .ci/run runs) cover every test once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import conftest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def _defines(file: Path, name: str) -> bool:
    return (
        re.search(rf"^(async )?def {re.escape(name)}\(", file.read_text("utf-8"), re.M) is not None
    )


def test_slow_files_exist() -> None:
    missing = [name for name in conftest.SLOW_FILES if not (TESTS / name).exists()]
    assert missing == []


@pytest.mark.parametrize("listing", ["SLOW_TESTS", "FAST_TESTS"])
def test_listed_tests_exist(listing: str) -> None:
    missing = []
    for entry in getattr(conftest, listing):
        file, _, function = entry.partition("::")
        if not (TESTS / file).exists() or not _defines(TESTS / file, function):
            missing.append(entry)
    assert missing == [], f"{listing} names tests that no longer exist"


def test_slow_fixtures_exist() -> None:
    missing = []
    for entry in conftest.SLOW_FIXTURES:
        file, _, fixture = entry.rpartition("::")
        files = [TESTS / file] if file else sorted(TESTS.glob("*.py"))
        if not any(f.exists() and _defines(f, fixture) for f in files):
            missing.append(entry)
    assert missing == []


def test_fast_and_slow_lanes_split_the_suite_for_ci() -> None:
    makefile = (REPO / "Makefile").read_text("utf-8")
    recipe = {
        target: re.search(rf"^{target}:.*\n\t(.+)$", makefile, re.M)
        for target in ("test", "test-slow", "test-all")
    }
    assert all(recipe.values()), recipe
    assert '-m "not slow"' in recipe["test"][1] and "-m slow" in recipe["test-slow"][1]  # type: ignore[index]
    assert "-m" not in recipe["test-all"][1]  # type: ignore[index]
    ci = (REPO / ".ci/run").read_text("utf-8").splitlines()
    assert ci.index("make test") < ci.index("make test-slow")
