"""Conditions on conditional edges: a Python predicate, or a small safe expression language.

The language (used in YAML workflows) is parsed with :mod:`ast` and evaluated by walking the
tree; nothing reaches ``eval``. It allows:

* fields of the state: ``answer``, ``input``, ``status``, ``steps``, ``active_agent``,
  ``score`` (the latest reward's score), ``feedback``, ``last`` (the last message's text),
  ``context.X`` and ``outputs.X`` (dotted lookups into those dicts; missing keys are ``None``);
* constants (numbers, strings, ``true``/``false``/``none`` in any case);
* comparisons ``== != < <= > >= in not in``, ``and``, ``or``, ``not``, parentheses;
* the functions ``len(x)``, ``lower(x)`` and ``number(x)``.

Example: ``score >= 0.8 and "approved" in lower(context.review)``.

An expression is at most :data:`MAX_CHARS` characters and :data:`MAX_DEPTH` levels deep, and
no name or attribute may start with ``_``; anything else is a :class:`DefinitionError` when the
condition is compiled. A condition that fails on a state at run time (``-score`` before any
score exists, ``-answer`` on text, a predicate that raises) raises a :class:`DefinitionError`
naming the edge, the condition and the fix: the run stops there, the error is recorded, and
``resume`` continues from that step once the workflow is fixed.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import DefinitionError

__all__ = ["Condition", "compile_condition", "state_view", "FIELDS", "MAX_CHARS", "MAX_DEPTH"]

MAX_CHARS = 2000
"""Longest condition expression accepted."""
MAX_DEPTH = 40
"""Deepest nesting of a condition expression (operators, calls, parentheses)."""

FIELDS = (
    "answer",
    "input",
    "status",
    "steps",
    "active_agent",
    "score",
    "feedback",
    "last",
    "context",
    "outputs",
)
"""Names a condition may read."""

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: b is not None and a in b,
    ast.NotIn: lambda a, b: b is None or a not in b,
}


def _number(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "len": lambda x: len(x) if x is not None else 0,
    "lower": lambda x: str(x).lower() if x is not None else "",
    "number": _number,
}
_CONSTANTS = {"true": True, "false": False, "none": None, "null": None}


def state_view(state: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a condition can read, computed from a ``SwarmState``."""
    rewards = state.get("rewards") or []
    messages = state.get("messages") or []
    return {
        "answer": state.get("answer"),
        "input": state.get("input"),
        "status": state.get("status"),
        "steps": state.get("steps", 0),
        "active_agent": state.get("active_agent"),
        "score": rewards[-1].get("score") if rewards else None,
        "feedback": rewards[-1].get("feedback") if rewards else None,
        "last": messages[-1].get("content") if messages else None,
        "context": dict(state.get("context") or {}),
        "outputs": dict(state.get("outputs") or {}),
    }


def _depth(tree: ast.AST) -> int:
    """How deep ``tree`` nests (iteratively: a deep tree must not exhaust the stack here)."""
    deepest = 0
    todo = [(tree, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            break
        todo.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _parse(text: str) -> ast.Expression:
    """Parse ``text``, bounding its size and depth; raise ValueError when it is too big."""
    if len(text) > MAX_CHARS:
        raise ValueError(
            f"is {len(text)} characters long (at most {MAX_CHARS}); split it into simpler "
            "edges or move the logic into a predicate package.module:function"
        )
    try:
        tree = ast.parse(text, mode="eval")
    except (RecursionError, MemoryError):  # the parser recurses on nesting
        raise ValueError(f"nests too deeply (at most {MAX_DEPTH} levels)") from None
    if _depth(tree) > MAX_DEPTH:
        raise ValueError(f"nests too deeply (at most {MAX_DEPTH} levels)")
    return tree


def _check(node: ast.AST, text: str) -> None:
    """Raise ValueError for anything outside the language."""
    allowed = (
        ast.Expression,
        ast.BoolOp,
        ast.And,
        ast.Or,
        ast.UnaryOp,
        ast.Not,
        ast.USub,
        ast.Compare,
        ast.Name,
        ast.Load,
        ast.Attribute,
        ast.Constant,
        ast.Call,
        ast.List,
        ast.Tuple,
        *_COMPARE,
    )
    for child in ast.walk(node):
        if not isinstance(child, allowed):
            raise ValueError(f"{type(child).__name__} is not allowed")
        name = getattr(child, "attr", None) or getattr(child, "id", None)
        if isinstance(name, str) and name.startswith("_"):
            raise ValueError(
                f"name {name!r} is not allowed (names starting with '_' are not part of the "
                "language)"
            )
        if (
            isinstance(child, ast.Name)
            and child.id not in FIELDS
            and child.id.lower() not in _CONSTANTS
            and child.id not in _FUNCTIONS
        ):
            raise ValueError(f"unknown name {child.id!r} (known: {', '.join(FIELDS)})")
        if isinstance(child, ast.Call):
            if (
                not isinstance(child.func, ast.Name)
                or child.func.id not in _FUNCTIONS
                or len(child.args) != 1
                or child.keywords
            ):
                raise ValueError(f"only {', '.join(f + '(x)' for f in _FUNCTIONS)} may be called")
        if isinstance(child, ast.Attribute) and not _is_field_path(child):
            raise ValueError("dotted names must start with context. or outputs.")
        if isinstance(child, ast.Constant) and not isinstance(
            child.value, (str, int, float, bool, type(None))
        ):
            raise ValueError(f"constant {child.value!r} is not allowed")


def _is_field_path(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in ("context", "outputs")


def _eval(node: ast.AST, view: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body, view)
    if isinstance(node, ast.BoolOp):
        values = (bool(_eval(v, view)) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, view)
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.Compare):
        left = _eval(node.left, view)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, view)
            try:
                ok = _COMPARE[type(op)](left, right)
            except TypeError:  # e.g. None >= 0.8: a missing value fails the comparison
                ok = False
            if not ok:
                return False
            left = right
        return True
    if isinstance(node, ast.Name):
        if node.id in view:
            return view[node.id]
        return _CONSTANTS[node.id.lower()]
    if isinstance(node, ast.Attribute):
        base = _eval(node.value, view)
        return base.get(node.attr) if isinstance(base, Mapping) else None
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        return _FUNCTIONS[node.func.id](_eval(node.args[0], view))
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, view) for e in node.elts]
    if isinstance(node, ast.Constant):
        return node.value
    raise AssertionError(f"unchecked node {node!r}")


@dataclass(frozen=True)
class Condition:
    """A compiled condition; call it with a state to get a bool."""

    text: str
    """The expression (or the predicate's name) – shown on the edge in topology views."""
    fn: Callable[[Mapping[str, Any]], bool]
    where: str = "condition"
    """What the condition belongs to (``edge a -> b``), named when it fails at run time."""

    def __call__(self, state: Mapping[str, Any]) -> bool:
        try:
            return bool(self.fn(state))
        except DefinitionError:
            raise
        except Exception as exc:
            raise DefinitionError(
                f"{self.where}: condition {self.text!r} failed on the run's state "
                f"({type(exc).__name__}: {str(exc)[:200]}); fix the condition (e.g. check "
                "`score != none` before using score, use number(x) for arithmetic on text), "
                "then resume the run: it continues from this step"
            ) from None


def compile_condition(
    condition: str | Callable[[Mapping[str, Any]], bool] | Condition, where: str = "condition"
) -> Condition:
    """A :class:`Condition` from an expression string or a Python predicate over the state."""
    if isinstance(condition, Condition):
        return condition
    if callable(condition):
        return Condition(
            text=getattr(condition, "__name__", "predicate"), fn=condition, where=where
        )
    if not isinstance(condition, str) or not condition.strip():
        raise DefinitionError(f"{where}: a condition must be a non-empty expression or a function")
    shown = condition if len(condition) <= 80 else condition[:77] + "..."
    try:
        tree = _parse(condition.strip())
        _check(tree, condition)
    except SyntaxError as exc:
        raise DefinitionError(
            f'{where}: cannot parse condition {shown!r}: {exc.msg}; write e.g. "score >= 0.8"'
        ) from None
    except ValueError as exc:
        raise DefinitionError(f"{where}: condition {shown!r}: {exc}") from None
    return Condition(
        text=condition.strip(),
        fn=lambda state: bool(_eval(tree, state_view(state))),
        where=where,
    )
