"""The stream mode ``events`` of a workflow and the thread stream mode ``state_update``, with
the real ``langgraph-sdk`` client against a real server (issue 37).

``events`` is LangChain's ``astream_events`` (v2) of the run, as LangGraph's server streams a
graph's: the graph's and each node's ``on_chain_*`` events, an agent's model call as
``on_chat_model_start`` / ``on_chat_model_stream`` (a streamed piece each) /
``on_chat_model_end`` and a tool call as ``on_tool_start`` / ``on_tool_end``. The model here is
a real OpenAI client streaming from the loopback server of ``tests/fake_openai.py`` (3
characters a chunk). ``state_update`` is LangGraph's thread event for an edit of the state
(``POST /threads/{id}/state``): ``{"state": ThreadState, "thread_id"}``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessageChunk, convert_to_messages
from langgraph_sdk import get_client
from langgraph_sdk.errors import UnprocessableEntityError

from aworld_graph import Agent
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.model import OpenAIModel
from aworld_graph.server import Assistant, create_app
from tests.fake_openai import FakeOpenAI, calls, text
from tests.server import apps
from tests.server.conftest import LiveServer

ANSWER = "the text has three words"


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def live(model: FakeOpenAI, store: TrajectorySaver) -> Iterator[LiveServer]:
    counting = Agent(
        name="counting",
        model=OpenAIModel(model="fake-model", base_url=model.url),
        tools=[apps.word_count],
    )
    served = [
        Assistant.of(counting, target="tests.server.test_stream_events:counting"),
        Assistant.of(apps.counter, target="tests.server.apps:counter"),
        Assistant.of(apps.gated, target="tests.server.apps:gated"),
    ]
    with LiveServer(create_app(served, store=store, api_key="")) as server:
        yield server


@pytest.fixture
async def sdk(live: LiveServer) -> AsyncIterator[Any]:
    async with get_client(url=live.url, api_key=None) as client:
        yield client


def _user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def _events(sdk: Any, model: FakeOpenAI) -> tuple[str, list[Any], list[Any]]:
    """One streamed run of ``counting`` (a tool call, then a streamed answer): its run id,
    its ``events`` parts and its ``values`` parts."""
    model.add(calls(("word_count", {"text": "one two three"})), text(ANSWER))
    thread = (await sdk.threads.create())["thread_id"]
    run_id, events, values = "", [], []
    async for part in sdk.runs.stream(
        thread, "counting", input=_user("count: one two three"), stream_mode=["events", "values"]
    ):
        if part.event == "metadata":
            run_id = part.data["run_id"]
        elif part.event == "events":
            events.append(part.data)
        elif part.event == "values":
            values.append(part.data)
    return run_id, events, values


async def test_a_workflows_events_are_langchains_in_the_order_a_client_expects(
    sdk: Any, model: FakeOpenAI
) -> None:
    run_id, events, values = await _events(sdk, model)
    assert all(
        sorted(e) == ["data", "event", "metadata", "name", "parent_ids", "run_id", "tags"]
        for e in events
    )
    shown: list[tuple[str, str]] = []
    for e in events:
        step = (e["event"], e["name"])
        if e["name"] == "route" or (step[0] == "on_chat_model_stream" and shown[-1] == step):
            continue  # the routing after a model node; a run of streamed pieces as one
        shown.append(step)
    model_call = [
        ("on_chat_model_start", "fake-model"),
        ("on_chat_model_stream", "fake-model"),
        ("on_chat_model_end", "fake-model"),
    ]
    assert shown == [
        ("on_chain_start", "counting"),
        ("on_chain_start", "counting"),
        *model_call,
        ("on_chain_stream", "counting"),
        ("on_chain_end", "counting"),
        ("on_chain_start", "counting__tools"),
        ("on_tool_start", "word_count"),
        ("on_tool_end", "word_count"),
        ("on_chain_stream", "counting__tools"),
        ("on_chain_end", "counting__tools"),
        ("on_chain_start", "counting"),
        *model_call,
        ("on_chain_stream", "counting"),
        ("on_chain_end", "counting"),
        ("on_chain_end", "counting"),
    ]
    # the graph's own events are the run's, as LangGraph's server streams them
    root = events[0]
    assert root["run_id"] == events[-1]["run_id"] == run_id and root["parent_ids"] == []
    assert root["metadata"]["run_id"] == run_id and root["metadata"]["graph_id"] == "counting"
    nodes = {
        e["run_id"]: e
        for e in events
        if e["event"] == "on_chain_start" and e["parent_ids"] == [run_id]
    }
    assert [n["metadata"]["langgraph_step"] for n in nodes.values()] == [1, 2, 3]
    assert [n["metadata"]["langgraph_node"] for n in nodes.values()] == [
        "counting",
        "counting__tools",
        "counting",
    ]
    assert all(
        n["tags"] == [f"graph:step:{n['metadata']['langgraph_step']}"] for n in nodes.values()
    )


async def test_a_model_token_stream_is_on_chat_model_stream_events(
    sdk: Any, model: FakeOpenAI
) -> None:
    run_id, events, values = await _events(sdk, model)
    answer_node = [e for e in events if e["event"] == "on_chain_start" and e["name"] == "counting"][
        -1
    ]
    calls_made = [e for e in events if e["event"] == "on_chat_model_start"]
    assert len(calls_made) == 2
    last = calls_made[-1]["run_id"]
    mine = [e for e in events if e["run_id"] == last]
    kinds = [e["event"] for e in mine]
    streamed = [e["data"]["chunk"] for e in mine if e["event"] == "on_chat_model_stream"]
    # a chunk per piece the endpoint streamed (3 characters each), in order
    assert kinds == [
        "on_chat_model_start",
        *["on_chat_model_stream"] * len(streamed),
        "on_chat_model_end",
    ]
    assert [c["content"] for c in streamed] == [ANSWER[i : i + 3] for i in range(0, len(ANSWER), 3)]
    assert all(c["type"] == "AIMessageChunk" and c["id"] == streamed[0]["id"] for c in streamed)
    merged = AIMessageChunk(**streamed[0])
    for chunk in streamed[1:]:
        merged += AIMessageChunk(**chunk)
    assert merged.content == ANSWER
    ended = mine[-1]["data"]
    assert ended["output"]["content"] == ANSWER and ended["output"]["type"] == "ai"
    assert ended["output"]["usage_metadata"]["total_tokens"] == 10
    sent = model.requests[-1]["body"]["messages"]  # what the model was sent, system prompt first
    started = convert_to_messages(mine[0]["data"]["input"]["messages"][0])
    assert [(m.type, m.content) for m in started] == [
        (
            {"system": "system", "user": "human", "assistant": "ai", "tool": "tool"}[m["role"]],
            m["content"],
        )
        for m in sent
    ]
    assert started[1].content == "count: one two three"
    assert ended["input"] == mine[0]["data"]["input"]
    # a child of the agent's node, with its node's LangGraph metadata
    for e in mine:
        assert e["parent_ids"] == [run_id, answer_node["run_id"]]
        assert e["metadata"]["langgraph_node"] == "counting"
        assert e["metadata"]["langgraph_step"] == 3
    # the first call's tool call streams as tool_call_chunks and ends as a tool call
    first = [e for e in events if e["run_id"] == calls_made[0]["run_id"]]
    pieces = [
        p
        for e in first
        if e["event"] == "on_chat_model_stream"
        for p in e["data"]["chunk"]["tool_call_chunks"]
    ]
    assert [(p["name"], p["args"]) for p in pieces] == [("word_count", '{"text": "one two three"}')]
    assert first[-1]["data"]["output"]["tool_calls"][0]["args"] == {"text": "one two three"}
    # the streamed answer is the run's answer
    assert values[-1]["answer"] == ANSWER


async def test_a_tool_call_is_on_tool_start_and_on_tool_end(sdk: Any, model: FakeOpenAI) -> None:
    run_id, events, _ = await _events(sdk, model)
    tools = [e for e in events if e["event"] in ("on_tool_start", "on_tool_end")]
    assert [e["event"] for e in tools] == ["on_tool_start", "on_tool_end"]
    started, ended = tools
    assert started["run_id"] == ended["run_id"] and started["name"] == "word_count"
    assert started["data"] == {"input": {"text": "one two three"}}
    output = ended["data"]["output"]
    assert (output["type"], output["content"], output["name"], output["status"]) == (
        "tool",
        "3",
        "word_count",
        "success",
    )
    node = next(
        e for e in events if e["event"] == "on_chain_start" and e["name"] == "counting__tools"
    )
    assert started["parent_ids"] == [run_id, node["run_id"]]
    assert started["metadata"]["langgraph_node"] == "counting__tools"
    assert started["metadata"]["checkpoint_ns"] == node["metadata"]["langgraph_checkpoint_ns"]
    # nothing of the run loop's own (the task's callables, the node's config) goes out
    assert "__tool_call__" not in str(events) and "_run_call" not in str(events)


async def test_events_with_a_background_run_and_join_stream(sdk: Any) -> None:
    """A run created with ``events`` keeps them for ``join_stream``, as LangGraph's server;
    a model that streams nothing still gives one chunk (``counter``'s fake model)."""
    thread = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.create(
        thread, "counter", input=_user("four words right here"), stream_mode=["events"]
    )
    parts = [p async for p in sdk.runs.join_stream(thread, run["run_id"], stream_mode="events")]
    names = [(p.data["event"], p.data["name"]) for p in parts if p.event == "events"]
    assert names[0] == ("on_chain_start", "counter") and names[-1] == ("on_chain_end", "counter")
    assert ("on_tool_end", "word_count") in names
    chunks = [
        p.data["data"]["chunk"]["content"]
        for p in parts
        if p.event == "events" and p.data["event"] == "on_chat_model_stream"
    ]
    assert chunks[-1] == "4 words"


# -- the thread stream's state_update ------------------------------------------------------


async def _until(parts: Any, done: Any) -> list[Any]:
    got = []
    async for part in parts:
        got.append((part.event, part.data))
        if done(part):
            break
    await parts.aclose()
    return got


async def test_an_edit_of_the_state_is_a_state_update_on_the_threads_stream(sdk: Any) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.create(thread, "gated", input=_user("two words"))  # waits for GATE
    parts = await sdk.threads.join_stream(thread, stream_mode=["lifecycle", "state_update"])
    got = [await anext(parts)]  # joined: the run going, from its start
    apps.GATE.set()
    async for part in parts:
        got.append((part.event, part.data))
        if part.event == "metadata" and part.data.get("status") == "run_done":
            break
    edit = await sdk.threads.update_state(
        thread, {"messages": [{"role": "user", "content": "more"}]}
    )
    got.append(await anext(parts))
    await parts.aclose()
    events = [got[0].event, *(e for e, _ in got[1:-1]), got[-1].event]
    assert events == ["metadata", "metadata", "state_update"]
    assert got[0].data == {"run_id": run["run_id"], "attempt": 1}
    assert got[1][1] == {"status": "run_done", "run_id": run["run_id"]}
    update = got[-1].data
    assert sorted(update) == ["state", "thread_id"] and update["thread_id"] == thread
    assert update["state"]["checkpoint"]["checkpoint_id"] == edit["checkpoint"]["checkpoint_id"]
    assert update["state"] == await sdk.threads.get_state(thread)
    assert update["state"]["values"]["messages"][-1]["content"] == "more"


async def _sse(lines: Any) -> tuple[str, Any]:
    """The next server-sent event of ``lines``: its name and data."""
    fields: dict[str, str] = {}
    async for line in lines:
        if not line:
            if fields:
                return fields["event"], json.loads(fields["data"])
            continue
        name, _, value = line.partition(": ")
        fields[name] = value
    raise AssertionError("the stream ended")


async def test_state_update_alone_run_modes_alone_and_as_node(sdk: Any, live: LiveServer) -> None:
    """Only ``state_update``: no run's events, the edit (``as_node`` too); ``run_modes``
    alone: the runs, no state update."""
    thread = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.create(thread, "counter", input=_user("two words"))
    await sdk.runs.join(thread, run["run_id"])
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        query = {"stream_mode": "state_update"}
        async with http.stream("GET", f"/threads/{thread}/stream", params=query) as only:
            assert only.status_code == 200  # the stream is open: edits from now on are sent
            again = await sdk.runs.create(thread, "counter", input=_user("three more words"))
            await sdk.runs.join(thread, again["run_id"])
            await sdk.threads.update_state(thread, {"answer": "edited"}, as_node="counter")
            event, data = await _sse(only.aiter_lines())
        assert event == "state_update" and data["state"]["values"]["answer"] == "edited"
        assert data["state"]["metadata"]["source"] == "update"
        query = {"stream_mode": "run_modes"}
        async with http.stream("GET", f"/threads/{thread}/stream", params=query) as runs:
            assert runs.status_code == 200
            await sdk.threads.update_state(thread, {"answer": "edited again"}, as_node="counter")
            third = await sdk.runs.create(thread, "counter", input=_user("one"))
            first = await _sse(runs.aiter_lines())
        assert first == ("metadata", {"run_id": third["run_id"], "attempt": 1})
        await sdk.runs.join(thread, third["run_id"])
    with pytest.raises(UnprocessableEntityError, match="state_update"):
        async for _ in await sdk.threads.join_stream(thread, stream_mode="nonsense"):  # type: ignore[arg-type]
            pass
