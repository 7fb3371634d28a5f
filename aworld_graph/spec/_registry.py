"""Python callables named in spec files: built-in names, or ``package.module:attribute`` paths.

Importing a ``module:attribute`` path runs that module's code, like loading any plugin; loading
a workflow does that. Checking one (``aworld-graph validate``, ``validate_file``) does not:
the module is found on the import path without importing it (its parent packages are not
imported either), its source is parsed, and the name must be defined at its top level. A
module that is already imported is looked at as it is. Where the source cannot tell (an
extension module, ``from x import *``, a module ``__getattr__``) the check says so as a
warning: the name is then checked only when the workflow is loaded.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from ..examples import agrees_with_tools, calculator, contains_number
from ..tools import Tool

__all__ = [
    "BUILTIN_SCORERS",
    "BUILTIN_TOOLS",
    "ImportProblem",
    "Unchecked",
    "agrees_with_tools",
    "contains_number",
    "import_ref",
    "ref_of",
]

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


class Unchecked(Exception):
    """A reference whose name cannot be checked without importing its module (a warning);
    ``stand_in`` takes its place in the checked definition."""

    def __init__(self, message: str, stand_in: Any) -> None:
        super().__init__(message)
        self.message = message
        self.stand_in = stand_in


def import_ref(ref: str, builtins: dict[str, Any], what: str, *, execute: bool = True) -> Any:
    """The object ``ref`` names: a key of ``builtins`` or ``package.module:attribute``.

    With ``execute=False`` a module that is not imported yet is not imported: the name is
    checked in its source and a stand-in callable is returned (or :class:`Unchecked` raised
    when the source cannot tell)."""
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
    if not execute and module_name not in sys.modules:
        return _check_source(ref, module_name, attr, what)
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


def _fail(message: str, fix: str) -> NoReturn:
    raise ImportProblem(message, fix)


def _stand_in(name: str) -> Any:
    def stand_in(*args: Any, **kwargs: Any) -> Any:  # never called: validation only builds
        raise AssertionError("a validation stand-in was called")

    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__doc__ = f"{name} (not imported: checked in its source)"
    return stand_in


def _module_spec(module_name: str, ref: str, what: str) -> importlib.machinery.ModuleSpec:
    """Find ``module_name`` on the import path without importing it or its parents."""
    parts = module_name.split(".")
    locations: list[str] | None = None
    spec = None
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        loaded = sys.modules.get(name)
        if loaded is not None:
            spec = loaded.__spec__
            locations = list(getattr(loaded, "__path__", []) or [])
            continue
        try:
            spec = (
                importlib.util.find_spec(name)  # a top-level name: finders only, no import
                if i == 0
                else importlib.machinery.PathFinder.find_spec(name, locations or [])
            )
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return _fail(
                f"cannot find module {name!r} for {what} {ref!r} (looked it up without "
                "importing it)",
                "check the module name and that it is importable (PYTHONPATH, installed package)",
            )
        locations = list(spec.submodule_search_locations or [])
    assert spec is not None
    return spec


def _check_source(ref: str, module_name: str, attr: str, what: str) -> Any:
    spec = _module_spec(module_name, ref, what)
    first = attr.split(".")[0]
    origin = spec.origin
    if not origin or not origin.endswith(".py"):
        raise Unchecked(
            f"{what} {ref!r}: module {module_name!r} is not Python source, so whether it "
            f"defines {first!r} is checked only when the workflow is loaded (which imports it)",
            _stand_in(first),
        )
    try:
        tree = ast.parse(Path(origin).read_bytes(), filename=origin)
    except (OSError, SyntaxError, ValueError) as exc:
        return _fail(
            f"cannot read module {module_name!r} for {what} {ref!r} ({type(exc).__name__}: {exc})",
            "fix the module so that it parses",
        )
    names, opaque = _top_level_names(tree.body)
    if first in names:
        return _stand_in(first)
    if opaque:
        raise Unchecked(
            f"{what} {ref!r}: module {module_name!r} defines names dynamically ({opaque}), so "
            f"whether it has {first!r} is checked only when the workflow is loaded",
            _stand_in(first),
        )
    return _fail(
        f"module {module_name!r} has no attribute {attr!r} (for {what} {ref!r}; "
        f"found in {origin} without running it)",
        "check the name after ':'",
    )


def _top_level_names(body: list[ast.stmt]) -> tuple[set[str], str]:
    """Names a module body binds (through if/try/with blocks), and why it may bind others."""
    names: set[str] = set()
    opaque = ""
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            if node.name == "__getattr__":
                opaque = "a module __getattr__"
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    opaque = "from ... import *"
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(node, field, []) or [])
        elif isinstance(node, ast.ExceptHandler):
            todo.extend(node.body)
    return names, opaque


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
