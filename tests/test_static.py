"""Static checks run with the suite: ruff's lint rules and ``mypy --strict`` (the strictness is
``[tool.mypy]`` in pyproject.toml) over the package (both tools come with the ``dev`` extra),
and the design rule that only the checkpoint room opens the store."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,  # under pytest-timeout's 300 s: a hung tool fails with its command named
    )


def test_ruff_check() -> None:
    done = _run("ruff", "check", "aworld_graph", "tests")
    assert done.returncode == 0, f"ruff check found problems:\n{done.stdout}{done.stderr}"


def test_mypy_strict() -> None:
    done = _run("mypy", "aworld_graph")
    assert done.returncode == 0, f"mypy (strict) found problems:\n{done.stdout}{done.stderr}"


_DRIVERS = {"sqlite3", "psycopg", "psycopg_pool", "sqlite_utils"}


def test_only_the_checkpoint_room_opens_the_store() -> None:
    """One way to open a store, one way to write it: a module of the package outside
    ``aworld_graph/checkpoint/`` neither imports a database driver (sqlite3, psycopg,
    psycopg_pool, sqlite_utils) nor calls ``TrajectorySaver(...)``. It opens a store with
    ``checkpoint.open_store`` and reaches tables kept beside the checkpoints (the optimizer's)
    through ``TrajectorySaver.database``, on the saver's connections and locks. Naming the class
    (annotations, ``isinstance``) is fine; tests and bench scripts are not checked (a test may
    look at a file with ``sqlite3``, as a user would)."""
    package = ROOT / "aworld_graph"
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.is_relative_to(package / "checkpoint"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(name.split(".")[0] in _DRIVERS for name in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {', '.join(names)}")
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called == "TrajectorySaver":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} calls TrajectorySaver()")
    assert found == [], "open stores with aworld_graph.checkpoint.open_store:\n" + "\n".join(found)
