"""Command line: the only package that prints. Everything else logs or emits events.

``deepsearcher = "deepsearcher.cli:main"`` is the console script; ``python -m deepsearcher.cli``
runs the same.
"""

from deepsearcher.cli.commands import app, main

__all__ = ["app", "main"]
