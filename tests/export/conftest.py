"""A database of real runs to export: tool calls, a handoff, a critic loop, a team, a workflow
version, a failed run, a run carrying secrets, and a scored rollout group."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Agent, AgentConfig, Critic, HandoffSwarm, Runners, Swarm, Task, TeamSwarm
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.export import Run, iter_runs
from aworld_graph.rewards import numeric
from aworld_graph.rollout import RolloutGroup, rollout
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call

SECRET = "sk-live-SECRETKEY0123456789abcdef"
"""Planted in inputs, tool arguments, tool results and metadata; must never be exported."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def note(text: str) -> str:
    """Take a note."""
    return "noted"


def login(user: str, api_key: str) -> str:
    """Log in to the service."""
    return f"welcome {user}, your key {api_key} is active"


def math_agent(replies: Any) -> Agent:
    return Agent(
        name="solver",
        system_prompt="You solve arithmetic with the add tool.",
        tools=[add],
        model=replies,
    )


async def build(saver: TrajectorySaver) -> list[RolloutGroup]:
    """Run the scenarios into ``saver``; returns the rollout groups."""
    await Runners.run(
        "What is 2+3?",
        agent=math_agent(
            ScriptedModel([tool_call("add", {"a": 2, "b": 3}, id="c1"), "The answer is 5."])
        ),
        task_id="tools",
        checkpointer=saver,
    )
    triage = Agent(
        name="triage",
        system_prompt="You route requests.",
        tools=[note],
        model=ScriptedModel(
            [
                [
                    tool_call("note", {"text": "x"}, id="n1"),
                    tool_call("transfer_to_writer", {}, id="h1"),
                ],
                "Triage: all done.",
            ]
        ),
    )
    writer = Agent(
        name="writer",
        system_prompt="You write.",
        model=ScriptedModel([tool_call("transfer_to_triage", {}, id="h2")]),
    )
    await Runners.run(
        "Help me write.",
        swarm=HandoffSwarm(triage, writer, topology=[(triage, writer), (writer, triage)]),
        task_id="handoff",
        checkpointer=saver,
    )
    drafts = iter(["draft one", "the final draft"])
    drafter = Agent(
        name="drafter",
        system_prompt="You draft texts.",
        model=FunctionModel(lambda m, t: next(drafts)),
    )
    critic = Critic(
        name="critic",
        judges=drafter,
        threshold=0.8,
        scorer=lambda out, state: (1.0, "good") if "final" in out else (0.2, "more detail"),
    )
    await Runners.run(
        "Write a haiku.",
        swarm=Swarm(drafter, critic, info={"workflow_version": 3}),  # as the YAML loader sets it
        task_id="critic",
        checkpointer=saver,
    )
    leader = Agent(
        name="leader",
        system_prompt="You lead.",
        model=ScriptedModel(
            [
                tool_call("ask_researcher", {"request": "find facts"}, id="d1"),
                "Report: facts found.",
            ]
        ),
    )
    researcher = Agent(
        name="researcher",
        system_prompt="You research.",
        model=FunctionModel(lambda m, t: "the facts"),
    )
    await Runners.run(
        "Write a report.", swarm=TeamSwarm(leader, researcher), task_id="team", checkpointer=saver
    )
    looping = Agent(
        name="looper",
        system_prompt="You loop.",
        tools=[add],
        max_steps=2,
        model=FunctionModel(lambda m, t: tool_call("add", {"a": 1, "b": 1})),
    )
    await Runners.run_task(
        Task(
            input="Loop forever.", agent=looping, id="failed", metadata={"workflow_version": "v1"}
        ),
        checkpointer=saver,
    )
    secretive = Agent(
        name="secretive",
        system_prompt="You log in.",
        tools=[login],
        conf=AgentConfig(llm_api_key=SECRET),
        model=ScriptedModel(
            [tool_call("login", {"user": "ada", "api_key": SECRET}, id="s1"), "Logged in."]
        ),
    )
    await Runners.run_task(
        Task(
            input=f"Log in with {SECRET}",
            agent=secretive,
            id="secret",
            metadata={"api_key": SECRET, "workflow_version": "v2"},
        ),
        checkpointer=saver,
    )
    counter = itertools.count()
    sampler = math_agent(
        FunctionModel(lambda m, t: "It is 5." if next(counter) % 2 == 0 else "It is 6.")
    )
    return await rollout(
        [Task(input="What is 2+3?", agent=sampler, expected=5, id="q")],
        n=4,
        reward_fn=numeric,
        concurrency=4,
        checkpointer=saver,
    )


@pytest.fixture(scope="module")
def runs_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A database file holding the scenarios (built once per test module)."""
    path = tmp_path_factory.mktemp("export") / "runs.db"
    saver = TrajectorySaver(path)
    asyncio.run(build(saver))
    saver.close()
    yield path


@pytest.fixture(scope="module")
def runs(runs_db: Path) -> dict[str, Run]:
    """The stored runs by thread id."""
    return {r.thread_id: r for r in iter_runs(runs_db)}
