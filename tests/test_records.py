"""The typed records of ``aworld_graph.records`` name every key a run writes: messages, trace
records (each kind, sub-run records too), tool results and rewards, as the state holds them
after real runs of each kind of node."""

from __future__ import annotations

from typing import Any

from aworld_graph import Agent, Critic, Human, Node, Runners, Swarm, TeamSwarm, tool
from aworld_graph.records import Message, Reward, ToolResult, TraceRecord
from aworld_graph.rewards import score_response, store_score
from aworld_graph.task import Task
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def _undeclared(records: list[dict[str, Any]], typed: type) -> set[str]:
    return {key for record in records for key in record} - set(typed.__annotations__)


def _check(state: dict[str, Any]) -> None:
    trace = state["trace"]
    results = [r for record in trace for r in record.get("tool_results") or []]
    assert _undeclared(state["messages"], Message) == set()
    assert _undeclared(trace, TraceRecord) == set()
    assert _undeclared(results, ToolResult) == set()
    assert _undeclared(state["rewards"], Reward) == set()


async def test_every_key_a_run_writes_is_declared(saver: Any) -> None:
    researcher = Agent(
        name="researcher",
        tools=[lookup],
        model=ScriptedModel([tool_call("lookup", {"q": "facts"}), "the facts"]),
    )
    leader = Agent(
        name="leader",
        model=ScriptedModel([tool_call("ask_researcher", {"request": "find"}), "composed"]),
    )
    team = await Runners.run("report", swarm=TeamSwarm(leader, researcher), checkpointer=saver)
    assert team.success and any(r.get("thread_id") for r in team.state["trace"])
    _check(team.state)

    writer = Agent(name="writer", tools=[lookup], model=ScriptedModel(["a draft"]))
    judge = FunctionModel(lambda m, t: '{"score": 0.9, "feedback": "fine"}')
    critic = Critic(name="critic", judges=writer, system_prompt="Grade it.", model=judge)
    count = Node(name="count", fn=lambda state: {"output": len(str(state.get("answer")))})
    flow = Swarm(writer, critic, count, Human(name="review"), name="flow")
    task = Task(input="write", swarm=flow)
    waiting = (await Runners.run_task(task, checkpointer=saver))[task.id]
    assert waiting.status == "interrupted"
    done = await Runners.resume(task.id, swarm=flow, value="ok", checkpointer=saver)
    assert done.success
    await Runners.reward(task, 0.5, feedback="fair", checkpointer=saver)
    scored = await store_score(task, score_response(done, "7"), checkpointer=saver)
    kinds = {r["kind"] for r in scored.state["trace"]}
    assert {"llm", "critic", "node", "human"} <= kinds
    assert {r.get("source") for r in scored.state["rewards"]} == {"critic", "user", "reward_fn"}
    _check(scored.state)

    looping = Agent(
        name="looping", tools=[lookup], max_steps=1, model=ScriptedModel([tool_call("lookup", {})])
    )
    stopped = await Runners.run("go", agent=looping, checkpointer=saver)
    assert stopped.status == "max_steps" and stopped.state["trace"][-1]["kind"] == "limit"
    _check(stopped.state)
