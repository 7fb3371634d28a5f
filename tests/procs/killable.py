"""A workflow for the crash test: deterministic fake model, a tool that logs each execution.

With ``KILL_AT=N`` in the environment, the model writes ``$KILL_MARKER`` and hangs before
its N-th reply, so the test can SIGKILL the process at a known point.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from aworld_graph import Agent, HandoffSwarm, Swarm, TeamSwarm, tool
from aworld_graph.testing import FunctionModel, tool_call


@tool
def log_step(n: int) -> str:
    """Record that step n was executed."""
    with open(os.environ["STEP_LOG"], "a") as f:
        f.write(f"{n}\n")
    return f"step {n} logged"


def _reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    done = sum(1 for m in messages if m["role"] == "tool")
    call_no = done + 1
    if os.environ.get("KILL_AT") == str(call_no):
        Path(os.environ["KILL_MARKER"]).write_text("ready")
        time.sleep(600)
    if done < 3:
        return tool_call("log_step", {"n": done + 1}, id=f"call-{done + 1}")
    return f"logged {done} steps"


worker = Agent(name="worker", tools=[log_step], model=FunctionModel(_reply), max_steps=10)
reporter = Agent(
    name="reporter",
    model=FunctionModel(lambda m, t: "report: " + m[-1]["content"].split("[worker]\n")[-1]),
)
swarm = Swarm(worker, reporter, name="killable")


# -- one LLM turn that asks for two tool calls, in every topology ---------------------------
# With ``HANG_AT=N``, tool call N writes ``$KILL_MARKER`` and hangs before it logs, so the test
# can SIGKILL the process while call 1 has finished and call N has not.


@tool
def record(n: int) -> str:
    """Record that call n was executed."""
    if os.environ.get("HANG_AT") == str(n):
        Path(os.environ["KILL_MARKER"]).write_text("ready")
        time.sleep(600)
    with open(os.environ["STEP_LOG"], "a") as f:
        f.write(f"{n}\n")
    return f"call {n} recorded"


def _two_calls(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    done = [m["content"] for m in messages if m["role"] == "tool" and "recorded" in m["content"]]
    if not done:
        return [
            tool_call("record", {"n": 1}, id="call-1"),
            tool_call("record", {"n": 2}, id="call-2"),
        ]
    return "worker: " + ", ".join(done)


def _worker() -> Agent:
    return Agent(name="worker", tools=[record], model=FunctionModel(_two_calls))


pair = Swarm(_worker(), name="pair")
"""A workflow agent whose one turn asks for two tool calls."""

_triage = Agent(
    name="triage", model=FunctionModel(lambda m, t: tool_call("transfer_to_worker", id="t-1"))
)
_handoff_worker = _worker()
handoff = HandoffSwarm(_triage, _handoff_worker, topology=[(_triage, _handoff_worker)])
"""triage hands off to worker, which asks for the two calls."""


def _lead(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "tool":
        return "lead: " + messages[-1]["content"]
    return tool_call("ask_worker", {"request": "record two calls"}, id="ask-1")


team = TeamSwarm(
    Agent(name="lead", model=FunctionModel(_lead)), _worker(), root_agent="lead", name="team"
)
"""The leader delegates to the worker member, whose turn asks for the two calls."""

nested = Swarm(
    Swarm(_worker(), name="inner"),
    Agent(
        name="after",
        model=FunctionModel(lambda m, t: "after: " + m[-1]["content"].split("[inner]\n")[-1]),
    ),
    name="nested",
)
"""A workflow whose first node is a nested swarm holding the worker."""
