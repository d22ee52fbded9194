"""The CLI's logging: ``warning: …`` lines on stderr like its own ``error:`` lines, ``-v/-vv``
for more, and the libraries that log or print on their own kept quiet below ``-vv``."""

from __future__ import annotations

import logging
import os
import sys

# Libraries that log or print on their own; quiet below -vv (pymilvus warns about mvccTs on
# every Lite query iterator; Milvus Lite logs a traceback when its database is locked, which we
# report ourselves in one line).
_LIBRARY_LOGGERS = ("pymilvus", "milvus_lite", "jieba", "py.warnings")


class _Formatter(logging.Formatter):
    """``warning: …`` like the CLI's own ``error:`` lines; -v adds the logger name."""

    def __init__(self, with_name: bool) -> None:
        super().__init__()
        self.with_name = with_name

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        name = f" {record.name}" if self.with_name else ""
        return f"{record.levelname.lower()}{name}: {text}"


def setup_logging(verbose: int, *, opens_store: bool = True) -> logging.Handler:
    """Logging for one command run at ``verbose`` (0, 1 = -v, 2 = -vv); returns the stderr
    handler, which a command may filter."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    if verbose < 2:
        # grpc's C core logs to stderr (chttp2 "too_many_pings" GOAWAYs from the keepalive the
        # Milvus client sets) and reads these variables once, when it is first imported.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    if opens_store:
        # Both would undo the levels set below if imported later: jieba (the BM25 analyzer
        # Milvus Lite runs in-process) adds its own stderr handler and a DEBUG level and prints
        # its dictionary loading on the first search; pymilvus installs its own handler and
        # levels with dictConfig. The command imports both anyway once it opens the store.
        import jieba  # noqa: F401
        import pymilvus  # noqa: F401

    root = logging.getLogger()
    root.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(with_name=verbose > 0))
    root.addHandler(handler)
    # Other libraries inherit the root level: nothing from them below -vv.
    root.setLevel(logging.WARNING if verbose > 1 else logging.CRITICAL)
    logging.getLogger("deepsearcher").setLevel(level)
    logging.getLogger("loaders").setLevel(level)
    logging.captureWarnings(True)
    for name in _LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING if verbose > 1 else logging.CRITICAL + 1)
    return handler
