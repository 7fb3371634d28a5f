"""Ready-made agents for the quick start and for trying things out.

``aworld-graph run aworld_graph.examples:math_agent --input "What is 17*23?"`` runs
:data:`math_agent` on the embedded local model (or the endpoint named by ``LLM_*``).
"""

from __future__ import annotations

from .agent import Agent
from .tools import tool

__all__ = ["calculator", "math_agent"]


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as "17*23" or "(2+3)**2" and return the result."""
    from .environment._calculator import CalculatorError, calculate

    try:
        return str(calculate(expression))
    except CalculatorError as exc:
        from .errors import ModelRetry

        raise ModelRetry(f"calculator cannot evaluate {expression!r}: {exc}") from None


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
