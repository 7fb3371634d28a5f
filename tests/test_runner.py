"""Runners: run, sync_run, run_task, step + reward, resume, streaming_run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import aworld_graph
from aworld_graph import (
    Agent,
    AgentConfig,
    ModelError,
    Runners,
    Task,
    TaskConfig,
    TaskRunMode,
    tool,
)
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call
from tests.fake_openai import FakeOpenAI, calls, status, text

runs: list[str] = []


@tool
def record(value: str) -> str:
    """Remember a value."""
    runs.append(value)
    return f"recorded {value}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    runs.clear()


def _scripted(*replies: Any) -> Agent:
    return Agent(name="worker", tools=[record], model=ScriptedModel(list(replies)))


async def test_step_runs_one_superstep_at_a_time_and_rewards_land_in_the_trajectory(
    saver: Any,
) -> None:
    task = Task(
        input="record x",
        agent=_scripted(tool_call("record", {"value": "x"}), "done"),
        conf=TaskConfig(run_mode=TaskRunMode.INTERACTIVE),
    )
    seen: list[tuple[bool, list[str]]] = []
    finished = False
    while not finished:
        finished, observation, response = await Runners.step(task, checkpointer=saver)
        seen.append((finished, sorted(k for k in observation if not k.startswith("__"))))
        response = await Runners.reward(
            task,
            score=len(seen) / 10,
            status="ok",
            feedback=f"step {len(seen)}",
            checkpointer=saver,
        )
    assert seen == [(False, ["worker"]), (False, ["worker__tools"]), (True, ["worker"])]
    assert response.answer == "done" and response.success
    # every reward given is in the trajectory the task reads back, the last one included
    given = [[r["score"] for r in item["reward"]["rewards"]] for item in response.trajectory]
    assert given == [[0.1, 0.2], [0.3]]
    scores = [item["reward"]["score"] for item in response.trajectory]
    assert scores == [0.2, 0.3]  # an item's score is the latest reward of its supersteps
    assert response.trajectory[0]["action"]["ext_info"]["feedback"] == "step 2"
    final = await Runners.resume(task.id, agent=task.agent, checkpointer=saver)
    assert final.trajectory == response.trajectory
    assert runs == ["x"]


async def test_a_reward_on_a_step_without_its_own_item_is_kept(saver: Any) -> None:
    """A function node's step has no trajectory item; its reward joins the item before it."""
    from aworld_graph import Node, Swarm

    agent = Agent(name="writer", model=ScriptedModel(["draft"]))
    tidy = Node(name="tidy", fn=lambda state: {"output": str(state.get("answer")).upper()})
    task = Task(
        input="go", swarm=Swarm(agent, tidy), conf=TaskConfig(run_mode=TaskRunMode.INTERACTIVE)
    )
    given = []
    finished = False
    while not finished:
        finished, _, _ = await Runners.step(task, checkpointer=saver)
        response = await Runners.reward(task, 0.5 + len(given) / 10, checkpointer=saver)
        given.append(0.5 + (len(given)) / 10)
    assert response.answer == "DRAFT"
    kept = [r["score"] for item in response.trajectory for r in item["reward"]["rewards"]]
    assert kept == given == [0.5, 0.6]


async def test_reward_before_any_step_is_a_clear_error(saver: Any) -> None:
    task = Task(input="x", agent=_scripted("hi"))
    with pytest.raises(aworld_graph.DefinitionError, match="no step has run yet"):
        await Runners.reward(task, 1.0, checkpointer=saver)


async def test_resume_of_a_task_that_never_ran_is_a_clear_error(saver: Any) -> None:
    agent = _scripted("never asked")
    with pytest.raises(aworld_graph.DefinitionError) as caught:
        await Runners.resume("no-such-task", agent=agent, checkpointer=saver)
    message = str(caught.value)
    assert "'no-such-task' never ran" in message and "task_id='no-such-task'" in message
    assert "Runners.run(" in message
    assert list(saver.list({"configurable": {"thread_id": "no-such-task"}})) == []
    assert agent.model.calls == []  # type: ignore[union-attr]


async def test_run_task_runs_many_concurrently_with_their_own_threads(saver: Any) -> None:
    async def slow(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        await asyncio.sleep(0.05)
        return "answer to " + messages[-1]["content"]

    agent = Agent(name="echo", model=FunctionModel(slow))
    tasks = [Task(input=f"q{i}", agent=agent) for i in range(12)]
    responses = await Runners.run_task(tasks, concurrency=4, checkpointer=saver)
    assert [responses[t.id].answer for t in tasks] == [f"answer to q{i}" for i in range(12)]
    assert {responses[t.id].thread_id for t in tasks} == {t.id for t in tasks}


async def test_run_task_rejects_duplicate_ids(saver: Any) -> None:
    agent = _scripted("a")
    with pytest.raises(aworld_graph.DefinitionError, match="share an id"):
        await Runners.run_task(
            [Task(input="a", agent=agent, id="same"), Task(input="b", agent=agent, id="same")],
            checkpointer=saver,
        )


async def test_llm_failure_is_recorded_and_resume_does_not_redo_finished_work(
    fake_openai: FakeOpenAI, saver: Any
) -> None:
    fake_openai.add(calls(("record", {"value": "once"})), status(500), status(500))
    agent = Agent(
        name="worker",
        tools=[record],
        conf=AgentConfig(llm_base_url=fake_openai.url, llm_model_name="fake-model", max_retries=1),
    )
    first = await Runners.run("record once", agent=agent, task_id="t-resume", checkpointer=saver)
    assert first.status == "error" and not first.success
    assert "HTTP 500" in (first.msg or "") and "Runners.resume('t-resume'" in (first.msg or "")
    assert first.trajectory[-1]["meta"]["kind"] == "error"
    assert runs == ["once"]
    fake_openai.add(text("recorded it"))
    second = await Runners.resume("t-resume", agent=agent, checkpointer=saver)
    assert second.success and second.answer == "recorded it"
    assert runs == ["once"]  # the tool call that completed before the failure was not redone
    assert second.llm_calls == 2


async def test_streaming_run_emits_node_llm_tool_token_and_answer_events(
    fake_openai: FakeOpenAI, saver: Any
) -> None:
    fake_openai.add(calls(("record", {"value": "s"})), text("streamed done"))
    agent = Agent(
        name="worker",
        tools=[record],
        conf=AgentConfig(llm_base_url=fake_openai.url, llm_model_name="m"),
    )
    events = [
        e
        async for e in Runners.streaming_run(
            "go", agent=agent, conf=TaskConfig(stream=True), checkpointer=saver
        )
    ]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "node_start" and kinds[-1] == "done"
    assert {"llm_call", "tool_call", "token", "answer", "node_end"} <= set(kinds)
    assert "".join(e["text"] for e in events if e["event"] == "token") == "streamed done"
    assert kinds.index("tool_call") < kinds.index("answer")
    assert events[-1]["response"].answer == "streamed done"
    assert all(r["body"].get("stream") for r in fake_openai.requests)


def test_sync_run_twice_in_one_process(fake_openai: FakeOpenAI, saver: Any) -> None:
    fake_openai.add(text("one"), text("two"))
    agent = Agent(name="a", conf=AgentConfig(llm_base_url=fake_openai.url, llm_model_name="m"))
    assert Runners.sync_run(input="1", agent=agent, checkpointer=saver).answer == "one"
    assert Runners.sync_run(input="2", agent=agent, checkpointer=saver).answer == "two"


def test_task_needs_exactly_one_of_agent_or_swarm() -> None:
    with pytest.raises(aworld_graph.DefinitionError, match="exactly one of agent= or swarm="):
        Task(input="x")


def test_public_surface_is_pinned() -> None:
    assert sorted(aworld_graph.__all__) == sorted(
        [
            "AWorldGraphError",
            "Agent",
            "AgentConfig",
            "ChatModel",
            "ConfigError",
            "Critic",
            "DefinitionError",
            "Edge",
            "GraphBuildType",
            "HandoffSwarm",
            "Human",
            "HybridSwarm",
            "ModelError",
            "ModelResponse",
            "ModelRetry",
            "Node",
            "OpenAIModel",
            "RemoteAgent",
            "RunConfig",
            "Runners",
            "RuntimeFailure",
            "Sandbox",
            "Swarm",
            "SwarmState",
            "Task",
            "TaskConfig",
            "TaskResponse",
            "TaskRunMode",
            "TeamSwarm",
            "Tool",
            "TrajectorySaver",
            "WorkflowSwarm",
            "edge",
            "load_workflow",
            "tool",
        ]
    )
    for name in aworld_graph.__all__:
        assert getattr(aworld_graph, name) is not None


def test_model_error_is_a_runtime_failure() -> None:
    assert issubclass(ModelError, aworld_graph.RuntimeFailure)


async def test_fork_from_an_earlier_checkpoint_into_a_new_thread(saver: Any) -> None:
    model = ScriptedModel([tool_call("record", {"value": "a"}), "first ending", "second ending"])
    agent = Agent(name="worker", tools=[record], model=model)
    original = await Runners.run("go", agent=agent, task_id="orig", checkpointer=saver)
    after_tools = original.trajectory[0]["meta"][
        "checkpoint_id"
    ]  # the checkpoint after the tool step
    fork_id = await Runners.fork(
        "orig",
        after_tools,
        values={"context": {"edited": True}},
        new_task_id="forked",
        agent=agent,
        checkpointer=saver,
    )
    assert fork_id == "forked"
    resumed = await Runners.resume("forked", agent=agent, checkpointer=saver)
    assert resumed.answer == "second ending" and resumed.state["context"] == {"edited": True}
    again = await Runners.resume("orig", agent=agent, checkpointer=saver)
    assert again.answer == "first ending" and runs == ["a"]


async def test_steps_continue_with_a_new_saver_object_on_the_same_file(tmp_path: Any) -> None:
    from aworld_graph.checkpoint import TrajectorySaver

    db = str(tmp_path / "steps.db")
    agent = _scripted(tool_call("record", {"value": "p"}), "done")
    task = Task(
        input="x", agent=agent, id="stepper", conf=TaskConfig(run_mode=TaskRunMode.INTERACTIVE)
    )
    finished, _, _ = await Runners.step(task, checkpointer=TrajectorySaver(db))
    assert not finished
    again = Task(
        input="x", agent=agent, id="stepper", conf=TaskConfig(run_mode=TaskRunMode.INTERACTIVE)
    )
    finished, observation, response = await Runners.step(again, checkpointer=TrajectorySaver(db))
    assert "worker__tools" in observation and runs == ["p"]


def test_every_public_name_resolves() -> None:
    """``__all__`` is the public surface: each name is there on first use (names load lazily)
    and nothing else public is."""
    assert sorted(aworld_graph.__all__) == aworld_graph.__all__
    for name in aworld_graph.__all__:
        assert getattr(aworld_graph, name) is not None, name
    assert set(aworld_graph.__all__) <= set(dir(aworld_graph))


async def test_task_config_max_steps_wins_over_the_swarm_and_must_be_positive(saver: Any) -> None:
    from aworld_graph import ConfigError, Swarm

    looping = Agent(
        name="looper",
        tools=[record],
        model=FunctionModel(lambda m, t: tool_call("record", {"value": str(len(m))})),
    )
    swarm = Swarm(looping, max_steps=30)
    response = await Runners.run(
        "go", swarm=swarm, conf=TaskConfig(max_steps=3), checkpointer=saver
    )
    assert response.status == "max_steps" and "max_steps=3" in str(response.msg)
    assert response.state["steps"] == 4  # LLM, tools, LLM, tools; the next LLM step stops
    for bad in (0, -1):
        with pytest.raises(ConfigError, match=f"got {bad}; give the most node executions"):
            TaskConfig(max_steps=bad)


class _Killed(BaseException):
    """Stands for the process dying (not an error the run could record)."""


async def test_a_run_killed_between_a_step_and_its_checkpoint_resumes_not_reads_back(
    tmp_path: Any,
) -> None:
    """The tool node's writes are committed, the step's checkpoint is not (the process died in
    between). LangGraph's snapshot then lists no ``next`` node, but the run has not ended:
    running the task again finishes it, and it cannot be scored before that."""
    from aworld_graph.checkpoint import TrajectorySaver
    from aworld_graph.errors import DefinitionError
    from aworld_graph.rewards import Score, store_score

    class DiesBeforeStep2(TrajectorySaver):
        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            if metadata.get("step") == 2:
                raise _Killed
            return super().put(config, checkpoint, metadata, new_versions)

    def task() -> Task:
        return Task(
            input="record x",
            id="t-between",
            agent=_scripted(tool_call("record", {"value": "x"}), "done"),
        )

    with DiesBeforeStep2(tmp_path / "runs.db") as dying, pytest.raises(_Killed):
        await Runners.run_task(task(), checkpointer=dying)
    assert runs == ["x"]
    with TrajectorySaver(tmp_path / "runs.db") as saver:
        with pytest.raises(DefinitionError, match="has not ended"):
            await store_score(task(), Score(score=1.0, status="pass"), checkpointer=saver)
        response = (await Runners.run_task(task(), checkpointer=saver))["t-between"]
        assert (response.status, response.answer) == ("finished", "done")
        assert runs == ["x"]  # the tool's committed result is used, not run again
