"""Rollouts: k scored runs per task, concurrently, grouped with their reward statistics."""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Agent, DefinitionError, Task
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.export import iter_runs
from aworld_graph.rewards import exact, numeric
from aworld_graph.rollout import RolloutGroup, rollout
from aworld_graph.testing import FunctionModel


def sampler(answers: dict[str, list[str]], in_flight: list[int] | None = None) -> Agent:
    """An agent whose i-th call for a question answers ``answers[question][i]``."""
    calls: dict[str, int] = {}

    async def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        question = messages[-1]["content"]
        i = calls[question] = calls.get(question, -1) + 1
        if in_flight is not None:
            in_flight.append(1)
            await asyncio.sleep(0.01)
            in_flight.append(-1)
        return answers[question][i]

    return Agent(name="sampler", model=FunctionModel(reply))


async def test_groups_statistics_and_advantages(tmp_path: Path) -> None:
    agent = sampler({"2+3?": ["5", "6", "5", "5"], "2*3?": ["6", "6", "6", "6"]})
    tasks = [
        Task(input="2+3?", agent=agent, expected=5, id="add"),
        Task(input="2*3?", agent=agent, expected=6, id="mul"),
    ]
    groups = await rollout(
        tasks, n=4, reward_fn=numeric, checkpointer=TrajectorySaver(tmp_path / "r.db")
    )
    assert [g.task.id for g in groups] == ["add", "mul"]
    add = groups[0]
    assert [r.thread_id for r in add.runs] == ["add.r0", "add.r1", "add.r2", "add.r3"]
    assert sorted(add.scores) == [0.0, 1.0, 1.0, 1.0]
    assert add.mean == 0.75 and add.min == 0.0 and add.max == 1.0
    assert add.std == pytest.approx(statistics.pstdev(add.scores))
    assert add.advantages == pytest.approx([s - 0.75 for s in add.scores])
    assert sum(add.advantages) == pytest.approx(0.0)
    assert add.normalized_advantages() == pytest.approx(
        [a / (add.std + 1e-4) for a in add.advantages]
    )
    assert add.best.score == 1.0 and add.worst.score == 0.0
    mul = groups[1]
    assert mul.scores == [1.0] * 4 and mul.std == 0.0 and mul.advantages == [0.0] * 4
    for run in add.runs:
        item = run.response.trajectory[-1]
        assert item["reward"]["score"] == run.score
        assert item["reward"]["status"] == ("pass" if run.score == 1.0 else "fail")
    assert add.as_dict()["threads"] == ["add.r0", "add.r1", "add.r2", "add.r3"]


async def test_runs_are_checkpointed_with_their_group(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "r.db")
    agent = sampler({"q": ["a", "b"]})
    await rollout(
        Task(input="q", agent=agent, expected="a", id="t"), n=2, reward_fn=exact, checkpointer=saver
    )
    runs = {r.thread_id: r for r in iter_runs(saver)}
    assert set(runs) == {"t.r0", "t.r1"}
    assert {r.metadata["rollout_group"] for r in runs.values()} == {"t"}
    assert sorted(r.metadata["rollout_index"] for r in runs.values()) == [0, 1]
    assert sorted(r.reward for r in runs.values()) == [0.0, 1.0]  # type: ignore[type-var]
    assert {r.ground_truth for r in runs.values()} == {"a"}


async def test_runs_go_concurrently_up_to_the_limit(tmp_path: Path) -> None:
    in_flight: list[int] = []
    agent = sampler({"q": ["x"] * 6}, in_flight)
    await rollout(
        Task(input="q", agent=agent, id="c"),
        n=6,
        concurrency=3,
        checkpointer=TrajectorySaver(tmp_path / "r.db"),
    )
    running = peak = 0
    for delta in in_flight:
        running += delta
        peak = max(peak, running)
    assert 1 < peak <= 3


async def test_a_second_rollout_reads_stored_runs_back(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "r.db")
    agent = sampler({"q": ["a", "b"]})
    first = await rollout(
        Task(input="q", agent=agent, expected="a", id="t"), n=2, checkpointer=saver
    )
    again = await rollout(
        Task(input="q", agent=agent, expected="a", id="t"), n=2, checkpointer=saver
    )
    assert again[0].scores == first[0].scores
    rewards = again[0].runs[0].response.state["rewards"]
    assert len(rewards) == 1  # not scored twice


async def test_bad_arguments(tmp_path: Path) -> None:
    agent = sampler({"q": ["a"]})
    with pytest.raises(DefinitionError, match="n must be at least 1"):
        await rollout(Task(input="q", agent=agent), n=0)
    with pytest.raises(DefinitionError, match="share an id"):
        await rollout([Task(input="q", agent=agent, id="x"), Task(input="q", agent=agent, id="x")])


def test_group_shape_is_plain_data() -> None:
    group = RolloutGroup(task=Task(input="q", agent=sampler({})))
    assert group.scores == [] and group.advantages == []


async def test_a_failed_run_is_scored_but_keeps_its_error(tmp_path: Path) -> None:
    from aworld_graph import Runners
    from aworld_graph.rewards import score_response, store_score
    from aworld_graph.testing import ScriptedModel, tool_call
    from tests.export.conftest import add

    saver = TrajectorySaver(tmp_path / "r.db")
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), RuntimeError("endpoint down"), "3"])
    agent = Agent(name="s", tools=[add], model=model)
    (group,) = await rollout(
        Task(input="q", agent=agent, expected="3", id="e"), n=1, checkpointer=saver
    )
    run = group.runs[0]
    assert run.response.status == "error" and "endpoint down" in str(run.response.msg)
    assert run.score == 0.0 and run.status == "fail"
    copy = Task(input="q", agent=agent, id="e.r0")
    with pytest.raises(DefinitionError, match="has not ended"):
        await store_score(copy, score_response(None, "3"), checkpointer=saver)
    resumed = await Runners.resume("e.r0", agent=agent, checkpointer=saver)
    assert resumed.status == "finished" and resumed.answer == "3"


async def test_temperature_is_used_for_every_call_of_the_rollout_only(
    tmp_path: Path, fake_openai: Any
) -> None:
    from aworld_graph import AgentConfig, Runners

    from ..fake_openai import text

    fake_openai.default = text("5")
    conf = AgentConfig(llm_base_url=fake_openai.url, llm_model_name="m", llm_temperature=0.0)
    agent = Agent(name="sampler", conf=conf)
    saver = TrajectorySaver(tmp_path / "t.db")
    groups = await rollout(
        Task(input="2+3?", agent=agent, expected=5, id="hot"),
        n=3,
        reward_fn=numeric,
        temperature=1.1,
        checkpointer=saver,
    )
    assert groups[0].scores == [1.0, 1.0, 1.0]
    assert [r["body"]["temperature"] for r in fake_openai.requests] == [1.1, 1.1, 1.1]
    runs = {r.thread_id: r for r in iter_runs(saver)}
    assert {r.metadata["rollout_temperature"] for r in runs.values()} == {1.1}
    await Runners.run("2+3?", agent=agent, checkpointer=saver)  # outside: configured again
    assert fake_openai.requests[-1]["body"]["temperature"] == 0.0
