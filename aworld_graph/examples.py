"""Ready-made agents, tools and critic scorers for the quick start and for trying things out.

``aworld-graph run aworld_graph.examples:math_agent --input "What is 17*23?"`` runs
:data:`math_agent` on the embedded local model (or the endpoint named by ``LLM_*``).
:func:`calculator` is the tool, and :func:`contains_number` and :func:`agrees_with_tools` the
scorers, that node cards name without an import path (``tools: [calculator]``,
``scorer: contains_number``).
"""

from __future__ import annotations

import re
from typing import Any

from .agent import Agent
from .state import SwarmState
from .tools import tool

__all__ = ["agrees_with_tools", "calculator", "contains_number", "math_agent"]


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as "17*23" or "(2+3)**2" and return the result."""
    from .environment.calculator import CalculatorError, calculate

    try:
        return str(calculate(expression))
    except CalculatorError as exc:
        from .errors import ModelRetry

        raise ModelRetry(f"calculator cannot evaluate {expression!r}: {exc}") from None


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


math_agent = Agent(
    name="math_agent",
    system_prompt=(
        "You are a careful math assistant. Use the calculator tool for any arithmetic, "
        "then state the final answer."
    ),
    description="Solves arithmetic questions with a calculator tool.",
    tools=[calculator],
    max_steps=4,
)
