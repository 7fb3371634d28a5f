"""Assistants created over the API (``POST /assistants``) are MCP tools at ``/mcp`` from the
moment they are made until they are deleted, tried with the ``mcp`` client."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
from langgraph_sdk import get_client
from mcp.shared.exceptions import MCPError

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import Assistant, create_app
from tests.server import apps
from tests.server.conftest import LiveServer
from tests.server.test_mcp_serve import KEY, _session


async def test_a_created_assistant_is_a_tool_until_it_is_deleted(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(api_key=KEY)
    client = get_client(url=server.url, api_key=KEY)
    made = await client.assistants.create(
        "counter", name="tally", description="Counts the words of a text."
    )
    ident = str(made["assistant_id"])
    async with _session(server.url) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"approval", "chat", "counter", "gated", ident}
        tool = tools[ident]
        assert tool.title == "tally" and tool.description == "Counts the words of a text."
        assert tool.meta == {"aworld-graph/assistant_id": ident}
        assert set(tool.input_schema["properties"]) == {"input", "thread_id", "resume"}
        result = await session.call_tool(ident, {"input": "one two three"})
    found = result.structured_content
    assert found is not None and found["status"] == "success" and found["answer"] == "3 words"
    runs = await client.runs.list(found["thread_id"])
    assert [r["assistant_id"] for r in runs] == [ident]  # the run is the created assistant's

    await client.assistants.delete(ident)
    await client.aclose()
    async with _session(server.url) as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == {"approval", "chat", "counter", "gated"}
        with pytest.raises(MCPError, match=f"no tool '{ident}'"):
            await session.call_tool(ident, {"input": "one"})


async def test_a_created_assistant_whose_name_a_served_one_has_gets_the_suffix(
    store: TrajectorySaver,
) -> None:
    served = [
        Assistant.of(apps.chat, assistant_id="chat_2", target="tests.server.apps:chat"),
        Assistant.of(apps.approval, target="tests.server.apps:approval"),
    ]
    with LiveServer(create_app(served, store=store, api_key="")) as server:
        client = get_client(url=server.url, api_key=None)
        await client.assistants.create("chat_2", assistant_id="chat@2", name="chat again")
        human = str((await client.assistants.create("approval", name="asks"))["assistant_id"])
        await client.aclose()
        async with _session(server.url, key=None) as session:
            listed = (await session.list_tools()).tools
            tools = {t.meta["aworld-graph/assistant_id"]: t.name for t in listed}  # type: ignore[index]
            asked = await session.call_tool(human, {"input": "plan"})
            assert asked.structured_content is not None
            assert asked.structured_content["status"] == "needs_input"
            thread = asked.structured_content["thread_id"]
            done = await session.call_tool(human, {"thread_id": thread, "resume": "approve"})
    digest = hashlib.sha256(b"chat@2").hexdigest()[:8]
    assert tools["chat_2"] == "chat_2"  # a served workflow's tool keeps its name
    assert tools["chat@2"] == f"chat_2_{digest}"
    assert done.structured_content is not None
    assert done.structured_content["answer"] == "published the plan"
