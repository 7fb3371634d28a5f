"""Safe arithmetic for the bundled environment's ``calculator`` tool.

The expression is parsed with :mod:`ast` and evaluated by walking the tree: only numbers,
``+ - * / // % **``, parentheses, unary signs, a few :mod:`math` functions and the constants
``pi``, ``e`` and ``tau`` are accepted. Nothing is ever passed to ``eval``. Sizes are bounded so
that an expression like ``9**9**9`` is refused instead of eating the machine.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

__all__ = ["CalculatorError", "calculate"]

MAX_EXPRESSION_CHARS = 1_000
"""Longer expressions are refused before parsing."""
MAX_INT_BITS = 4_096
"""Integers (operands and results) may have at most this many bits (about 1,200 digits)."""
MAX_DEPTH = 64
"""Deepest nesting of operations accepted."""

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "floor": math.floor,
    "ceil": math.ceil,
    "factorial": math.factorial,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.Pow: "**",
}  # fmt: skip


class CalculatorError(ValueError):
    """The expression is not safe arithmetic, or cannot be computed; the message says why."""


def calculate(expression: str) -> Number:
    """Evaluate ``expression`` as arithmetic and return the number.

    >>> calculate("2 * (3 + 4) ** 2")
    98
    >>> calculate("sqrt(16) / 8")
    0.5
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(
            f"expression is {len(expression)} characters long; the limit is {MAX_EXPRESSION_CHARS}"
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CalculatorError(
            f"cannot parse {expression!r} as arithmetic ({type(exc).__name__}); "
            "use numbers, + - * / // % **, parentheses and functions like sqrt(x)"
        ) from None
    try:
        return _check(_eval(tree.body, 0))
    except CalculatorError:
        raise
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except (OverflowError, ValueError, TypeError) as exc:
        raise CalculatorError(f"cannot compute {expression!r}: {exc}") from None


def _check(value: Number | complex) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError(f"result has more than {MAX_INT_BITS} bits; the number is too large")
    if isinstance(value, complex):
        raise CalculatorError("result is a complex number; only real arithmetic is supported")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("result is not a finite number (overflow or NaN)")
    return value


def _eval(node: ast.expr, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise CalculatorError(f"expression nests deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculatorError(f"{node.value!r} is not a number")
        return _check(node.value)
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise CalculatorError(f"unknown name {node.id!r}; known constants: {', '.join(_CONSTANTS)}")
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, depth + 1))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _eval(node.left, depth + 1)
        right = _eval(node.right, depth + 1)
        _guard_size(type(node.op), left, right)
        return _check(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.Call):
        return _call(node, depth)
    raise CalculatorError(
        f"{type(node).__name__} is not allowed; use numbers, + - * / // % **, parentheses "
        f"and the functions {', '.join(_FUNCTIONS)}"
    )


def _guard_size(op: type[ast.operator], left: Number, right: Number) -> None:
    """Refuse integer operations whose result would be too large to compute quickly."""
    if not (isinstance(left, int) and isinstance(right, int)):
        if op is ast.Pow and abs(right) > 10_000:
            raise CalculatorError(f"exponent {right} is too large (at most 10000)")
        return
    if op is ast.Pow and right > 0 and abs(left) > 1:
        if (abs(left).bit_length() - 1) * right > MAX_INT_BITS:
            raise CalculatorError(
                f"{_SYMBOLS[op]} with exponent {right} makes a number of more than "
                f"{MAX_INT_BITS} bits; use a float (e.g. {left}.0) for an approximation"
            )
    if op is ast.Mult and left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
        raise CalculatorError(f"product has more than {MAX_INT_BITS} bits; the number is too large")


def _call(node: ast.Call, depth: int) -> Number:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
        shown = node.func.id if isinstance(node.func, ast.Name) else type(node.func).__name__
        raise CalculatorError(
            f"function {shown!r} is not available; use one of {', '.join(_FUNCTIONS)}"
        )
    if node.keywords:
        raise CalculatorError(f"{node.func.id}() takes positional arguments only")
    args = [_eval(arg, depth + 1) for arg in node.args]
    if node.func.id == "factorial" and args and isinstance(args[0], int) and args[0] > 500:
        raise CalculatorError("factorial() is limited to arguments of at most 500")
    return _FUNCTIONS[node.func.id](*args)
