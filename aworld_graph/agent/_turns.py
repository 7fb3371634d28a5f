"""An agent's turns and limits as its nodes read them from the state: which turn a model call
belongs to, how many LLM calls the agent made in this run, and when a step limit stops it.
Also what every node reads from its config (its superstep) and writes to the stream.

A *turn* is the run of LLM calls an agent makes until it answers: its messages carry
``_agent`` and ``_turn`` (``<agent>#<n>``); a tool message of the agent's last turn means the
turn goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from ..records import Message
from ..state import SwarmState
from . import Agent

if TYPE_CHECKING:
    from ..run.events import AgentEvent

__all__ = ["current_turn", "emit", "limit_reached", "llm_calls", "step_of"]


def step_of(config: RunnableConfig) -> int:
    """The LangGraph superstep a node runs in."""
    return int((config.get("metadata") or {}).get("langgraph_step", 0))


def _max_steps(config: RunnableConfig) -> int:
    return int((config.get("configurable") or {}).get("max_steps", 50))


def emit(event: AgentEvent) -> None:
    """Write ``event`` to the run's custom stream (nothing outside a run)."""
    try:
        get_stream_writer()(event)
    except RuntimeError:  # not inside a runnable context (direct calls in tests)
        pass


def current_turn(name: str, messages: list[Message]) -> tuple[str, bool]:
    """Agent ``name``'s current turn id, and whether it is a new turn."""
    mine = [m for m in messages if m.get("_agent") == name]
    if mine and mine[-1].get("role") == "tool":
        return str(mine[-1].get("_turn")), False
    turns = {m.get("_turn") for m in mine}
    return f"{name}#{len(turns) + 1}", True


def llm_calls(name: str, state: SwarmState) -> int:
    """Agent ``name``'s LLM calls in this run: since the thread's latest task input (a thread
    of several turns takes a new input per run)."""
    messages = state.get("messages", [])
    start = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if messages[i].get("role") == "user" and "_agent" not in messages[i]
        ),
        -1,
    )
    return sum(
        1
        for r in state.get("trace", [])
        if r.get("agent") == name
        and r.get("kind") == "llm"
        and int(r.get("n_messages", start + 1)) > start
    )


def limit_reached(agent: Agent, state: SwarmState, config: RunnableConfig) -> str | None:
    """Why ``agent`` may make no more LLM calls in this run (its own ``max_steps``, or the
    task's), or ``None``."""
    if llm_calls(agent.name, state) >= agent.max_steps:
        return f"agent {agent.name!r} made {agent.max_steps} LLM calls (its max_steps) without a final answer"
    if state.get("steps", 0) >= _max_steps(config):
        return f"the task reached max_steps={_max_steps(config)} before an answer"
    return None
