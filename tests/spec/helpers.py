"""Importable callables that test workflows name as ``tests.spec.helpers:...``."""

from __future__ import annotations

from typing import Any

from aworld_graph import tool


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def long_enough(output: str, state: Any) -> float:
    """A scorer: passes outputs of at least three words."""
    return 1.0 if len(output.split()) >= 3 else 0.0


def is_math(state: Any) -> bool:
    """A predicate: the input has a digit."""
    return any(ch.isdigit() for ch in state.get("input", ""))


def count_words(state: Any) -> dict[str, Any]:
    """A function node."""
    return {"output": len(state.get("input", "").split())}
