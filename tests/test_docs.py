"""The docs stay true to the code: the generated references match a fresh generation, the
architecture page names the layers of the import contract, and every relative link resolves."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent


def _gen_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_reference", REPO / "scripts/gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_reference", module)
    spec.loader.exec_module(module)
    return module


def test_generated_references_match_the_code() -> None:
    # As config.yaml is checked against Settings: a setting or CLI option changed without
    # `make reference` leaves these files stale.
    gen = _gen_reference()
    for path, text in gen.rendered().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(REPO)} is out of date; run `make reference`"
        )


def test_configuration_reference_lists_every_setting() -> None:
    from deepsearcher.config import Settings

    text = (REPO / "docs/reference/configuration.md").read_text(encoding="utf-8")
    for section, field in Settings.model_fields.items():
        if field.exclude:
            continue
        model = field.annotation
        assert model is not None
        for key in model.model_fields:
            assert f"| `{section}.{key}` |" in text


def test_cli_reference_lists_every_command_and_option() -> None:
    import typer
    import typer.main

    from deepsearcher.cli import app

    text = (REPO / "docs/reference/cli.md").read_text(encoding="utf-8")
    group = typer.main.get_command(app)
    ctx = typer.Context(group, info_name="deepsearcher")
    for name in group.list_commands(ctx):  # type: ignore[attr-defined]
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        assert f"## `deepsearcher {name}`" in text
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--"):
                    assert opt in text, f"{name} {opt}"


def _contract_layers() -> list[set[str]]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [
        c
        for c in pyproject["tool"]["importlinter"]["contracts"]
        if c["type"] == "layers" and "containers" not in c
    ]
    return [
        {name.strip(" ()") for name in re.split(r"[|:]", layer)} for layer in contract["layers"]
    ]


def _documented_layers() -> list[set[str]]:
    text = (REPO / "docs/architecture.md").read_text(encoding="utf-8")
    rows = text.split("| Layer (top to bottom) |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    # The first cell of each row; `\|` inside it separates siblings, not cells.
    return [set(re.findall(r"`([\w.]+)`", re.split(r"(?<!\\)\|", row)[1])) for row in rows]


def test_architecture_doc_names_the_contract_layers() -> None:
    contract, documented = _contract_layers(), _documented_layers()
    assert contract, "no layers contract in pyproject.toml"
    assert documented == contract, (
        "docs/architecture.md's layer table and pyproject.toml's contract differ: "
        f"only in the doc {set().union(*documented) - set().union(*contract)}, "
        f"only in the contract {set().union(*contract) - set().union(*documented)}"
    )


def test_every_package_module_is_in_the_contract() -> None:
    named = set().union(*_contract_layers())
    modules = {
        f"deepsearcher.{p.stem}"
        for p in (REPO / "deepsearcher").iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").exists()) and not p.name.startswith("_")
    }
    assert modules - named == set(), (
        "modules outside the layers contract: add them to [tool.importlinter] in pyproject.toml "
        "and to the layer table of docs/architecture.md"
    )


def test_architecture_doc_names_the_front_ends_contract() -> None:
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [
        c for c in pyproject["tool"]["importlinter"]["contracts"] if c["type"] == "forbidden"
    ]
    text = (REPO / "docs/architecture.md").read_text(encoding="utf-8")
    paragraph = text.split("**Front ends**", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`(deepsearcher[\w.]*)`", paragraph))
    modules = {*contract["source_modules"], *contract["forbidden_modules"]}
    assert modules <= named, f"docs/architecture.md does not name {modules - named}"


def _markdown_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "benchmarks/README.md"]
    # docs/pending-*.md are notes waiting to be folded into the guides, not published pages.
    docs = [p for p in sorted((REPO / "docs").rglob("*.md")) if not p.name.startswith("pending-")]
    return files + docs


def _slug(heading: str) -> str:
    # GitHub's anchors: lower case, punctuation dropped, spaces to hyphens.
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _outside_fences(text: str) -> str:
    kept, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", _outside_fences(path.read_text(encoding="utf-8")), re.M)
    return {_slug(h) for h in headings}


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    prose = re.sub(r"`[^`\n]*`", "", _outside_fences(doc.read_text(encoding="utf-8")))
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        missing_anchor = (
            bool(anchor) and dest.suffix == ".md" and dest.exists() and anchor not in _anchors(dest)
        )
        if not dest.exists() or missing_anchor:
            broken.append(target)
    assert broken == [], f"{doc.relative_to(REPO)}: broken links {broken}"


def test_readme_is_short_and_names_both_test_lanes() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    assert "make test " in readme and "make test-all" in readme
    assert "make demo" in readme


def test_benchmarks_readme_holds_current_figures_and_how_to_take_them() -> None:
    # Current figures only (the history is in docs/decisions/), each with a command that exists.
    text = (REPO / "benchmarks/README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    commands = text.split("## Taking the figures again", 1)[1].split("\n## ", 1)[0]
    scripts = set(re.findall(r"`(benchmarks/\w+\.py)", commands))
    assert scripts, "no commands listed under 'Taking the figures again'"
    assert [s for s in sorted(scripts) if not (REPO / s).exists()] == []


def test_where_new_code_goes_names_what_exists() -> None:
    # The guides point a newcomer at files and names: each one must still be there.
    import deepsearcher.server.service as service

    for doc in (REPO / "docs/architecture.md", REPO / "CONTRIBUTING.md"):
        text = _outside_fences(doc.read_text(encoding="utf-8"))
        paths = set(re.findall(r"`((?:deepsearcher|loaders|tests|scripts)/[\w/.]+\.py)`", text))
        server = set(re.findall(r"`server/(\w+\.py)`", text))
        missing = [p for p in sorted(paths) if not (REPO / p).exists()]
        missing += [p for p in sorted(server) if not (REPO / "deepsearcher/server" / p).exists()]
        assert missing == [], f"{doc.relative_to(REPO)} names files that do not exist: {missing}"
    text = (REPO / "docs/architecture.md").read_text(encoding="utf-8")
    route = text.split("- **A route**", 1)[1].split("\n- **", 1)[0]
    operations = re.findall(r"`(\w+)`", route.split("server/service.py`:", 1)[1].split(")", 1)[0])
    assert operations, "the route paragraph lists no SearchService operations"
    assert [o for o in operations if not hasattr(service.SearchService, o)] == []


def test_the_research_stages_named_in_the_docs_are_the_contracts_row() -> None:
    # "A research stage" names the row of stages; the research contract's second layer is it.
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [
        c
        for c in pyproject["tool"]["importlinter"]["contracts"]
        if c.get("containers") == ["deepsearcher.research"]
    ]
    row = {name.strip() for name in contract["layers"][1].split("|")}
    for doc in (REPO / "docs/architecture.md", REPO / "CONTRIBUTING.md"):
        text = doc.read_text(encoding="utf-8")
        paragraph = text.split("- **A research stage", 1)[1].split("\n- **", 1)[0]
        listed = re.search(r"\(`brief`[^()]*\)", paragraph)
        assert listed, f"{doc.relative_to(REPO)}: the row of stages is not listed"
        named = set(re.findall(r"`(\w+)`", listed.group(0)))
        assert named == row, f"{doc.relative_to(REPO)} names {named}, the contract {row}"
    modules = {p.stem for p in (REPO / "deepsearcher/research").glob("*.py")}
    assert row <= modules
