"""Messages as LangChain's chat UIs read them, through the real ``langgraph-sdk`` client:
LangChain's shape (``type``, ``id``, ``tool_calls`` with object ``args``, tool messages
with ``tool_call_id`` and ``name``) in thread state, history, run results and every stream
mode; ids the same on every read; a streamed chunk's id the id of the message it becomes;
each user turn once and no agent's internal prompt (the checkpoint still keeps them)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
    messages_from_dict,
)
from langgraph_sdk import get_client

from aworld_graph import Agent, Swarm, tool
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.config import AgentConfig
from aworld_graph.server import Assistant, create_app
from tests.fake_openai import FakeOpenAI, calls, text
from tests.server.conftest import LiveServer


@pytest.fixture
async def sdk(server: LiveServer) -> AsyncIterator[Any]:
    client = get_client(url=server.url, api_key=None)
    yield client
    await client.aclose()


def said(content: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}]}


def langchain(messages: list[dict[str, Any]]) -> list[Any]:
    """The messages as LangChain reads them, both ways it reads dicts; they must agree."""
    loaded = messages_from_dict([{"type": m["type"], "data": m} for m in messages])
    converted = convert_to_messages(messages)
    assert [(type(m), m.id, m.content) for m in loaded] == [
        (type(m), m.id, m.content) for m in converted
    ]
    return loaded


def merged(chunks: list[dict[str, Any]]) -> AIMessageChunk:
    """Streamed ``AIMessageChunk`` dicts added up as LangChain (and its UIs) add them."""
    parts = [AIMessageChunk(**{k: v for k, v in c.items() if k != "type"}) for c in chunks]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


async def test_a_tool_calling_run_reads_as_langchain_messages_everywhere(
    sdk: Any, store: TrajectorySaver
) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    chunks: list[dict[str, Any]] = []
    updated: list[dict[str, Any]] = []
    last_values: dict[str, Any] = {}
    async for part in sdk.runs.stream(
        thread,
        "counter",
        input=said("one two three"),
        stream_mode=["messages-tuple", "updates", "values"],
    ):
        if part.event == "messages":
            chunk, metadata = part.data
            assert chunk["type"] == "AIMessageChunk" and metadata["langgraph_node"] == "counter"
            chunks.append(chunk)
        elif part.event == "updates":
            updated += [m for writes in part.data.values() for m in writes.get("messages", [])]
        elif part.event == "values":
            last_values = part.data
    state = await sdk.threads.get_state(thread)
    final = state["values"]["messages"]
    assert [(m["type"], m["role"]) for m in final] == [
        ("human", "user"),
        ("ai", "assistant"),
        ("tool", "tool"),
        ("ai", "assistant"),
    ]
    asked, result = final[1], final[2]
    assert asked["tool_calls"] == [
        {"id": asked["tool_calls"][0]["id"], "name": "word_count", "type": "tool_call"}
        | {"args": {"text": "one two three"}}
    ]
    assert result["tool_call_id"] == asked["tool_calls"][0]["id"]
    assert (result["name"], result["status"], result["content"]) == ("word_count", "success", "3")
    assert not any(k.startswith("_") for m in final for k in m)  # no bookkeeping keys

    loaded = langchain(final)
    assert [type(m) for m in loaded] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert loaded[1].tool_calls[0]["args"] == {"text": "one two three"}
    assert loaded[2].tool_call_id == asked["tool_calls"][0]["id"]

    ids = [m["id"] for m in final]
    assert len(set(ids)) == 4 and all(ids)
    again = await sdk.threads.get_state(thread)  # the same ids on every read
    assert [m["id"] for m in again["values"]["messages"]] == ids
    assert [m["id"] for m in (await sdk.threads.get(thread))["values"]["messages"]] == ids
    assert [m["id"] for m in last_values["messages"]] == ids  # and in the stream
    history = await sdk.threads.get_history(thread)
    for snapshot in history:  # an earlier state's messages are a prefix, with their ids
        earlier = [m["id"] for m in snapshot["values"].get("messages", [])]
        assert earlier == ids[: len(earlier)]
    assert [m["id"] for m in updated] == ids[1:]  # what each node wrote, with its final id

    # each streamed chunk merges into the message it becomes
    assert {c["id"] for c in chunks} == {final[1]["id"], final[3]["id"]}
    call = merged([c for c in chunks if c["id"] == final[1]["id"]])
    assert call.tool_calls == loaded[1].tool_calls
    assert call.tool_call_chunks[0]["name"] == "word_count"
    answer = merged([c for c in chunks if c["id"] == final[3]["id"]])
    assert answer.content == final[3]["content"] == "3 words"

    done = await sdk.runs.wait(thread, "counter", input=said("four five six seven"))
    assert [m["id"] for m in done["messages"]][:4] == ids  # the next turn keeps them
    assert [m["content"] for m in done["messages"] if m["type"] == "human"] == [
        "one two three",
        "four five six seven",
    ]
    langchain(done["messages"])


async def test_a_workflow_shows_the_conversation_a_person_had(
    sdk: Any, store: TrajectorySaver
) -> None:
    """Each user turn once, a person's reply at a human step as theirs, and no prompt the
    workflow wrote for its next agent; the checkpoint keeps what the agents were given."""
    thread = (await sdk.threads.create())["thread_id"]
    first = await sdk.runs.wait(thread, "approval", input=said("Plan a team offsite"))
    assert [(m["type"], m["content"]) for m in first["messages"]] == [
        ("human", "Plan a team offsite"),
        ("ai", "plan: three steps"),
    ]
    assert first["messages"][1]["name"] == "drafter"
    done = await sdk.runs.wait(thread, "approval", command={"resume": "approve"})
    shown = [(m["type"], m.get("name"), m["content"]) for m in done["messages"]]
    assert shown == [
        ("human", None, "Plan a team offsite"),
        ("ai", "drafter", "plan: three steps"),
        ("human", "approval", "approve"),
        ("ai", "publisher", "published the plan"),
    ]
    state = await sdk.threads.get_state(thread)
    assert state["values"]["messages"] == done["messages"]
    langchain(done["messages"])

    stored = store.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    assert stored is not None
    kept = stored.checkpoint["channel_values"]["messages"]
    assert len(kept) == 6  # the agents' own copies of the task and the publisher's prompt
    assert any("A person replied at approval" in str(m["content"]) for m in kept)


async def test_turns_of_a_conversation_each_appear_once(sdk: Any) -> None:
    thread = (await sdk.threads.create())["thread_id"]
    for words in ("hello", "and again", "a third time"):
        done = await sdk.runs.wait(thread, "chat", input=said(words))
    humans = [m["content"] for m in done["messages"] if m["type"] == "human"]
    assert humans == ["hello", "and again", "a third time"]
    assert [m["type"] for m in done["messages"]] == ["human", "ai"] * 3


@tool
def lookup(q: str) -> str:
    """Look a word up."""
    return f"{q}: a greeting"


@pytest.fixture
def streaming(store: TrajectorySaver, fake_openai: FakeOpenAI) -> Iterator[LiveServer]:
    """A server whose agent streams its tokens from an OpenAI-compatible endpoint."""
    conf = AgentConfig(
        llm_base_url=fake_openai.url, llm_model_name="fake-model", llm_api_key="sk-test"
    )
    agent = Agent(name="talker", tools=[lookup], conf=conf)
    app = create_app([Assistant.of(Swarm(agent, name="talker"))], store=store, api_key="")
    with LiveServer(app) as server:
        yield server


async def test_streamed_tokens_merge_into_the_final_message(
    streaming: LiveServer, fake_openai: FakeOpenAI
) -> None:
    fake_openai.add(calls(("lookup", {"q": "hello"})), text("Hello is a greeting, as found."))
    client = get_client(url=streaming.url, api_key=None)
    try:
        thread = (await client.threads.create())["thread_id"]
        tuples: list[dict[str, Any]] = []
        complete: list[dict[str, Any]] = []
        async for part in client.runs.stream(
            thread,
            "talker",
            input=said("what is hello?"),
            stream_mode=["messages-tuple", "messages"],
        ):
            if part.event == "messages":
                tuples.append(part.data[0])
            elif part.event == "messages/complete":
                complete += part.data
        final = (await client.threads.get_state(thread))["values"]["messages"]
    finally:
        await client.aclose()
    replies = [m for m in final if m["type"] == "ai"]
    assert [m["id"] for m in complete] == [m["id"] for m in replies]
    assert complete[1]["content"] == replies[1]["content"] == "Hello is a greeting, as found."
    answer = [c for c in tuples if c["id"] == replies[1]["id"]]
    assert len(answer) > 3  # token by token
    assert merged(answer).content == replies[1]["content"]
    asked = merged([c for c in tuples if c["id"] == replies[0]["id"]])
    assert asked.tool_calls == [
        {"id": replies[0]["tool_calls"][0]["id"], "name": "lookup", "args": {"q": "hello"}}
        | {"type": "tool_call"}
    ]
    assert {c["id"] for c in tuples} == {m["id"] for m in replies}
    langchain(final)


async def test_messages_sent_back_in_this_shape_are_stored_as_the_agents_keep_them(
    sdk: Any, store: TrajectorySaver
) -> None:
    """A client may hand the messages it got back (``POST /threads/{id}/state``): their
    LangChain tool calls are stored in the state's OpenAI shape, and the thread goes on."""
    thread = (await sdk.threads.create())["thread_id"]
    done = await sdk.runs.wait(thread, "counter", input=said("one two"))
    asked = done["messages"][1]
    await sdk.threads.update_state(thread, {"messages": [asked]})
    stored = store.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    assert stored is not None
    kept = stored.checkpoint["channel_values"]["messages"][-1]
    call = asked["tool_calls"][0]
    assert kept["tool_calls"] == [
        {"id": call["id"], "type": "function", "function": {"name": "word_count"}}
        | {"function": {"name": "word_count", "arguments": '{"text": "one two"}'}}
    ]
    shown = (await sdk.threads.get_state(thread))["values"]["messages"]
    assert shown[-1]["tool_calls"] == asked["tool_calls"]


async def test_a_langgraph_applications_messages_go_out_as_it_made_them(
    store: TrajectorySaver,
) -> None:
    from tests.server import langgraph_apps

    assistant = Assistant.of(langgraph_apps.chat, target="tests.server.langgraph_apps:chat")
    with LiveServer(create_app([assistant], store=store, api_key="")) as server:
        client = get_client(url=server.url, api_key=None)
        try:
            graph = (await client.assistants.search())[0]["assistant_id"]
            thread = (await client.threads.create())["thread_id"]
            done = await client.runs.wait(thread, graph, input=said("hi"))
            state = await client.threads.get_state(thread)
        finally:
            await client.aclose()
    messages = state["values"]["messages"]
    assert done["messages"] == messages
    assert [m["type"] for m in messages] == ["human", "ai"]
    assert not any("role" in m for m in messages)  # LangChain's own dump, untouched
    assert [m["id"] for m in messages] == [m.id for m in convert_to_messages(messages)]
