"""Where the CLI prints: the stdout and stderr consoles, and known errors as two lines,
``error: <what happened>`` and ``hint: <how to fix>``, with a non-zero exit code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

from deepsearcher.errors import DeepSearcherError


def err_console() -> Console:
    # soft_wrap: without a terminal rich would break lines at 80 columns, mid-path.
    return Console(stderr=True, soft_wrap=True)


def out_console() -> Console:
    return Console(soft_wrap=True)


def fail(exc: DeepSearcherError) -> typer.Exit:
    """Print ``exc`` as the error and hint lines; the caller raises the returned exit (or not,
    when the error only explains output already shown)."""
    con = err_console()
    # Escaped: messages name extras ('deepsearcher[scale]') and paths that rich would read as
    # markup tags and drop.
    con.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False, soft_wrap=True)
    con.print(f"[yellow]hint:[/] {escape(str(exc.hint))}", highlight=False, soft_wrap=True)
    return typer.Exit(1)


@contextmanager
def reported_errors(*, interrupted: DeepSearcherError | None = None) -> Iterator[None]:
    """Every command's known errors as the two lines and exit code 1, never a traceback.

    With ``interrupted``, Ctrl-C is reported the same way with the shell's SIGINT code, 130;
    without it an interrupt keeps Python's default. Anything else is a bug and keeps its
    traceback."""
    try:
        yield
    except DeepSearcherError as exc:
        raise fail(exc) from None
    except KeyboardInterrupt:
        if interrupted is None:
            raise
        fail(interrupted)
        raise typer.Exit(130) from None
