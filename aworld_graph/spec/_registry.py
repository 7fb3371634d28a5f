"""Python callables named in spec files: built-in names, or ``package.module:attribute`` paths.

Importing a ``module:attribute`` path runs that module's code, like loading any plugin.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..examples import calculator
from ..state import SwarmState
from ..tools import Tool

__all__ = [
    "BUILTIN_SCORERS",
    "BUILTIN_TOOLS",
    "ImportProblem",
    "agrees_with_tools",
    "contains_number",
    "import_ref",
    "ref_of",
]

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def contains_number(output: str, state: SwarmState) -> tuple[float, str]:
    """A scorer that passes answers stating a number (works even with a weak model)."""
    if _NUMBER.search(output or ""):
        return 1.0, "The answer states a number."
    return 0.0, "State the final answer as a number; use the calculator tool to compute it."


def agrees_with_tools(output: str, state: SwarmState) -> tuple[float, str]:
    """A scorer that passes answers stating the last numeric tool result (e.g. the calculator's),
    or any number when no tool returned one."""
    stated = [n.replace(",", "") for n in _NUMBER.findall(output or "")]
    if not stated:
        return contains_number(output, state)
    results = [
        value
        for m in state.get("messages") or []
        if m.get("role") == "tool" and (value := _as_number(m.get("content"))) is not None
    ]
    if not results:
        return 1.0, "The answer states a number."
    expected = results[-1]
    for text in stated:
        places = len(text.partition(".")[2])
        if abs(round(expected, places) - float(text)) < 1e-9:
            return 1.0, f"The answer states the tool's result {text}."
    return 0.0, (  # the feedback does not give the number away: echoing it must not pass
        "The answer does not state the result the calculator returned; "
        "state the calculator's result as the final answer."
    )


def _as_number(value: Any) -> float | None:
    try:
        return float(str(value).strip())
    except ValueError:
        return None


BUILTIN_TOOLS: dict[str, Tool] = {"calculator": calculator}
"""Tools a card may name without an import path."""
BUILTIN_SCORERS: dict[str, Callable[..., Any]] = {
    "agrees_with_tools": agrees_with_tools,
    "contains_number": contains_number,
}
"""Critic scorers a card may name without an import path."""


class ImportProblem(Exception):
    """A reference that cannot be resolved; the message says why and what to write instead."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


def import_ref(ref: str, builtins: dict[str, Any], what: str) -> Any:
    """The object ``ref`` names: a key of ``builtins`` or ``package.module:attribute``."""
    if ref in builtins:
        return builtins[ref]
    module_name, sep, attr = ref.partition(":")
    if not sep:
        from ._problems import did_you_mean

        return _fail(
            f"unknown {what} {ref!r}{did_you_mean(ref, builtins)}",
            f"use a built-in {what} ({', '.join(builtins) or 'none'}) or an import path "
            "package.module:function",
        )
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # the module's own errors, too: report, do not crash
        return _fail(
            f"cannot import module {module_name!r} for {what} {ref!r} ({type(exc).__name__}: {exc})",
            "check the module name and that it is importable (PYTHONPATH, installed package)",
        )
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return _fail(
                f"module {module_name!r} has no attribute {attr!r} (for {what} {ref!r})",
                "check the name after ':'",
            )
    if not callable(obj):
        return _fail(f"{what} {ref!r} is not callable", "point at a function")
    return obj


def _fail(message: str, fix: str) -> Any:
    raise ImportProblem(message, fix)


def ref_of(obj: Any, builtins: dict[str, Any], what: str, owner: str) -> str:
    """The name a spec file uses for ``obj``: its built-in name, or ``module:qualname``."""
    for name, builtin in builtins.items():
        if obj is builtin:
            return name
    fn = obj.fn if isinstance(obj, Tool) else obj
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        from ..errors import DefinitionError

        raise DefinitionError(
            f"{owner}: {what} {getattr(fn, '__name__', fn)!r} cannot be written to YAML: it is "
            f"{'a lambda or local function' if qualname and '<' in qualname else 'not importable'}; "
            "define it at module level in an importable module"
        )
    return f"{module}:{qualname}"
