"""Options shared by the CLI commands (``cli.py`` and ``cli_eval.py``, which cannot import
``cli.py`` at module level: cli.py registers it while being initialised)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
