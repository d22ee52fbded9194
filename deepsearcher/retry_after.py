"""How long a server asked us to wait before retrying (``Retry-After``), shared by the LLM
and the remote embedding clients."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` (OpenAI's), else ``Retry-After`` as seconds or an HTTP
    date; None when absent or unreadable."""
    if ms := headers.get("retry-after-ms"):
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
