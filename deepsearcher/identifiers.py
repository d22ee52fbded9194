"""Identifiers a record knows someone or something by ("C-0117", "SR-10431", "B-14-03",
"EMP_2041"): letters, then digits, joined by hyphens or underscores. Read by retrieval (a
passage that states a question's identifier goes first) and by the hop checks (an identifier
answers a who-lookup only as the value of a field the lookup names)."""

from __future__ import annotations

import re

# The uppercase form a record writes; a lookup's answer must be one whole.
CODE = re.compile(r"[A-Z]{1,5}[-_]?\d[\w-]*")
# In a question, any case ("ticket sr-10431"), at least four characters with a digit after the
# letters, so "Q3" or "v2" (which many passages share) are not taken for one.
_IN_QUERY = re.compile(r"(?<![\w-])([A-Za-z]{1,5}[-_]?\d[\w-]*\w)(?![\w-])")
_MIN_CHARS = 4


def codes_in(text: str) -> list[str]:
    """The identifiers ``text`` names, folded, each once, in order."""
    found = (m.group(1).casefold() for m in _IN_QUERY.finditer(text))
    return list(dict.fromkeys(c for c in found if len(c) >= _MIN_CHARS))


def states(passage: str, code: str) -> bool:
    """Whether ``passage`` names the identifier ``code`` (folded) as a whole token."""
    pattern = rf"(?<![\w-]){re.escape(code)}(?![\w-])"
    return re.search(pattern, passage.casefold()) is not None
