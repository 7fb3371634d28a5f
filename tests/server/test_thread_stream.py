"""``client.threads.stream``, the langgraph-sdk's thread stream protocol (``POST
/threads/{id}/commands`` and ``POST /threads/{id}/stream/events``), served for a LangGraph
application and an aworld-graph workflow, with the real SDK client (issue 37): a run's
output and events (its model's answer streamed on the messages channel), an interrupt answered with ``run.respond``, a thread stream opened on a
thread that already ran, the API key, and bad input as a 422 naming the field."""

# ruff: noqa: F811 (app_server's fixtures, imported here, are the tests' parameters)

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import create_app
from tests.server.app_server import app_sdk, app_server, served  # noqa: F401 (fixtures)
from tests.server.conftest import LiveServer

USER = {"messages": [{"role": "user", "content": "hi there"}]}


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
    gone = _post(app_server.url, "/threads/nowhere/stream/events", {"channels": ["values"]})
    assert gone.status_code == 404
    stale = {"id": 1, "method": "input.respond", "params": {"interrupt_id": "x", "response": 1}}
    assert _post(app_server.url, "/threads/nowhere/commands", stale).status_code == 404


async def test_the_websocket_transport_is_refused_at_its_handshake(app_server: LiveServer) -> None:
    """Only the SSE transport is served: ``transport="websocket"`` gets a 403 handshake."""
    url = app_server.url.replace("http://", "ws://") + "/threads/t1/stream/events"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url):
            pass
    assert refused.value.response.status_code == 403
