"""``langgraph.pregel.remote.RemoteGraph`` against the server: invoke, stream, state, history,
an interrupt and ``Command(resume=...)``, the drawn graph; sync and async."""

from __future__ import annotations

import uuid

from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk import get_client, get_sync_client

from tests.server.conftest import LiveServer


def remote(server: LiveServer, name: str) -> tuple[RemoteGraph, list[object]]:
    sync_client = get_sync_client(url=server.url, api_key=None)
    client = get_client(url=server.url, api_key=None)
    return RemoteGraph(name, client=client, sync_client=sync_client), [sync_client, client]


def test_invoke_state_history_and_graph(server: LiveServer) -> None:
    graph, clients = remote(server, "counter")
    try:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        out = graph.invoke({"messages": [{"role": "user", "content": "one two three"}]}, config)
        assert out["answer"] == "3 words"
        state = graph.get_state(config)
        assert state.values["answer"] == "3 words" and state.next == ()
        assert state.config["configurable"]["checkpoint_id"]
        history = list(graph.get_state_history(config))
        assert [h.metadata["step"] for h in history] == [3, 2, 1, 0, -1]
        drawn = graph.get_graph()
        assert {"counter", "counter__tools"} <= set(drawn.nodes)
    finally:
        clients[0].close()  # type: ignore[attr-defined]


def test_stream_updates_interrupt_and_resume(server: LiveServer) -> None:
    graph, clients = remote(server, "approval")
    try:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        chunks = list(graph.stream({"input": "plan the offsite"}, config, stream_mode="updates"))
        assert [next(iter(c)) for c in chunks] == ["drafter", "__interrupt__"]
        assert chunks[-1]["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
        assert graph.get_state(config).next == ("approval",)
        done = graph.invoke(Command(resume="approve"), config)
        assert done["answer"] == "published the plan"
        assert done["context"]["approval"] == "approve"
    finally:
        clients[0].close()  # type: ignore[attr-defined]


async def test_async_stream_of_values(server: LiveServer) -> None:
    graph, clients = remote(server, "counter")
    try:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        values = [
            v
            async for v in graph.astream(
                {"messages": [{"role": "user", "content": "a b"}]}, config, stream_mode="values"
            )
        ]
        assert values[-1]["answer"] == "2 words" and [v["steps"] for v in values] == [0, 1, 2, 3]
        state = await graph.aget_state(config)
        assert state.values["answer"] == "2 words"
    finally:
        clients[0].close()  # type: ignore[attr-defined]
        await clients[1].aclose()  # type: ignore[attr-defined]
