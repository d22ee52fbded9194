"""A safe arithmetic evaluator for figures found in evidence (sums, growth rates, ratios).

A strict ``ast`` walk, never ``eval``: numbers, ``+ - * / // % **``, unary signs and
parentheses only. Names, calls, attributes, subscripts, strings and everything else are
refused, and so are exponents and results too large to be arithmetic on figures."""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable

from deepsearcher.errors import DeepSearcherError

MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 100
MAX_MAGNITUDE = 1e50
# "1,250" and "12,500,000" as documents print them: digit groups of three after the first.
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


class CalculatorError(DeepSearcherError):
    default_hint = "the calculator takes arithmetic only: numbers, + - * / // % ** and ( )"


def calculate(expression: str) -> float:
    """The value of an arithmetic expression, or CalculatorError saying what was refused."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    # Thousands separators are how figures appear in documents ("1,250"); any other comma is
    # a tuple "(1,2)" or a decimal comma "1,5", and dropping it would read 12 or 15.
    text = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), expression)
    if "," in text:
        raise CalculatorError(
            f"a comma that is not a thousands separator in {expression!r}",
            "write decimals with a point (1.5), thousands as 1,250 or 1250, one expression "
            "per call",
        )
    text = text.replace("_", "").strip()
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise CalculatorError(f"not an arithmetic expression: {expression!r}") from None
    value = _eval(tree.body)
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("the result is not a finite number")
    return value


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculatorError(f"only numbers are allowed, not {node.value!r}")
        return _bounded(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponent larger than {MAX_EXPONENT}")
        try:
            return _bounded(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("the result is too large") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    raise CalculatorError(f"not allowed in arithmetic: {type(node).__name__}")


def _bounded(value: float) -> float:
    if isinstance(value, complex) or abs(value) > MAX_MAGNITUDE:
        raise CalculatorError("the result is too large (or not a real number)")
    return value
