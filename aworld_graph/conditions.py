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
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import DefinitionError

__all__ = ["Condition", "compile_condition", "state_view", "FIELDS"]

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

    def __call__(self, state: Mapping[str, Any]) -> bool:
        return bool(self.fn(state))


def compile_condition(
    condition: str | Callable[[Mapping[str, Any]], bool] | Condition, where: str = "condition"
) -> Condition:
    """A :class:`Condition` from an expression string or a Python predicate over the state."""
    if isinstance(condition, Condition):
        return condition
    if callable(condition):
        return Condition(text=getattr(condition, "__name__", "predicate"), fn=condition)
    if not isinstance(condition, str) or not condition.strip():
        raise DefinitionError(f"{where}: a condition must be a non-empty expression or a function")
    try:
        tree = ast.parse(condition.strip(), mode="eval")
        _check(tree, condition)
    except SyntaxError as exc:
        raise DefinitionError(
            f'{where}: cannot parse condition {condition!r}: {exc.msg}; write e.g. "score >= 0.8"'
        ) from None
    except ValueError as exc:
        raise DefinitionError(f"{where}: condition {condition!r}: {exc}") from None
    return Condition(text=condition.strip(), fn=lambda state: bool(_eval(tree, state_view(state))))
