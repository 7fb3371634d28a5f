"""The run seam, ``aworld_graph.run``: a graph for a source on a store, opened, driven, read
back and closed; its events match their declared types."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aworld_graph import Agent, HandoffSwarm, Task, TaskConfig, TaskRunMode, tool
from aworld_graph.errors import DefinitionError
from aworld_graph.run import (
    Answer,
    GraphRun,
    Handoff,
    LlmCall,
    LlmStart,
    NodeEnd,
    NodeStart,
    State,
    Token,
    ToolCall,
    ToolStart,
    Update,
    as_source,
    built,
)
from aworld_graph.testing import ScriptedModel, tool_call

KINDS: dict[str, Any] = {
    "node_start": NodeStart,
    "node_end": NodeEnd,
    "token": Token,
    "llm_start": LlmStart,
    "llm_call": LlmCall,
    "tool_start": ToolStart,
    "tool_call": ToolCall,
    "handoff": Handoff,
    "answer": Answer,
    "update": Update,
    "state": State,
}


@tool
def note(text: str) -> str:
    """Write a note."""
    return f"noted {text}"


def _swarm() -> HandoffSwarm:
    triage = Agent(
        name="triage",
        tools=[note],
        model=ScriptedModel(
            [[tool_call("note", {"text": "x"}), tool_call("transfer_to_expert", {})]]
        ),
    )
    expert = Agent(name="expert", model=ScriptedModel(["the answer"]))
    return HandoffSwarm(triage, expert, topology=[(triage, expert)])


def _assert_typed(event: Any) -> None:
    kind = KINDS[event["event"]]
    assert set(event) == set(kind.__required_keys__), (event["event"], sorted(event))
    hints = typing.get_type_hints(kind)
    for key, value in event.items():
        expected = typing.get_origin(hints[key]) or hints[key]
        if expected in (str, bool, dict, list):
            assert isinstance(value, expected), (event["event"], key, value)


async def test_a_run_reports_every_event_with_the_fields_its_type_declares(saver: Any) -> None:
    seen: list[Any] = []
    task = Task(input="help", swarm=_swarm(), conf=TaskConfig(stream=True))
    async with GraphRun(task, saver) as run:
        response = await run.drive(events=seen.append, states=True)
    assert response.answer == "the answer"
    kinds = [e["event"] for e in seen]
    assert {"node_start", "node_end", "token", "llm_call", "tool_start", "tool_call"} <= set(kinds)
    assert "handoff" in kinds and kinds.index("llm_start") < kinds.index("llm_call")
    started = [(e["tool"], e["tool_call_id"]) for e in seen if e["event"] == "tool_start"]
    ended = [(e["tool"], e["tool_call_id"]) for e in seen if e["event"] == "tool_call"]
    assert sorted(started) == sorted(ended) and len(ended) == 2  # note and the handoff
    assert kinds.index("tool_start") < kinds.index("tool_call")
    assert {"answer", "update", "state"} <= set(kinds)
    for event in seen:
        _assert_typed(event)
    handoff = next(e for e in seen if e["event"] == "handoff")
    assert (handoff["from"], handoff["to"]) == ("triage", "expert")
    assert [e["node"] for e in seen if e["event"] == "node_start"][0] == "triage"


async def test_stream_ends_with_done_and_the_same_response_a_read_back_gives(saver: Any) -> None:
    task = Task(input="help", swarm=_swarm())
    async with GraphRun(task, saver) as run:
        events = [e async for e in run.stream()]
        again = await run.response()
    done = events[-1]
    assert done["event"] == "done"
    assert [e["event"] for e in events].count("done") == 1
    assert done["response"].answer == again.answer == "the answer"
    assert again.checkpoint_id == done["response"].checkpoint_id


async def test_step_goes_one_superstep_at_a_time_on_the_stored_thread(saver: Any) -> None:
    agent = Agent(
        name="worker", tools=[note], model=ScriptedModel([tool_call("note", {"text": "x"}), "ok"])
    )
    task = Task(input="go", agent=agent, conf=TaskConfig(run_mode=TaskRunMode.INTERACTIVE))
    nodes: list[list[str]] = []
    for _ in range(3):
        async with GraphRun(task, saver) as run:  # each step opens the thread afresh
            response, updates = await run.step()
        nodes.append(sorted(k for k in updates if not k.startswith("__")))
    assert nodes == [["worker"], ["worker__tools"], ["worker"]]
    assert response.status == "finished" and response.answer == "ok"


async def test_a_task_with_a_generated_id_starts_a_new_thread_once() -> None:
    agent = Agent(name="a", model=ScriptedModel(["one"]))
    task = Task(input="hi", agent=agent)
    named = Task(input="hi", agent=agent, id="t1")
    assert task.new_thread and not named.new_thread
    async with GraphRun(task, InMemorySaver()) as run:
        assert (await run.drive()).answer == "one"
    assert not task.new_thread  # the thread exists now: the next run reads it first


async def test_a_graph_run_is_used_inside_its_async_with_block(saver: Any) -> None:
    run = GraphRun(Task(input="x", agent=Agent(name="a", model=ScriptedModel(["y"]))), saver)
    with pytest.raises(DefinitionError, match="not open"):
        await run.drive()
    async with run:
        with pytest.raises(DefinitionError, match="already open"):
            await run.__aenter__()


async def test_one_built_graph_per_source_whether_an_agent_is_wrapped_or_not() -> None:
    agent = Agent(name="a", model=ScriptedModel(["y"]))
    source = as_source(agent)
    assert as_source(agent) is source and as_source(source) is source
    assert built(source) is built(as_source(agent))
    assert Task(input="x", agent=agent).source is Task(input="x", swarm=source).source


async def test_drop_pending_lets_new_input_go_on_top_of_a_waiting_thread(saver: Any) -> None:
    """A thread that waits for a person takes no new turn; once its pending tasks are
    dropped (one checkpoint on top, the history kept) the new input is its next turn."""
    from aworld_graph import Human, Swarm

    writer = Agent(name="writer", model=ScriptedModel(["draft one", "draft two"]))
    swarm = Swarm(writer, Human(name="review", prompt="ok?"), name="reviewed")
    first = Task(input="write", swarm=swarm, id="t-on-top")
    async with GraphRun(first, saver) as run:
        asked = await run.drive()
        assert asked.status == "interrupted"
        history = [s async for s in run.graph.aget_state_history(run.config)]
        again = Task(input="write again", swarm=swarm, id="t-on-top")
        async with GraphRun(again, saver) as second:
            refused = await second.drive(new_turn=True)
            assert refused.status == "error" and "drop_pending" in refused.msg
            assert await second.drop_pending({"by": "test"}) is True
            assert await second.drop_pending() is False  # nothing pending now
            dropped = await second.snapshot()
            assert dropped.next == () and dropped.metadata["by"] == "test"
            done = await second.drive(new_turn=True)
        after = [s async for s in run.graph.aget_state_history(run.config)]
    assert done.status == "interrupted" and done.answer == "draft two"  # it asks again
    users = [m["content"] for m in done.state["messages"] if m["role"] == "user"]
    assert users[0] == "write" and users[-1] == "write again"
    kept = {s.config["configurable"]["checkpoint_id"] for s in after}
    assert {s.config["configurable"]["checkpoint_id"] for s in history} <= kept
