"""``client.threads.stream``, the langgraph-sdk's thread stream protocol (``POST
/threads/{id}/commands`` and ``POST /threads/{id}/stream/events``), served for a LangGraph
application and an aworld-graph workflow, with the real SDK client (issue 37): a run's
output and events (its model's answer streamed on the messages channel), tool calls (their
arguments as content blocks on ``messages``, their start, result or error on ``tools``), an
interrupt answered with ``run.respond``, a thread stream opened on a thread that already ran,
the API key, and bad input as a 422 naming the field."""

# ruff: noqa: F811 (app_server's fixtures, imported here, are the tests' parameters)

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from aworld_graph import Agent
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import Assistant, create_app
from aworld_graph.testing import FunctionModel, tool_call
from tests.server import app_server as fixtures
from tests.server.app_server import app_sdk, app_server  # noqa: F401 (fixtures)
from tests.server.conftest import LiveServer
from tests.server.langgraph_tool_app import tooled, untold

USER = {"messages": [{"role": "user", "content": "hi there"}]}


HELD = threading.Event()
"""Holds ``held``'s ``lookup`` tool until a test sets it."""


async def lookup(word: str) -> str:
    """Look a word up (waits for :data:`HELD`; fails for 'nothing')."""
    await asyncio.to_thread(HELD.wait, 60)
    if word == "nothing":
        raise ValueError("no entry for 'nothing'")
    return f"{word}: a word"


def _lookup_first(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] != "tool":
        return tool_call("lookup", {"word": messages[-1]["content"]}, id="call-look")
    return f"found: {messages[-1]['content']}"


_held = Agent(name="held", model=FunctionModel(_lookup_first), tools=[lookup])
"""A workflow that looks its input up with a tool that waits for :data:`HELD`."""


def served() -> list[Assistant]:
    """The test servers' assistants, and ``tooled`` and ``untold`` (a LangGraph application
    with a tool, with and without LangGraph's ``ToolCallTransformer``)."""
    tools = [
        Assistant.of(tooled, assistant_id="tooled"),
        Assistant.of(untold, assistant_id="untold"),
        Assistant.of(_held, assistant_id="held"),
    ]
    return [*fixtures.served(), *tools]


async def _events(thread: Any, channels: list[str], until: str) -> list[Any]:
    """The events of ``channels`` as ``(method, namespace, data)`` until a root lifecycle
    event ``until``."""
    seen: list[Any] = []
    async for event in thread.subscribe(channels):
        params = event["params"]
        seen.append((event["method"], params["namespace"], params["data"]))
        if event["method"] == "lifecycle" and params["data"]["event"] == until:
            if not params["namespace"]:
                return seen
    return seen


async def test_a_run_streams_its_values_updates_messages_and_lifecycle(app_sdk: Any) -> None:
    async with app_sdk.threads.stream(assistant_id="chat") as thread:
        watch = asyncio.create_task(
            _events(thread, ["lifecycle", "values", "updates", "messages", "custom"], "completed")
        )
        started = await thread.run.start(input=USER)
        output = await thread.output.with_timeout(30)
        seen = await asyncio.wait_for(watch, 30)
    assert [(m["type"], m["content"]) for m in output["messages"]] == [
        ("human", "hi there"),
        ("ai", "you said: hi there"),
    ]
    assert output["turns"] == 1
    methods = [method for method, _, _ in seen]
    assert methods[0] == "lifecycle" and seen[0][2] == {"event": "running", "graph_name": "chat"}
    assert seen[-1][2] == {"event": "completed", "graph_name": "chat"}
    assert ("custom", [], {"payload": {"progress": "replying"}}) in seen
    updates = [data for method, _, data in seen if method == "updates"]
    assert [u["node"] for u in updates] == ["reply"]
    assert updates[0]["values"]["turns"] == 1
    assert [method for method in methods if method == "values"]  # each step's state
    streamed = [data for method, _, data in seen if method == "messages"]
    answer = output["messages"][-1]
    assert streamed[0] == {"event": "message-start", "role": "ai", "id": answer["id"]}
    deltas = [d["delta"]["text"] for d in streamed if d["event"] == "content-block-delta"]
    assert "".join(deltas) == "you said: hi there"
    assert streamed[-2:] == [
        {"event": "content-block-finish", "index": 0}
        | {"content": {"type": "text", "text": "you said: hi there"}},
        {"event": "message-finish"},
    ]
    runs = await app_sdk.runs.list(thread.thread_id)
    assert [r["run_id"] for r in runs] == [started["run_id"]]
    assert runs[0]["status"] == "success"


async def test_an_interrupt_is_answered_with_run_respond(app_sdk: Any) -> None:
    async with app_sdk.threads.stream(assistant_id="review") as thread:
        await thread.run.start(input=USER)
        async with asyncio.timeout(30):
            while not thread.interrupted:  # noqa: ASYNC110 (a plain attribute of the SDK's)
                await asyncio.sleep(0.01)
        pending = (await app_sdk.threads.get_state(thread.thread_id))["interrupts"]
        assert [i["interrupt_id"] for i in thread.interrupts] == [pending[0]["id"]]
        await thread.run.respond("approved")
        output = await thread.output.with_timeout(30)
    assert output["verdict"] == "approved"
    assert output["messages"][-1]["content"] == "verdict: approved"


async def test_a_workflow_runs_on_a_thread_stream(app_sdk: Any) -> None:
    async with app_sdk.threads.stream(assistant_id="counter") as thread:
        await thread.run.start(input={"messages": [{"role": "user", "content": "one two"}]})
        output = await thread.output.with_timeout(30)
    assert output["messages"][-1]["content"]
    state = await app_sdk.threads.get_state(thread.thread_id)
    assert output == state["values"]


STARTED = {"args": "", "index": 0}
"""What a tool call chunk's block starts with besides its id and name."""


def _said(messages: Any) -> list[Any]:
    return [(m["type"], m["content"]) for m in messages]


async def _tool_run(client: Any, assistant: str, text: str) -> tuple[Any, list[Any], Any]:
    """A run of ``assistant`` told ``text``: its output, its tools and messages events until
    it completes, and its first tool call as the SDK's ``thread.tool_calls`` gives it (name,
    input, and its output or the error it failed with)."""

    async def first_call(thread: Any) -> Any:
        handles = [handle async for handle in thread.tool_calls]  # until the run ends
        if not handles:
            return None
        try:
            return handles[0].name, handles[0].input, await handles[0].output
        except Exception as exc:  # a tool-error fails its handle's output
            return handles[0].name, handles[0].input, exc

    async with client.threads.stream(assistant_id=assistant) as thread:
        watch = asyncio.create_task(
            _events(thread, ["tools", "messages", "lifecycle"], "completed")
        )
        call = asyncio.create_task(first_call(thread))
        await thread.run.start(input={"messages": [{"role": "user", "content": text}]})
        output = await thread.output.with_timeout(30)
        seen = await asyncio.wait_for(watch, 30)
        called = await asyncio.wait_for(call, 30)
    return output, seen, called


async def test_a_langgraph_tool_call_streams_on_the_tools_and_messages_channels(
    app_sdk: Any,
) -> None:
    output, seen, called = await _tool_run(app_sdk, "tooled", "add 2 3")
    assert _said(output["messages"])[1:] == [("ai", ""), ("tool", "5"), ("ai", "the tool said: 5")]
    tools = [data for method, _, data in seen if method == "tools"]
    assert tools[0] == {"event": "tool-started", "tool_call_id": "call-1", "tool_name": "add"} | {
        "input": {"a": 2, "b": 3}
    }
    assert [t["event"] for t in tools] == ["tool-started", "tool-finished"]
    result = tools[1]["output"]
    assert (result["type"], result["content"], result["tool_call_id"]) == ("tool", "5", "call-1")
    assert called == ("add", {"a": 2, "b": 3}, result)
    root = [data for method, ns, data in seen if method == "messages" and not ns]
    asked = output["messages"][1]["id"]
    assert root[:6] == [
        {"event": "message-start", "role": "ai", "id": asked},
        {"event": "content-block-start", "index": 0}
        | {"content": {"type": "tool_call_chunk", "id": "call-1", "name": "add"} | STARTED},
        {"event": "content-block-delta", "index": 0}
        | {"delta": {"type": "tool-call-delta", "args": '{"a": 2, '}},
        {"event": "content-block-delta", "index": 0}
        | {"delta": {"type": "tool-call-delta", "args": '"b": 3}'}},
        {"event": "content-block-finish", "index": 0}
        | {
            "content": {
                "type": "tool_call",
                "id": "call-1",
                "name": "add",
                "args": {"a": 2, "b": 3},
            }
        },
        {"event": "message-finish"},
    ]
    assert root[6]["event"] == "message-start" and root[-1] == {"event": "message-finish"}
    mirrored = [(ns, data) for method, ns, data in seen if method == "messages" and ns]
    assert {tuple(ns) for ns, _ in mirrored} == {("tools:call-1",)}
    assert result["id"] is None  # the state's reducer names it later: the mirror names it
    assert mirrored[0][1] == {"event": "message-start", "role": "tool"} | {
        "id": "tool-call-1",
        "tool_call_id": "call-1",
    }
    assert mirrored[3][1] == {"event": "content-block-finish", "index": 0} | {
        "content": {"type": "text", "text": "5"}
    }


async def test_a_langgraph_tool_that_raises_is_a_tool_error(app_sdk: Any) -> None:
    output, seen, called = await _tool_run(app_sdk, "tooled", "divide 1 0")
    assert called[:2] == ("divide", {"a": 1, "b": 0})
    assert "division by zero" in str(called[2])  # the SDK fails the call's output
    tools = [data for method, _, data in seen if method == "tools"]
    assert [t["event"] for t in tools] == ["tool-started", "tool-error"]
    assert tools[1]["tool_call_id"] == "call-1"
    assert "division by zero" in tools[1]["message"]
    assert "division by zero" in output["messages"][2]["content"]  # the model read why


async def test_a_langgraph_application_without_the_tool_transformer_sends_no_tools(
    app_sdk: Any,
) -> None:
    """As LangGraph's server: the ``tools`` channel is an application's opt-in; its tool
    call's arguments are still on ``messages``."""
    output, seen, called = await _tool_run(app_sdk, "untold", "add 2 3")
    assert output["messages"][-1]["content"] == "the tool said: 5"
    assert called is None
    assert [method for method, _, _ in seen if method == "tools"] == []
    finished = [
        d["content"] for m, _, d in seen if m == "messages" and d["event"] == "content-block-finish"
    ]
    assert {
        "type": "tool_call",
        "id": "call-1",
        "name": "add",
        "args": {"a": 2, "b": 3},
    } in finished


async def test_a_workflows_tool_call_streams_on_the_tools_and_messages_channels(
    app_sdk: Any,
) -> None:
    output, seen, called = await _tool_run(app_sdk, "counter", "one two three")
    assert output["messages"][-1]["content"] == "3 words"
    asked = next(m for m in output["messages"] if m["type"] == "ai" and m.get("tool_calls"))
    ident = asked["tool_calls"][0]["id"]
    tools = [data for method, _, data in seen if method == "tools"]
    assert tools[0] == {"event": "tool-started", "tool_call_id": ident} | {
        "tool_name": "word_count",
        "input": {"text": "one two three"},
    }
    assert tools[1]["event"] == "tool-finished" and tools[1]["tool_call_id"] == ident
    result = next(m for m in output["messages"] if m["type"] == "tool")
    assert (tools[1]["output"]["type"], tools[1]["output"]["content"]) == ("tool", "3")
    assert tools[1]["output"]["id"] == result["id"]  # the id the thread's values give it
    mirrored = [(ns, data) for method, ns, data in seen if method == "messages" and ns]
    assert mirrored[0] == (
        [f"tools:{ident}"],
        {"event": "message-start", "role": "tool", "id": result["id"], "tool_call_id": ident},
    )
    assert called == ("word_count", {"text": "one two three"}, tools[1]["output"])
    streamed = [data for method, ns, data in seen if method == "messages" and not ns]
    finished = [d["content"] for d in streamed if d["event"] == "content-block-finish"]
    call = {"type": "tool_call", "id": ident, "name": "word_count"}
    assert call | {"args": {"text": "one two three"}} in finished
    assert {"type": "text", "text": "3 words"} in finished


async def test_a_workflows_tool_call_is_told_started_while_it_runs(app_sdk: Any) -> None:
    """``tool-started`` comes as the call starts, with the model's call id; its end follows
    once the tool returns."""
    HELD.clear()
    async with app_sdk.threads.stream(assistant_id="held") as thread:
        seen: list[Any] = []

        async def watch() -> None:
            async for event in thread.subscribe(["tools", "lifecycle"]):
                seen.append(event["params"]["data"])
                data = event["params"]["data"]
                if event["method"] == "lifecycle" and data["event"] == "completed":
                    if not event["params"]["namespace"]:
                        return

        watching = asyncio.create_task(watch())
        await thread.run.start(input={"messages": [{"role": "user", "content": "apple"}]})
        for _ in range(300):  # the tool waits: its start is told before it ends
            if any(e.get("event") == "tool-started" for e in seen):
                break
            await asyncio.sleep(0.05)
        told = [e for e in seen if str(e.get("event", "")).startswith("tool-")]
        assert told == [
            {"event": "tool-started", "tool_call_id": "call-look", "tool_name": "lookup"}
            | {"input": {"word": "apple"}}
        ]
        HELD.set()
        output = await thread.output.with_timeout(30)
        await asyncio.wait_for(watching, 30)
    assert output["messages"][-1]["content"] == "found: apple: a word"
    ended = [e for e in seen if e.get("event") == "tool-finished"]
    assert [e["tool_call_id"] for e in ended] == ["call-look"]
    assert ended[0]["output"]["content"] == "apple: a word"


async def test_a_workflows_failing_tool_is_a_tool_error(app_sdk: Any) -> None:
    HELD.set()
    output, seen, called = await _tool_run(app_sdk, "held", "nothing")
    tools = [data for method, _, data in seen if method == "tools"]
    assert [t["event"] for t in tools] == ["tool-started", "tool-error"]
    assert tools[1]["tool_call_id"] == "call-look"
    assert "no entry for 'nothing'" in tools[1]["message"]
    assert called[:2] == ("lookup", {"word": "nothing"})
    assert "no entry for 'nothing'" in str(called[2])  # the SDK fails the call's output
    assert "no entry for 'nothing'" in output["messages"][-1]["content"]  # the model read it


async def test_a_stream_opened_on_a_thread_that_ran_replays_its_last_run(app_sdk: Any) -> None:
    thread_id = (await app_sdk.threads.create())["thread_id"]
    await app_sdk.runs.wait(thread_id, "chat", input=USER)
    async with app_sdk.threads.stream(thread_id, assistant_id="chat") as thread:
        seen = await asyncio.wait_for(_events(thread, ["lifecycle"], "completed"), 30)
        assert (
            await thread.output.with_timeout(30)
            == (await app_sdk.threads.get_state(thread_id))["values"]
        )
    assert [data["event"] for _, _, data in seen] == ["running", "completed"]


async def test_a_failed_run_fails_the_output(app_sdk: Any) -> None:
    async with app_sdk.threads.stream(assistant_id="chat") as thread:
        await thread.run.start(input={"messages": []})  # its node reads the last message
        with pytest.raises(RuntimeError, match="Run errored"):
            await thread.output.with_timeout(30)


def _post(url: str, path: str, body: Any, **headers: str) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, headers=headers, timeout=30)


def test_the_api_key_guards_both_routes(store: TrajectorySaver) -> None:
    with LiveServer(create_app(served(), store=store, api_key="s3cret")) as live:
        start = {"id": 1, "method": "run.start", "params": {"assistant_id": "chat"}}
        for path, body in (
            ("/threads/t1/commands", start),
            ("/threads/t1/stream/events", {"channels": ["lifecycle"]}),
        ):
            refused = _post(live.url, path, body)
            assert refused.status_code == 401, path
            assert "s3cret" not in refused.text
        answered = _post(
            live.url, "/threads/t1/commands", start | {"params": {}}, **{"x-api-key": "s3cret"}
        )
        assert answered.status_code == 422


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("commands", {"method": "run.start", "params": {"assistant_id": "chat"}}, "id"),
        ("commands", {"id": True, "method": "run.start"}, "id"),
        ("commands", {"id": 1, "method": "run.start", "params": {}}, "params.assistant_id"),
        ("commands", {"id": 1, "method": "run.start", "params": []}, "params"),
        ("commands", {"id": 1, "method": "state.get", "params": {}}, "method"),
        ("commands", {"id": 1, "method": "run.start", "extra": 1}, "body.extra"),
        (
            "commands",
            {"id": 1, "method": "run.start", "params": {"assistant_id": "chat", "inptu": {}}},
            "params.inptu",
        ),
        ("commands", {"id": 1, "method": "input.respond", "params": {}}, "params.interrupt_id"),
        (
            "commands",
            {"id": 1, "method": "input.respond", "params": {"responses": []}},
            "params.responses",
        ),
        (
            "commands",
            {"id": 1, "method": "input.respond", "params": {"interrupt_id": "x", "namespace": 3}},
            "params.namespace",
        ),
        ("stream/events", {}, "channels"),
        ("stream/events", {"channels": ["values", "nope"]}, "channels"),
        ("stream/events", {"channels": ["values"], "depth": -1}, "depth"),
        ("stream/events", {"channels": ["values"], "since": "x"}, "since"),
        ("stream/events", {"channels": ["values"], "namespaces": [[1]]}, "namespaces[0]"),
        ("stream/events", {"channels": ["values"], "filter": 1}, "body.filter"),
    ],
)
def test_bad_input_is_a_422_naming_the_field(
    app_server: LiveServer, path: str, body: Any, field: str
) -> None:
    answer = _post(app_server.url, f"/threads/t1/{path}", body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["message"].startswith(f"{field}:"), answer.text


async def test_an_unknown_assistant_or_thread_is_refused(app_server: LiveServer) -> None:
    client = get_client(url=app_server.url, api_key=None)
    try:
        async with client.threads.stream(assistant_id="nobody") as thread:
            with pytest.raises(httpx.HTTPStatusError) as refused:
                await thread.run.start(input=USER)
        assert refused.value.response.status_code == 404
    finally:
        await client.aclose()
    odd = _post(app_server.url, "/threads/a%20b/stream/events", {"channels": ["values"]})
    assert odd.status_code == 422 and "thread_id" in odd.json()["message"]
    stale = {"id": 1, "method": "input.respond", "params": {"interrupt_id": "x", "response": 1}}
    assert _post(app_server.url, "/threads/nowhere/commands", stale).status_code == 404


async def test_a_stream_opened_before_its_thread_exists_gets_its_first_run(
    app_sdk: Any,
) -> None:
    """As on LangGraph's server: the SDK's projections may be opened on the thread id it
    minted before ``run.start`` makes the thread."""
    async with app_sdk.threads.stream(assistant_id="chat") as thread:
        watching = asyncio.create_task(_events(thread, ["values", "lifecycle"], "completed"))
        await asyncio.sleep(0.2)  # the stream is open on a thread that is not there yet
        assert not watching.done()
        await thread.run.start(input=USER)
        seen = await asyncio.wait_for(watching, 30)
    values = [data for method, _, data in seen if method == "values"]
    assert values and values[-1]["messages"][-1]["type"] == "ai"


async def test_tools_is_a_thread_stream_channel_not_a_runs_stream_mode(
    app_server: LiveServer, app_sdk: Any
) -> None:
    """The runs routes refuse ``stream_mode="tools"`` (as LangGraph's server does), and a
    workflow's run started there, joined in every mode, carries no tool events."""
    thread = (await app_sdk.threads.create())["thread_id"]
    body = {"assistant_id": "counter", "input": USER, "stream_mode": ["values", "tools"]}
    refused = _post(app_server.url, f"/threads/{thread}/runs", body)
    assert refused.status_code == 422
    assert "'tools' is not served" in refused.json()["message"]
    run = await app_sdk.runs.create(thread, "counter", input=USER)
    parts = [p.event async for p in app_sdk.runs.join_stream(thread, run["run_id"])]
    assert "values" in parts and "tools" not in parts


def _numbered(url: str, thread_id: str, body: dict[str, Any]) -> list[tuple[int, str]]:
    """``(seq, method)`` of the events a raw ``stream/events`` connection sends until the
    root lifecycle ``completed``."""
    got: list[tuple[int, str]] = []
    with httpx.stream(
        "POST", f"{url}/threads/{thread_id}/stream/events", json=body, timeout=30
    ) as answer:
        for line in answer.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line.removeprefix("data:"))
            got.append((event["seq"], event["method"]))
            data, namespace = event["params"]["data"], event["params"]["namespace"]
            if event["method"] == "lifecycle" and not namespace and data["event"] == "completed":
                return got
    return got


async def test_every_event_is_numbered_whatever_a_connection_filters(
    app_server: LiveServer, app_sdk: Any
) -> None:
    """``seq`` numbers every event of the thread, the filter applied after, so a client that
    widens its channels reconnects with ``since=`` and gets what follows, no event twice."""
    thread_id = (await app_sdk.threads.create())["thread_id"]
    await app_sdk.runs.wait(thread_id, "chat", input=USER)
    every = ["lifecycle", "values", "updates", "messages", "custom"]
    whole = await asyncio.to_thread(_numbered, app_server.url, thread_id, {"channels": every})
    numbers = [seq for seq, _ in whole]
    assert numbers == sorted(set(numbers)) and len(whole) > 4
    narrow = await asyncio.to_thread(
        _numbered, app_server.url, thread_id, {"channels": ["lifecycle"]}
    )
    assert narrow == [(seq, method) for seq, method in whole if method == "lifecycle"]
    since = whole[len(whole) // 2][0]
    wider = await asyncio.to_thread(
        _numbered, app_server.url, thread_id, {"channels": every, "since": since}
    )
    assert wider == [(seq, method) for seq, method in whole if seq > since]
