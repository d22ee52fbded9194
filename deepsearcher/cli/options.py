"""Options shared by the CLI commands, and how they become settings (config.yaml < env <
CLI flags)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from deepsearcher.config import Settings, load_settings

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="Config file (default: ./config.yaml).")
]
VerboseOpt = Annotated[
    int,
    typer.Option(
        "--verbose",
        "-v",
        count=True,
        show_default=False,
        help="Repeat for more: -v progress details, -vv debug (with library logs).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout only.")]
CollectionOpt = Annotated[
    str | None, typer.Option("--collection", help="Collection name (default from config).")
]


def make_settings(
    config: Path | None, options: Mapping[str, tuple[str, Any]] | None = None
) -> Settings:
    """Settings with CLI options on top: ``{"query.top_k": ("--top-k", 8)}``; a ``None`` value
    was not given. The option names go into config errors ("from option --top-k")."""
    overrides: dict[str, dict[str, Any]] = {}
    for key, (_option, value) in (options or {}).items():
        section, _, field = key.partition(".")
        overrides.setdefault(section, {})[field] = value
    names = {key: option for key, (option, _value) in (options or {}).items()}
    return load_settings(config, overrides=overrides, override_options=names)
