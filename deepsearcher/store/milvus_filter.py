"""A ``Filter`` as a Milvus boolean expression over the chunk rows (``source`` and the ``meta``
JSON field). Field names come only from the fixed mapping below or from names ``Filter`` has
already checked against ``[A-Za-z_][A-Za-z0-9_]*``; every value is a validated number or a
string literal escaped here, so no user text can change the expression's structure.

Source globs become ``LIKE`` patterns. ``LIKE``'s ``%`` crosses ``/`` where a glob's ``*`` does
not, so a glob whose only wildcard is a trailing ``**`` is exact in ``LIKE``; any other is pushed
down as the widest ``LIKE`` pattern that still holds every match, and ``post`` checks the glob
exactly on the hits (the store then fetches more candidates, so ``top_k`` stays full where
enough chunks match)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from deepsearcher.filters import Condition, Filter, glob_regex, is_anchored

# Chunks written before filters existed have no ``modified`` key; one that has it was written
# with every key a filter reads (modified, page, page_end, doc).
FILTER_MARKER_EXPR = 'exists meta["modified"]'


@dataclass(frozen=True)
class MilvusFilter:
    expr: str | None  # None: no condition
    post: Callable[[str], bool] | None = None  # exact source check, when LIKE is wider


def compile_filter(flt: Filter | None) -> MilvusFilter:
    if not flt:
        return MilvusFilter(None)
    parts: list[str] = []
    globs = []
    for cond in flt.conditions:
        expr, exact = _compile(cond)
        parts.append(expr)
        if not exact:
            globs.append(glob_regex(str(cond.value)))
    post = None
    if globs:

        def post(source: str) -> bool:
            return all(g.fullmatch(source) for g in globs)

    return MilvusFilter(" and ".join(f"({p})" for p in parts), post)


def string_literal(value: str) -> str:
    """A Milvus string literal: backslashes and double quotes escaped, nothing else special
    (control characters are refused when the filter is parsed)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _compile(cond: Condition) -> tuple[str, bool]:
    """The expression and whether it is exact (False: the source glob is checked after)."""
    if cond.field == "source":
        return _glob_like(str(cond.value))
    if cond.field == "type":
        assert isinstance(cond.value, tuple)
        any_of = " or ".join(f'meta["file_type"] == {string_literal(t)}' for t in cond.value)
        return (f"not ({any_of})" if cond.op == "not in" else any_of), True
    if cond.field == "modified":
        return f'meta["modified"] {cond.op} {_literal(cond.value)}', True
    if cond.field == "page":
        # A chunk may span pages: it matches when any of its pages is in range.
        key = "page_end" if cond.op in (">", ">=") else "page"
        return f'meta["{key}"] {cond.op} {_literal(cond.value)}', True
    if cond.field.startswith("meta."):
        path = f'meta["doc"]["{cond.field[len("meta.") :]}"]'  # name checked by Filter
        if cond.op == "contains":
            return f"{path} like {string_literal('%' + _like_escape(str(cond.value)) + '%')}", True
        return f"{path} {cond.op} {_literal(cond.value)}", True
    raise ValueError(f"no Milvus form for filter field {cond.field!r}")


def _literal(value: object) -> str:
    if isinstance(value, bool):
        raise ValueError("boolean filter values are not supported")
    if isinstance(value, int | float):
        return repr(value)
    return string_literal(str(value))


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _glob_like(pattern: str) -> tuple[str, bool]:
    body = pattern[:-2] if pattern.endswith("**") else pattern
    exact = "*" not in body and "?" not in body
    like: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            # "*", "**" and "**/" all widen to "%" (a "**/" may also match no directory).
            step = 3 if pattern.startswith("**/", i) else 2 if pattern.startswith("**", i) else 1
            i += step
            if not like or like[-1] != "%":
                like.append("%")
            continue
        like.append("_" if ch == "?" else _like_escape(ch))
        i += 1
    text = "".join(like)
    if is_anchored(pattern):
        return f"source like {string_literal(text)}", exact
    # Relative: the glob starts the path or follows any "/".
    anywhere = f"source like {string_literal('%/' + text)}"
    return f"source like {string_literal(text)} or {anywhere}", exact
