"""A workflow for the crash test: deterministic fake model, a tool that logs each execution.

With ``KILL_AT=N`` in the environment, the model writes ``$KILL_MARKER`` and hangs before
its N-th reply, so the test can SIGKILL the process at a known point.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from aworld_graph import Agent, Swarm, tool
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
reporter = Agent(name="reporter", model=FunctionModel(lambda m, t: "report: " + m[-1]["content"].split("[worker]\n")[-1]))
swarm = Swarm(worker, reporter, name="killable")
