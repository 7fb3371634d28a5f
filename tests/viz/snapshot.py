"""Text snapshots stored as files under ``tests/viz/snapshots/``.

Regenerate them with ``AWORLD_GRAPH_UPDATE_SNAPSHOTS=1 python -m pytest tests/viz``, then
review the diff.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

DIR = Path(__file__).parent / "snapshots"
ENV = "AWORLD_GRAPH_UPDATE_SNAPSHOTS"


def updating() -> bool:
    return os.environ.get(ENV, "").lower() in ("1", "true", "yes")


def check(name: str, text: str) -> None:
    """Assert ``text`` equals snapshot ``name``; with updating on, (re)write it instead."""
    path = DIR / name
    if updating():
        DIR.mkdir(exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no snapshot {path}; create it with {ENV}=1 python -m pytest tests/viz")
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(True),
                text.splitlines(True),
                f"{name} (snapshot)",
                f"{name} (now)",
            )
        )
        pytest.fail(f"{name} differs from its snapshot ({ENV}=1 to accept):\n{diff}")
