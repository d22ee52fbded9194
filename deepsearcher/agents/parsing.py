"""Tolerant, typed parsing of the agents' LLM replies: lists of strings (JSON, Python-style or
marked lines), search queries, YES/NO verdicts, and reasoning dropped from a stream.

Models write Python lists instead of JSON; we accept that form without ``eval``. Cleaning a
reply, finding its JSON and the parsed call live in ``deepsearcher.prompting`` (shared with
research) and are importable from here too.
"""

from __future__ import annotations

import json
import re
from typing import Any

from deepsearcher.agents import prompts
from deepsearcher.prompting import OutputParseError as OutputParseError
from deepsearcher.prompting import clean_output as clean_output
from deepsearcher.prompting import complete_parsed as complete_parsed
from deepsearcher.prompting import complete_parsed_full as complete_parsed_full

_MARKER = re.compile(r"^\s*(?:[-*•+]\s+|\d{1,3}[.)]\s+)")
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_PY_TOKEN = re.compile(
    r"""\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([^,'"\]]+))\s*(,|\])""", re.DOTALL
)


class ReasoningFilter:
    """Drops ``<think>...</think>`` from a stream of text deltas, as ``clean_output`` does for a
    whole reply, when a tag is split across deltas too: a tail that could be the start of a
    tag is held back until the next delta decides it. A lone ``</think>`` (templates that put
    the opening tag in the prompt) is dropped; the reasoning before it has already been sent,
    which only the whole reply can undo."""

    _OPEN = "<think>"
    _CLOSE = "</think>"

    def __init__(self) -> None:
        self._pending = ""
        self._inside = False
        self._started = False  # no visible text yet: whitespace after a block is dropped

    def feed(self, delta: str) -> str:
        """The visible part of ``delta`` (possibly empty)."""
        self._pending += delta
        out: list[str] = []
        while self._pending:
            lower = self._pending.lower()
            if self._inside:
                end = lower.find(self._CLOSE)
                if end < 0:  # reasoning: drop it, but keep what may begin the closing tag
                    keep = _partial_tag(lower, (self._CLOSE,))
                    self._pending = self._pending[len(self._pending) - keep :]
                    break
                self._pending = self._pending[end + len(self._CLOSE) :]
                self._inside = False
                continue
            start, tag = min(
                ((lower.find(t), t) for t in (self._OPEN, self._CLOSE) if t in lower),
                default=(-1, ""),
            )
            if start >= 0:
                out.append(self._pending[:start])
                self._pending = self._pending[start + len(tag) :]
                self._inside = tag == self._OPEN
                continue
            keep = _partial_tag(lower, (self._OPEN, self._CLOSE))
            out.append(self._pending[: len(self._pending) - keep])
            self._pending = self._pending[len(self._pending) - keep :]
            break
        return self._visible("".join(out))

    def flush(self) -> str:
        """What is left at the end of the stream (an unfinished block is dropped)."""
        rest = "" if self._inside else self._pending
        self._pending = ""
        return self._visible(rest)

    def _visible(self, text: str) -> str:
        if not self._started:
            text = text.lstrip()
            self._started = bool(text)
        return text


def _partial_tag(lower: str, tags: tuple[str, ...]) -> int:
    """Length of the longest end of ``lower`` that is a proper beginning of one of ``tags``."""
    return max(
        (n for tag in tags for n in range(len(tag) - 1, 0, -1) if lower.endswith(tag[:n])),
        default=0,
    )


def _snippet(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line[:80] + ("..." if len(one_line) > 80 else "")


def _python_list(text: str) -> list[str] | None:
    """Parse ``['a', "b", c]`` at the start of ``text`` without eval; None if it is not one."""
    if not text.startswith("["):
        return None
    pos, items = 1, []
    if re.match(r"\[\s*\]", text):
        return []
    while True:
        m = _PY_TOKEN.match(text, pos)
        if not m:
            return None
        quoted = m.group(1) if m.group(1) is not None else m.group(2)
        if quoted is not None:
            items.append(re.sub(r"\\(.)", r"\1", quoted))
        else:
            items.append(m.group(3))
        pos = m.end()
        if m.group(4) == "]":
            return items
        if re.match(r"\s*\]", text[pos:]):  # trailing comma
            return items


def _from_json(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):  # {"queries": [...]}: take the list it holds
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) == 1:
            return lists[0]
    return None


def _as_text(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, bool) or item is None:
        return None
    if isinstance(item, int | float):
        return str(item)
    if isinstance(item, dict):  # [{"query": "..."}]
        strings = [v for v in item.values() if isinstance(v, str)]
        return strings[0] if len(strings) == 1 else None
    return None


def _opens_a_line(text: str, pos: int) -> bool:
    """Whether the ``[`` at ``pos`` starts its line or follows a label such as "Queries:"; one
    in the middle of a sentence is prose (a citation "[1]", "see [the manual]")."""
    before = text[text.rfind("\n", 0, pos) + 1 : pos].strip()
    return not before or before.endswith(":")


def _find_list(text: str, *, in_prose: bool = True) -> list[Any] | None:
    """A list in ``text``: whole-text JSON, then each ``[`` tried as JSON or Python. With
    ``in_prose=False`` a ``[`` inside running prose is skipped."""
    try:
        found = _from_json(json.loads(text))
        if found is not None:
            return found
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\[", text):
        if not in_prose and not _opens_a_line(text, m.start()):
            continue
        try:
            value, _ = decoder.raw_decode(text, m.start())
            return list(value)
        except ValueError:
            py = _python_list(text[m.start() :])
            if py is not None:
                return py
    return None


def _line_items(text: str) -> list[str] | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    marked = [line for line in lines if _MARKER.match(line)]
    if marked:
        lines = [_MARKER.sub("", line) for line in marked]
    else:
        # Unmarked lines count only as a list of several; one line of prose is not a list,
        # and neither are sentences.
        lines = [line for line in lines if not line.endswith(":")]
        if len(lines) < 2 or any(line.endswith(".") for line in lines):
            return None
    return [line.strip().strip("\"'`").rstrip(",").strip("\"'`") for line in lines]


def parse_str_list(text: str, *, max_items: int | None = None) -> list[str]:
    """A list of distinct non-empty strings from JSON, a Python list, or marked lines."""
    cleaned = clean_output(text)
    if not cleaned:
        raise OutputParseError(
            "the reply was empty (or unfinished <think> reasoning); expected a JSON list of strings"
        )
    found = _find_list(cleaned, in_prose=False)
    raw: list[Any] | None = found if found is not None else _line_items(cleaned)
    if raw is None:
        raise OutputParseError(
            f'expected a JSON list of strings like ["a", "b"], got "{_snippet(cleaned)}"'
        )
    out: list[str] = []
    seen: set[str] = set()
    for item in raw:
        value = _as_text(item)
        value = value.strip() if value else ""
        if value and value.casefold() not in seen:
            seen.add(value.casefold())
            out.append(value)
    return out[:max_items] if max_items is not None else out


# "<the queries, as strings>", or a piece of one split at its comma.
_PLACEHOLDER = re.compile(r"^\s*<|>\s*$")


def copies_example(value: str) -> bool:
    """Whether ``value`` is a prompt's example or placeholder rather than an answer: small
    models copy the example out of the prompt."""
    return bool(_PLACEHOLDER.search(value)) or " ".join(value.casefold().split()) in (
        prompts.EXAMPLE_TEXTS
    )


def parse_queries(text: str, *, max_items: int | None = None) -> list[str]:
    """Search queries: a list of strings (see ``parse_str_list``) in which every item is a
    phrase. A number or a single character is what a citation or a numbered list leaves
    behind, and searching it matches unrelated text, so the reply is refused (and retried);
    so is a copy of the prompt's example."""
    queries = parse_str_list(text, max_items=max_items)
    for query in queries:
        if len(query) < 2 or not any(ch.isalpha() for ch in query):
            raise OutputParseError(
                f'"{_snippet(query)}" is not a search query; expected a JSON object like '
                '{"queries": [<search phrases of words>]}, or {"queries": []} when nothing is '
                "missing"
            )
        if copies_example(query):
            raise OutputParseError(
                f'"{_snippet(query)}" copies the example from the instructions; write search '
                "phrases about this question"
            )
    return queries


def _verdict(text: str) -> bool | None:
    m = _YES_NO.search(text)
    if not m:
        return None
    # "YES or NO" / "yes/no" echoes the instructions rather than answering them.
    if re.match(r"\s*(?:/|\bor\b|\|)\s*(?:yes|no)\b", text[m.end() :], re.IGNORECASE):
        return None
    return m.group(1).lower() == "yes"


def parse_yes_no(text: str) -> bool:
    """The first YES/NO word of the reply, ignoring case, markup and reasoning blocks."""
    cleaned = clean_output(text)
    verdict = _verdict(cleaned)
    if verdict is None:
        raise OutputParseError(f'expected exactly one word, YES or NO, got "{_snippet(cleaned)}"')
    return verdict


def _item_verdict(item: Any) -> bool | None:
    if isinstance(item, bool):
        return item
    return _verdict(item) if isinstance(item, str) else None


def parse_yes_no_list(text: str, count: int) -> list[bool | None]:
    """``count`` verdicts for a batch; extra ones are dropped, missing or unclear ones None."""
    cleaned = clean_output(text)
    verdicts: list[bool | None] = [None] * count
    found = _find_list(cleaned)
    if found is not None:
        for i, item in enumerate(found[:count]):
            verdicts[i] = _item_verdict(item)
    else:
        lines = [line for line in cleaned.splitlines() if _YES_NO.search(line)]
        numbered = [re.match(r"\s*(?:\W*)(\d{1,3})\s*[.):\-]", line) for line in lines]
        if lines and all(numbered):  # "1. YES": place by number, so a skipped item stays None
            for m, line in zip(numbered, lines, strict=True):
                assert m is not None
                n = int(m.group(1))
                if 1 <= n <= count:
                    verdicts[n - 1] = _verdict(line[m.end() :])
        else:
            words = [w.lower() == "yes" for w in _YES_NO.findall(cleaned)]
            verdicts[: len(words[:count])] = words[:count]
    if all(v is None for v in verdicts) and count:
        raise OutputParseError(
            f'expected a JSON list of {count} strings, "YES" or "NO", got "{_snippet(cleaned)}"'
        )
    return verdicts
