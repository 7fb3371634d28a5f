"""The package's modules import each other without a circle.

Every ``import`` counts – at module level, inside a function, under ``TYPE_CHECKING`` – so a
circle cannot hide behind an import moved into a function body. Parent packages a module
lives in are not counted (Python imports them first anyway; ``aworld_graph/__init__`` gathers
the public names from below).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import aworld_graph

ROOT = Path(aworld_graph.__file__).parent
PACKAGE = "aworld_graph"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name → (file, is a package)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _owner(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The module of ours that importing ``name`` loads (the longest known prefix)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> nx.DiGraph:
    modules = _modules()
    graph = nx.DiGraph()
    for name, (path, is_package) in modules.items():
        graph.add_node(name)
        here = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                # ``from pkg import mod`` loads pkg.mod; ``from mod import name`` loads mod
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            for target in targets:
                if target == PACKAGE or target.startswith(PACKAGE + "."):
                    owner = _owner(target, modules)
                    if owner is not None and owner != name:
                        graph.add_edge(name, owner)
    return graph


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert "aworld_graph.runner" in graph and "aworld_graph.checkpoint" in graph
    assert graph.has_edge("aworld_graph.runner", "aworld_graph.run")
    assert graph.has_edge("aworld_graph.run", "aworld_graph.run._graph_run")
    assert graph.has_edge("aworld_graph.swarm.compile", "aworld_graph.swarm")


def test_no_import_circle() -> None:
    circles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert circles == [], "modules that import each other (directly or around a circle): " + (
        "; ".join(" ↔ ".join(c) for c in circles)
    )


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _folder(module: str, modules: dict[str, tuple[Path, bool]]) -> str:
    """The folder (package) a module lives in; a package is its own folder."""
    return module if modules[module][1] else module.rpartition(".")[0]


def cross_room_private_imports() -> list[str]:
    """Imports of a ``_private`` module, or a ``_private`` name, that another folder owns."""
    modules = _modules()
    found: list[str] = []
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if not base.startswith(PACKAGE):
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                owner = _owner(target, modules)
                if owner is None or _folder(owner, modules) == here:
                    continue  # a room may use its own private parts
                parts = target.split(".")[1:]
                if any(_is_private(p) for p in parts) or (target == base and _is_private(alias.name)):
                    found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {base} {alias.name}")
    return found


def test_no_room_imports_another_rooms_private_parts() -> None:
    """A folder's ``_private`` modules and ``_names`` are used only inside that folder; what
    other rooms need is a public, typed seam (the run seam's ``aworld_graph.run``, the agent
    runtime's ``agent.runtime``, the store's ``checkpoint.open_store``…)."""
    found = cross_room_private_imports()
    assert found == [], "imports of another room's private parts: " + "; ".join(found)


def test_no_code_writes_another_objects_private_fields() -> None:
    """``obj._field = …`` only on ``self`` or ``cls``: another object's state changes through
    its public, typed interface."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if (
                        isinstance(sub, ast.Attribute)
                        and _is_private(sub.attr)
                        and not (isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"))
                    ):
                        found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(target)}")
    assert found == [], "assignments to another object's private fields: " + "; ".join(found)


TESTS = Path(__file__).resolve().parent
PRIVATE_IMPORT_BUDGET = 5
"""How many test files may import private parts: a room's own internals may be tested by that
room's test file where nothing public shows the behaviour; every other test uses public names,
so a redesign keeps its tests."""


def test_few_test_files_import_private_parts() -> None:
    users = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                parts = (node.module or "").split(".")[1:]
                if any(_is_private(p) for p in parts) or any(
                    _is_private(a.name) for a in node.names
                ):
                    users.append(str(path.relative_to(TESTS)))
                    break
    assert len(users) <= PRIVATE_IMPORT_BUDGET, f"test files importing private parts: {users}"
