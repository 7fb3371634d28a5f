"""Static checks run with the suite: ruff's lint rules and ``mypy --strict`` (the strictness is
``[tool.mypy]`` in pyproject.toml) over the package. Both tools come with the ``dev`` extra."""

from __future__ import annotations

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
