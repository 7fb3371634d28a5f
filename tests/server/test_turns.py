"""Threads of several turns, as LangGraph apps use them: a new input on a thread whose last run
finished is the next turn of its conversation (the real ``langgraph-sdk`` client and
``RemoteGraph``). ``chat`` answers with every user message it was shown and may make one model
call a run, so its second answer shows it saw the first turn, and a run's budget is its own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_client, get_sync_client

from aworld_graph import Runners
from aworld_graph.checkpoint import TrajectorySaver
from tests.server import apps
from tests.server.conftest import LiveServer


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture
async def sdk(server: LiveServer) -> AsyncIterator[Any]:
    client = get_client(url=server.url, api_key=None)
    yield client
    await client.aclose()


def _chain_is_one(history: list[dict[str, Any]]) -> None:
    """Newest first; every checkpoint's parent is the one after it."""
    for newer, older in zip(history, history[1:], strict=False):
        assert newer["parent_checkpoint"]["checkpoint_id"] == older["checkpoint"]["checkpoint_id"]
    assert history[-1]["parent_checkpoint"] is None


async def test_two_runs_with_input_on_one_thread_are_two_turns(
    sdk: Any, store: TrajectorySaver
) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    first = await sdk.runs.wait(thread, "chat", input=said("hello"))
    assert first["answer"] == "turn 1: hello"

    parts = [
        p
        async for p in sdk.runs.stream(
            thread, "chat", input=said("and now?"), stream_mode=["values", "updates"]
        )
    ]
    assert "error" not in [p.event for p in parts]
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["answer"] == "turn 2: hello / and now?"
    # this run's values only: from its input on (the new message in, the old answer gone)
    assert values[0]["messages"][-1]["content"] == "and now?" and values[0]["answer"] is None
    assert [v["steps"] for v in values] == [0, 1]
    assert [next(iter(u.data)) for u in parts if u.event == "updates"] == ["chat"]

    state = await sdk.threads.get_state(thread)
    roles = [(m["role"], m["content"]) for m in state["values"]["messages"]]
    assert roles == [
        ("user", "hello"),
        ("assistant", "turn 1: hello"),
        ("user", "and now?"),
        ("assistant", "turn 2: hello / and now?"),
    ]
    assert state["values"]["answer"] == "turn 2: hello / and now?" and state["next"] == []
    assert [r["kind"] for r in state["values"]["trace"]] == ["llm", "llm"]
    assert (await sdk.threads.get(thread))["status"] == "idle"

    history = await sdk.threads.get_history(thread, limit=50)
    assert [h["metadata"]["step"] for h in history] == [4, 3, 2, 1, 0, -1]
    assert [h["metadata"]["source"] for h in history] == ["loop", "loop", "input"] * 2
    _chain_is_one(history)
    runs = await sdk.runs.list(thread)
    assert [r["status"] for r in runs] == ["success", "success"]
    by_run = {h["metadata"].get("run_id") for h in history}
    assert by_run == {r["run_id"] for r in runs}

    # an ordinary thread of the store: the library reads the two turns back
    back = await Runners.resume(thread, agent=apps.chat, checkpointer=store)
    assert back.answer == "turn 2: hello / and now?"
    assert [i["meta"]["step"] for i in back.trajectory] == [1, 4]


async def test_a_tool_using_agent_and_a_queued_turn(sdk: Any) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    await sdk.runs.wait(thread, "counter", input={"input": "one two three"})
    queued = await sdk.runs.create(  # the thread is idle: enqueue starts it at once
        thread, "counter", input={"input": "four five"}, multitask_strategy="enqueue"
    )
    done = await sdk.runs.join(thread, queued["run_id"])
    assert done["answer"] == "2 words"
    assert [r["kind"] for r in done["trace"]] == ["llm", "tools", "llm"] * 2
    assert [m["content"] for m in done["messages"] if m["role"] == "user"] == [
        "one two three",
        "four five",
    ]


async def test_new_input_on_a_waiting_or_a_cancelled_thread_goes_on_top(sdk: Any) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    asked = await sdk.runs.wait(thread, "approval", input={"input": "plan the offsite"})
    assert asked["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
    # as in LangGraph's server: a new message instead of the answer is a new turn on top (the
    # human step left waiting is dropped): drafted again, it asks again
    other = await sdk.runs.wait(thread, "approval", input={"input": "something else"})
    assert other["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
    assert other["input"] == "something else"
    done = await sdk.runs.wait(thread, "approval", command={"resume": "approve"})
    assert done["answer"] == "published the plan"

    # the workflow's second turn: drafted again, asks again, and takes the other branch
    again = await sdk.runs.wait(thread, "approval", input={"input": "plan a shorter one"})
    assert again["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
    assert again["input"] == "plan a shorter one" and again["answer"] == "plan: three steps"
    revised = await sdk.runs.wait(thread, "approval", command={"resume": "no, shorter"})
    assert revised["answer"] == "revised the plan"
    assert revised["context"]["approval"] == "no, shorter"
    nodes = [r["node"] for r in revised["trace"]]
    # the first draft's human step, never answered, was dropped: it left no record
    assert nodes == [
        *("drafter", "drafter", "approval", "publisher"),
        *("drafter", "approval", "reviser"),
    ]

    gated = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.create(gated, "gated", input=said("four words right here"))
    parts = sdk.runs.join_stream(gated, run["run_id"], stream_mode="values")
    async for part in parts:  # until the tool's step is saved; the answer waits on the gate
        if part.event == "values" and part.data["steps"] >= 2:
            break
    await parts.aclose()
    await sdk.runs.cancel(gated, run["run_id"], wait=True)
    # as in LangGraph's server: the cancelled run's steps stay, and new input goes on top of
    # where it stopped, as after multitask_strategy="interrupt": the agent takes up the turn
    # the cancelled run left unfinished (its last message is the tool's result)
    assert (await sdk.threads.get(gated))["status"] == "interrupted"
    apps.GATE.set()
    on_top = await sdk.runs.wait(gated, "gated", input=said("other words"))
    assert "__error__" not in on_top and on_top["answer"] == "4 words"
    assert [m["content"] for m in on_top["messages"] if m["role"] == "user"] == [
        "four words right here",
        "other words",
    ]
    assert (await sdk.runs.wait(gated, "gated", input=said("two more")))["answer"] == "2 words"


def test_remote_graph_invoked_twice_on_one_thread(server: LiveServer) -> None:
    sync_client = get_sync_client(url=server.url, api_key=None)
    graph = RemoteGraph("chat", client=get_client(url=server.url), sync_client=sync_client)
    try:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        one = graph.invoke(said("hi"), config)
        assert one["answer"] == "turn 1: hi"
        two = graph.invoke(said("remember me?"), config)
        assert two["answer"] == "turn 2: hi / remember me?"
        streamed = list(graph.stream({"input": "third"}, config, stream_mode="values"))
        assert streamed[-1]["answer"] == "turn 3: hi / remember me? / third"
        state = graph.get_state(config)
        assert [m["role"] for m in state.values["messages"]] == ["user", "assistant"] * 3
        history = list(graph.get_state_history(config))
        assert [h.metadata["step"] for h in history] == list(range(7, -2, -1))
        head = state.config["configurable"]["checkpoint_id"]
        assert history[0].config["configurable"]["checkpoint_id"] == head
    finally:
        sync_client.close()
