"""One status rule for a stored run: the runner's response, the viz reader (through the
response) and the export reader (``load_run``, no graph) agree on finished, error,
interrupted, stopped mid-step, and killed between a step's writes and its checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aworld_graph import Agent, Human, Runners, Swarm, Task, tool
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.export import load_run
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call
from aworld_graph.trajectory import checkpoint_chain, run_status
from aworld_graph.viz import load_run as load_response


@tool
def record(value: str) -> str:
    """Remember a value."""
    return f"recorded {value}"


class _Killed(BaseException):
    """Stands for the process dying."""


def _fails(messages: Any, tools: Any) -> str:
    raise RuntimeError("model down")


def _worker() -> Agent:
    return Agent(
        name="worker",
        tools=[record],
        model=ScriptedModel([tool_call("record", {"value": "x"}), "done"]),
    )


async def _stored(saver: Any, thread: str, source: Any) -> tuple[str, str]:
    run = load_run(saver, thread)
    assert run is not None
    return run.status, (await load_response(source, thread, saver)).status


async def test_finished_error_interrupted_and_mid_step_agree(tmp_path: Path) -> None:
    failing = Agent(name="w", model=FunctionModel(_fails))
    human = Swarm(Agent(name="drafter", model=ScriptedModel(["a plan"])), Human(name="ok"))
    with TrajectorySaver(tmp_path / "runs.db") as saver:
        cases = {
            "finished": (await Runners.run("x", agent=_worker(), task_id="f", checkpointer=saver)),
            "error": await Runners.run("x", agent=failing, task_id="e", checkpointer=saver),
            "interrupted": await Runners.run("x", swarm=human, task_id="i", checkpointer=saver),
        }
        _, _, cases["running"] = await Runners.step(
            Task(input="x", id="s", agent=_worker()), checkpointer=saver
        )
        sources = {"f": _worker(), "e": failing, "i": human, "s": _worker()}
        for (status, response), thread in zip(cases.items(), sources, strict=True):
            assert response.status == status
            assert await _stored(saver, thread, sources[thread]) == (status, status)


async def test_killed_between_a_steps_writes_and_its_checkpoint_has_not_ended(
    tmp_path: Path,
) -> None:
    class DiesBeforeStep2(TrajectorySaver):
        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            if metadata.get("step") == 2:
                raise _Killed
            return super().put(config, checkpoint, metadata, new_versions)

    with DiesBeforeStep2(tmp_path / "runs.db") as dying, pytest.raises(_Killed):
        await Runners.run("x", agent=_worker(), task_id="k", checkpointer=dying)
    with TrajectorySaver(tmp_path / "runs.db") as saver:
        tup = saver.get_tuple({"configurable": {"thread_id": "k", "checkpoint_ns": ""}})
        assert tup is not None and tup.pending_writes  # the tool step's results are saved
        assert await _stored(saver, "k", _worker()) == ("running", "running")


async def test_any_saver_gives_the_step_checkpoints_the_response_gives() -> None:
    saver = InMemorySaver()
    response = await Runners.run("x", agent=_worker(), task_id="m", checkpointer=saver)
    run = load_run(saver, "m")
    assert run is not None and run.status == "finished"
    assert [i["meta"]["checkpoint_id"] for i in run.trajectory()] == [
        i["meta"]["checkpoint_id"] for i in response.trajectory
    ]
    assert all(i["meta"]["checkpoint_id"] for i in run.trajectory())


def test_the_rule() -> None:
    rule = run_status
    assert rule("running", failed=False, interrupted=False, pending=False) == "finished"
    assert rule(None, failed=False, interrupted=False, pending=False) == "finished"
    assert rule("max_steps", failed=False, interrupted=False, pending=False) == "max_steps"
    assert rule("finished", failed=False, interrupted=False, pending=True) == "running"
    assert rule("finished", failed=False, interrupted=True, pending=True) == "interrupted"
    assert rule("finished", failed=True, interrupted=True, pending=True) == "error"


def test_the_chain_follows_the_branch_of_the_head() -> None:
    rows = [("a", None, -1), ("b", "a", 0), ("c", "b", 1), ("fork", "b", 1), ("d", "c", 2)]
    assert checkpoint_chain(rows, "d") == {2: "d", 1: "c", 0: "b", -1: "a"}
    assert checkpoint_chain(rows, "fork") == {1: "fork", 0: "b", -1: "a"}
    assert checkpoint_chain(rows, None) == {}
    assert checkpoint_chain([("x", None, None)], "x") == {-1: "x"}
