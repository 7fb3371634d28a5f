"""``TaskResponse.summary()``: the steps a run took, and for a failed run the step that failed."""

from __future__ import annotations

from typing import Any

from aworld_graph import Agent, Runners
from aworld_graph.testing import ScriptedModel, tool_call


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_an_errored_run_shows_its_failed_step_as_failed(saver: Any) -> None:
    model = ScriptedModel(
        [tool_call("add", {"a": 2, "b": 3}, id="c1"), RuntimeError("model exploded")]
    )
    response = await Runners.run(
        "2+3?", agent=Agent(name="a", tools=[add], model=model), checkpointer=saver
    )
    assert response.status == "error"
    lines = response.summary().splitlines()
    assert lines[1:3] == [
        '  step   1 a: add({"a": 2, "b": 3}) -> 5',
        "  step   3 a failed: RuntimeError('model exploded')",
    ]
    assert lines[3].startswith("  1 LLM calls, ")


async def test_a_run_that_fails_at_once_shows_no_step_that_did_not_happen(saver: Any) -> None:
    model = ScriptedModel([RuntimeError("model exploded")])
    response = await Runners.run("hi", agent=Agent(name="a", model=model), checkpointer=saver)
    lines = response.summary().splitlines()
    assert lines[1:2] == ["  step   1 a failed: RuntimeError('model exploded')"]
    assert "''" not in response.summary()
