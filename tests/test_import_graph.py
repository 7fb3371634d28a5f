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


def test_the_run_seam_is_entered_by_its_public_face() -> None:
    """Runners, the server, the Ray workers, meta and the CLI use ``aworld_graph.run`` (its
    ``__init__`` and ``events``), never its private modules."""
    graph = import_graph()
    private = {n for n in graph if n.startswith("aworld_graph.run._")}
    assert private, "the seam keeps its internals in run/_*.py"
    reached = sorted(
        f"{src} -> {dst}"
        for src, dst in graph.edges
        if dst in private and src != "aworld_graph.run" and not src.startswith("aworld_graph.run.")
    )
    assert reached == [], "modules outside run/ import its internals: " + "; ".join(reached)
