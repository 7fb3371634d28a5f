"""What the Ray tests run, as module attributes: a worker rebuilds each by importing this
module (a model defined inside a test function could not travel)."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

from aworld_graph import Agent, load_workflow, tool
from aworld_graph.meta import synthetic
from aworld_graph.testing import FunctionModel, tool_call

WORKFLOWS = Path(__file__).parent / "workflows"


@tool
def report_pid() -> int:
    """The id of the process this tool runs in."""
    return os.getpid()


@tool
def square(n: int) -> int:
    """``n`` squared."""
    return n * n


@tool
def record(task: str) -> str:
    """Records that this call ran: a line with the task, this process's network namespace and
    its pid, appended to the file named by ``AWORLD_TEST_TOOL_LOG``."""
    namespace = os.readlink("/proc/self/ns/net")
    with open(os.environ["AWORLD_TEST_TOOL_LOG"], "a") as log:
        log.write(f"{task} {namespace} {os.getpid()}\n")
    return f"recorded {task} in {namespace}"


_in_flight = {"now": 0, "peak": 0}


@tool
async def overlap() -> str:
    """Holds on for a moment; names this process and the most calls it held at once."""
    _in_flight["now"] += 1
    _in_flight["peak"] = max(_in_flight["peak"], _in_flight["now"])
    try:
        await asyncio.sleep(0.3)
    finally:
        _in_flight["now"] -= 1
    return f"{os.getpid()} {_in_flight['peak']}"


def _overlap_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    last = messages[-1]
    return f"held {last['content']}" if last["role"] == "tool" else tool_call("overlap", {})


def _pid_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return f"pid {last['content']}"
    return tool_call("report_pid", {})


def _square_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return f"the square is {last['content']}"
    n = int(re.findall(r"-?\d+", str(messages[-1]["content"]))[-1])
    return tool_call("square", {"n": n})


def _guess_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """Answers ``n*n`` for even ``n`` and ``n*n+1`` for odd: half right, deterministic."""
    n = int(re.findall(r"-?\d+", str(messages[-1]["content"]))[-1])
    return str(n * n + (n % 2))


pid_flow = load_workflow(WORKFLOWS / "pid.yaml", model=FunctionModel(_pid_reply))
"""A YAML workflow whose tool reports the process it runs in."""

square_flow = load_workflow(WORKFLOWS / "square.yaml", model=FunctionModel(_square_reply))
"""A YAML workflow that squares the number of its input with a tool."""

overlapper = Agent(name="overlapper", model=FunctionModel(_overlap_reply), tools=[overlap])
"""An agent whose one tool call says how many runs its process held at once."""

guesser = Agent(name="guesser", model=FunctionModel(_guess_reply))
"""An agent that is right on even numbers only (for rewards)."""

meta_model = FunctionModel(_guess_reply, name="guess-model")
"""The model of every node of a meta-learning candidate in the tests."""

student = synthetic.student_model()
"""The synthetic benchmark's student: the model of every candidate in the optimize test."""
