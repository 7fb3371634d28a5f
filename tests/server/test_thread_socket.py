"""``client.threads.stream(..., transport="websocket")``: the thread stream protocol over a
WebSocket at ``/threads/{id}/stream/events`` (commands and events on one connection), with the
real ``langgraph-sdk`` client and raw ``websockets`` connections against a real uvicorn server
(issue 37): a run streamed and an interrupt answered; ``subscription.subscribe`` (with its
replay), ``subscription.unsubscribe`` and ``agent.getTree``; bad frames answered with the
protocol's error frame naming the field; the API key and a page's origin checked at the
handshake. Side by side with LangGraph's own server (``langgraph dev``), a run and an
interrupt over the WebSocket end alike, and malformed frames get the same error codes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import create_app
from tests.server.app_server import served
from tests.server.conftest import LiveServer
from tests.server.test_thread_stream_vs_langgraph_dev import said
from tests.server.test_vs_langgraph_dev import Side, both, user

KEY = "socket-test-key"
HEADERS = {"x-api-key": KEY}
USER = {"messages": [{"role": "user", "content": "hi there"}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server (with an API key) for the module's in-process tests."""
    saver = TrajectorySaver(tmp_path_factory.mktemp("socket") / "server.db")
    try:
        with LiveServer(create_app(served(), store=saver, api_key=KEY)) as live:
            yield live
    finally:
        saver.close()


@pytest.fixture
async def sdk(server: LiveServer) -> AsyncIterator[Any]:
    client = get_client(url=server.url, api_key=KEY)
    yield client
    await client.aclose()


def socket_url(url: str, thread_id: str) -> str:
    return url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"


class Socket:
    """A raw connection: commands sent, answers and events read in order."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.next_id = 100

    async def frame(self) -> dict[str, Any]:
        return dict(json.loads(await asyncio.wait_for(self.ws.recv(), 30)))

    async def call(
        self, method: str, params: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The answer to a command, and the events that came before it."""
        self.next_id += 1
        ident = self.next_id
        await self.ws.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        events = []
        while True:
            frame = await self.frame()
            if frame.get("type") != "event" and frame.get("id") == ident:
                return frame, events
            events.append(frame)

    async def until(self, method: str, event: str) -> list[dict[str, Any]]:
        """The events up to a root lifecycle ``event`` (when ``method`` is lifecycle)."""
        seen = []
        while True:
            frame = await self.frame()
            seen.append(frame)
            params = frame.get("params", {})
            if frame.get("method") == method and not params.get("namespace"):
                if method != "lifecycle" or params["data"]["event"] == event:
                    return seen


async def _thread(sdk: Any) -> str:
    return str((await sdk.threads.create())["thread_id"])


# -- the SDK over the WebSocket -----------------------------------------------------------


async def _watch(thread: Any, seen: list[Any]) -> None:
    async for event in thread.subscribe(["lifecycle", "values", "messages"]):
        params = event["params"]
        seen.append((event["method"], event.get("seq"), params["data"]))
        if event["method"] == "lifecycle" and params["data"]["event"] == "completed":
            return


async def test_a_run_streams_over_the_websocket(sdk: Any) -> None:
    # the SDK's client sends its API key over HTTP, not on the handshake: the stream's headers
    stream = sdk.threads.stream(assistant_id="chat", transport="websocket", headers=HEADERS)
    async with stream as thread:
        seen: list[Any] = []
        streams: list[Any] = []

        async def messages() -> None:  # ends with the run; each message's text is read after
            async for message in thread.messages:  # (awaiting it here would block this loop)
                streams.append(message)

        watch = asyncio.create_task(_watch(thread, seen))
        projection = asyncio.create_task(messages())
        started = await thread.run.start(input=USER)
        output = await thread.output.with_timeout(30)
        await asyncio.wait_for(watch, 30)
        await asyncio.wait_for(projection, 30)
        texts = [await asyncio.wait_for(s.text, 30) for s in streams]
    assert [(m["type"], m["content"]) for m in output["messages"]] == [
        ("human", "hi there"),
        ("ai", "you said: hi there"),
    ]
    assert seen[0] == ("lifecycle", 1, {"event": "running", "graph_name": "chat"})
    assert seen[-1][0] == "lifecycle" and seen[-1][2]["event"] == "completed"
    numbers = [seq for _, seq, _ in seen]
    assert numbers == sorted(set(numbers))
    deltas = [d["delta"]["text"] for m, _, d in seen if m == "messages" and "delta" in d]
    assert "".join(deltas) == "you said: hi there"
    assert texts == ["you said: hi there"]
    assert [r["run_id"] for r in await sdk.runs.list(thread.thread_id)] == [started["run_id"]]


async def test_an_interrupt_is_answered_over_the_websocket(sdk: Any) -> None:
    answered = await _review(sdk, HEADERS)
    assert len(answered["asked"]) == 1
    assert answered["output"] == [
        [["human", "hi"], ["ai", "verdict: approved"]],
        "approved",
    ]


# -- the protocol's commands on a raw connection ------------------------------------------


async def test_subscriptions_replay_filter_and_end(server: LiveServer, sdk: Any) -> None:
    """A subscription gets the current run's events it matches first (counted), then what
    follows, and only what it matches; once unsubscribed it gets nothing more."""
    thread_id = await _thread(sdk)
    await sdk.runs.wait(thread_id, "chat", input=USER)
    async with connect(socket_url(server.url, thread_id), additional_headers=HEADERS) as ws:
        sock = Socket(ws)
        answer, before = await sock.call("subscription.subscribe", {"channels": ["lifecycle"]})
        assert answer["result"]["replayed_events"] == len(before)
        if len(before) < 2:  # the socket had not read the run yet: its events follow, live
            before += await sock.until("lifecycle", "completed")
        lifecycle = [(e["method"], e["params"]["data"]["event"]) for e in before]
        assert lifecycle == [("lifecycle", "running"), ("lifecycle", "completed")]
        first = answer["result"]["subscription_id"]
        values, replay = await sock.call(
            "subscription.subscribe", {"channels": ["values"], "namespaces": [[]], "depth": 0}
        )
        assert values["result"]["replayed_events"] == len(replay) > 0
        assert {e["method"] for e in replay} == {"values"}
        gone, _ = await sock.call("subscription.unsubscribe", {"subscription_id": first})
        assert gone["type"] == "success" and gone["result"] == {}
        again, _ = await sock.call("subscription.unsubscribe", {"subscription_id": first})
        assert again["error"] == "no_such_subscription"
        await sdk.runs.create(thread_id, "chat", input=USER)
        later = await sock.until("values", "")
        assert {e["method"] for e in later} == {"values"}  # no lifecycle: unsubscribed
        assert later[0]["seq"] > replay[-1]["seq"]


async def test_every_connection_numbers_the_threads_events_alike(
    server: LiveServer, sdk: Any
) -> None:
    """``seq`` counts from the thread's first run whichever run a connection starts with, so
    a ``since`` one connection gave means the same on the next (the SDK passes its cursor
    on when it opens another): an SSE stream opened after the first run and a socket opened
    after the second number on from each other."""
    thread_id = await _thread(sdk)
    await sdk.runs.wait(thread_id, "chat", input=USER)
    body = {"channels": ["lifecycle", "values", "messages"]}
    path = f"/threads/{thread_id}/stream/events"
    async with httpx.AsyncClient(base_url=server.url, headers=HEADERS, timeout=30) as client:
        async with client.stream("POST", path, json=body) as answer:
            first = await _sse(answer.aiter_lines(), "completed")
    numbers = [e["data"]["seq"] for e in first]  # the run's last event is its completed
    await sdk.runs.wait(thread_id, "chat", input=USER)
    async with connect(socket_url(server.url, thread_id), additional_headers=HEADERS) as ws:
        sock = Socket(ws)
        answer, second = await sock.call("subscription.subscribe", body)
        if len(second) < len(first):  # the socket had not read the run yet: it follows
            second += await sock.until("lifecycle", "completed")
    assert [e["seq"] for e in second] == [n + numbers[-1] for n in numbers]
    assert [e["method"] for e in second] == [e["data"]["method"] for e in first]


async def test_the_agent_tree_names_the_runs_namespaces(server: LiveServer, sdk: Any) -> None:
    thread_id = await _thread(sdk)
    async with connect(socket_url(server.url, thread_id), additional_headers=HEADERS) as ws:
        sock = Socket(ws)
        none, _ = await sock.call("agent.getTree")
        assert none["type"] == "error" and none["error"] == "no_such_run"
        await sock.call("subscription.subscribe", {"channels": ["lifecycle", "updates"]})
        started, _ = await sock.call("run.start", {"assistant_id": "nested", "input": USER})
        assert started["type"] == "success" and started["result"]["run_id"]
        await sock.until("lifecycle", "completed")
        tree, _ = await sock.call("agent.getTree")
    root = tree["result"]["tree"]
    assert {k: root[k] for k in ("namespace", "status", "graph_name")} == {
        "namespace": [],
        "status": "completed",
        "graph_name": "nested",
    }
    assert [(c["graph_name"], c["status"]) for c in root["children"]] == [("inner", "completed")]
    assert root["children"][0]["namespace"][0].startswith("inner:")


async def test_an_interrupt_is_answered_on_the_socket_itself(server: LiveServer, sdk: Any) -> None:
    thread_id = await _thread(sdk)
    async with connect(socket_url(server.url, thread_id), additional_headers=HEADERS) as ws:
        sock = Socket(ws)
        await sock.call("subscription.subscribe", {"channels": ["lifecycle", "input"]})
        await sock.call("run.start", {"assistant_id": "review", "input": USER})
        seen = await sock.until("lifecycle", "interrupted")
        asked = [e["params"]["data"] for e in seen if e["method"] == "input.requested"]
        tree, _ = await sock.call("agent.getTree")
        assert tree["result"]["tree"]["status"] == "interrupted"
        params = {"interrupt_id": asked[0]["interrupt_id"], "response": "approved"}
        answered, _ = await sock.call("input.respond", params)
        assert answered["type"] == "success"
        await sock.until("lifecycle", "completed")
    state = await sdk.threads.get_state(thread_id)
    assert state["values"]["verdict"] == "approved"


def _command(ident: int, method: str, params: Any) -> str:
    return json.dumps({"id": ident, "method": method, "params": params})


BAD_FRAMES = [
    ("not json", None, "invalid_argument", "frame:"),
    ("[1, 2]", None, "invalid_argument", "body:"),
    ('{"method": "run.start"}', None, "invalid_argument", "id:"),
    ('{"id": 7}', 7, "invalid_argument", "method:"),
    (_command(8, "state.get", {}), 8, "unknown_command", "method:"),
    (_command(9, "run.start", 3), 9, "invalid_argument", "params:"),
    (_command(10, "run.start", {}), 10, "invalid_argument", "params.assistant_id:"),
    (
        _command(11, "subscription.subscribe", {"channels": ["x"]}),
        *(11, "invalid_argument", "params.channels:"),
    ),
    (
        _command(12, "subscription.unsubscribe", {}),
        *(12, "invalid_argument", "params.subscription_id:"),
    ),
    (
        _command(13, "subscription.subscribe", {"channels": ["values"], "depth": -1}),
        *(13, "invalid_argument", "params.depth:"),
    ),
    (
        _command(14, "input.respond", {"interrupt_id": "nope", "response": 1}),
        *(14, "no_such_interrupt", "params.interrupt_id:"),
    ),
]
"""Malformed frames, each with the id, error code and field of its answer. The first nine are
answered alike by LangGraph's server; it takes a bad ``depth`` as none (ours refuses it, as a
``stream/events`` body's), and an interrupt needs a thread that waits on one."""


async def test_bad_frames_get_error_frames_naming_the_field(server: LiveServer, sdk: Any) -> None:
    thread_id = await _thread(sdk)
    await sdk.runs.wait(thread_id, "chat", input=USER)
    async with connect(socket_url(server.url, thread_id), additional_headers=HEADERS) as ws:
        sock = Socket(ws)
        for frame, ident, code, field in BAD_FRAMES:
            await ws.send(frame)
            answer = await sock.frame()
            assert answer["type"] == "error", frame
            assert (answer["id"], answer["error"]) == (ident, code), (frame, answer)
            assert answer["message"].startswith(field), (frame, answer)
            assert "Traceback" not in answer["message"]
        await ws.send(_command(20, "subscription.unsubscribe", {"subscription_id": "x"}).encode())
        binary = await sock.frame()  # a binary frame is read as the text it holds
        assert (binary["id"], binary["error"]) == (20, "no_such_subscription")
        ok, _ = await sock.call("subscription.subscribe", {"channels": ["lifecycle"]})
        assert ok["type"] == "success"  # the socket still serves after them all


async def test_a_frame_too_large_or_too_deep_is_refused(server: LiveServer) -> None:
    deep: Any = "x"
    for _ in range(80):
        deep = [deep]
    async with connect(socket_url(server.url, "t1"), additional_headers=HEADERS) as ws:
        sock = Socket(ws)
        await ws.send(_command(1, "run.start", {"assistant_id": "chat", "input": deep}))
        too_deep = await sock.frame()
        assert (too_deep["id"], too_deep["error"]) == (1, "invalid_argument")
        assert too_deep["message"].startswith("params nests deeper than")
        await ws.send(_command(2, "run.start", {"assistant_id": "x" * (1 << 20)}))
        too_large = await sock.frame()
        assert (too_large["id"], too_large["error"]) == (None, "invalid_argument")
        assert too_large["message"].startswith("frame: over")


async def test_the_socket_only_commands_are_refused_over_http(server: LiveServer) -> None:
    body = {"id": 1, "method": "subscription.subscribe", "params": {"channels": ["values"]}}
    async with httpx.AsyncClient(base_url=server.url, headers=HEADERS) as client:
        answer = await client.post("/threads/t1/commands", json=body)
    assert answer.status_code == 422
    assert answer.json()["message"].startswith("method:")
    assert "WebSocket" in answer.json()["message"]


# -- the handshake ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-api-key": "wrong"},
        {"authorization": "Bearer wrong"},
        HEADERS | {"origin": "http://evil.example"},
    ],
    ids=["no-key", "wrong-key", "wrong-bearer", "cross-site"],
)
async def test_a_handshake_without_the_key_or_from_elsewhere_is_refused(
    server: LiveServer, headers: dict[str, str]
) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(socket_url(server.url, "t1"), additional_headers=headers):
            pass
    assert refused.value.response.status_code == 403
    assert KEY.encode() not in refused.value.response.body


async def test_a_handshake_with_the_key_or_from_its_own_page_is_served(server: LiveServer) -> None:
    own = server.url
    for headers in (HEADERS, {"authorization": f"Bearer {KEY}", "origin": own}):
        async with connect(socket_url(server.url, "t1"), additional_headers=headers) as ws:
            answer, _ = await Socket(ws).call("agent.getTree")
            assert answer["error"] == "no_such_run"


async def test_a_malformed_thread_id_is_refused_at_the_handshake(server: LiveServer) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(socket_url(server.url, "bad%20id"), additional_headers=HEADERS):
            pass
    assert refused.value.response.status_code == 403


# -- the thread stream's state updates (threads.join_stream) -------------------------------


async def _sse(lines: AsyncIterator[str], until: str) -> list[dict[str, Any]]:
    """The events ``{"id", "event", "data"}`` of a raw SSE stream up to one whose data holds
    ``until``."""
    told: list[dict[str, Any]] = []
    event: dict[str, Any] = {}
    async with asyncio.timeout(30):
        async for line in lines:
            if not line:
                told.append(event)
                if until in json.dumps(event.get("data")):
                    return told
                event = {}
                continue
            name, _, value = line.partition(": ")
            event[name] = json.loads(value) if name == "data" else value
    raise AssertionError(f"the stream ended before {until!r}: {told}")


async def test_a_state_update_has_an_event_id_to_resume_after(server: LiveServer, sdk: Any) -> None:
    """Each ``state_update`` has an id, as LangGraph's server gives one: ``Last-Event-ID``
    set to it resumes with the runs after the edit, not the run before it."""
    thread_id = await _thread(sdk)
    await sdk.runs.wait(thread_id, "chat", input=USER)
    run_id = (await sdk.runs.list(thread_id))[0]["run_id"]
    query = {"stream_mode": "lifecycle,state_update"}
    path = f"/threads/{thread_id}/stream"
    async with httpx.AsyncClient(base_url=server.url, headers=HEADERS, timeout=30) as client:
        async with client.stream("GET", path, params=query) as answer:  # watching from here
            lines = answer.aiter_lines()
            edits = []
            for text in ("edited once", "edited twice"):
                message = {"role": "ai", "content": text}
                await sdk.threads.update_state(thread_id, {"messages": [message]}, as_node="reply")
                edits.append((await _sse(lines, text))[-1])
        assert [e["event"] for e in edits] == ["state_update", "state_update"]
        ids = [e["id"] for e in edits]
        assert all(i.startswith(f"{run_id}:") for i in ids), ids
        assert int(ids[1].rsplit(":", 1)[1]) == int(ids[0].rsplit(":", 1)[1]) + 1
        later = await sdk.runs.create(thread_id, "chat", input=USER)
        resume = {"last-event-id": ids[0]}
        async with client.stream("GET", path, params=query, headers=resume) as answer:
            told = await _sse(answer.aiter_lines(), "run_done")
    assert [e["event"] for e in told] == ["metadata", "metadata"]
    assert [e["data"]["run_id"] for e in told] == [later["run_id"]] * 2  # not the run before


# -- side by side with langgraph dev ----------------------------------------------------------


async def _chat(client: Any) -> dict[str, Any]:
    async with client.threads.stream(assistant_id="chat", transport="websocket") as thread:
        seen: list[Any] = []

        async def control() -> None:
            async for event in thread.subscribe(["lifecycle", "input", "messages"]):
                params = event["params"]
                if params["namespace"]:
                    continue  # a node's: LangGraph's server names each node's
                data = params["data"]
                seen.append([event["method"], data.get("event") or data.get("interrupt_id")])
                if data.get("event") == "completed":
                    return

        watch = asyncio.create_task(control())
        await thread.run.start(input=user("hi"))
        output = await thread.output.with_timeout(30)
        await asyncio.wait_for(watch, 30)
    return {"output": said(output), "events": seen}


async def _review(client: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """A run stopped at a person, answered: the interrupts asked, and the output."""
    stream = client.threads.stream(assistant_id="review", transport="websocket", headers=headers)
    async with stream as thread:
        await thread.run.start(input=user("hi"))
        async with asyncio.timeout(30):
            while not thread.interrupted:  # noqa: ASYNC110 (a plain attribute of the SDK's)
                await asyncio.sleep(0.01)
        asked = [i["interrupt_id"] for i in thread.interrupts]
        await thread.run.respond("approved")
        output = await thread.output.with_timeout(30)
    return {"asked": asked, "output": [said(output), output.get("verdict")]}


async def _frames(client: Any) -> list[Any]:
    """What a raw socket answers to malformed frames and to the tree and subscription
    commands of a thread with no run (the codes; the messages are each server's own)."""
    url = str(client.http.client.base_url).rstrip("/")
    thread_id = (await client.threads.create())["thread_id"]
    got = []
    async with connect(socket_url(url, thread_id)) as ws:
        for frame, ident, _, _ in BAD_FRAMES[:9]:
            await ws.send(frame)
            answer = json.loads(await asyncio.wait_for(ws.recv(), 30))
            got.append([answer["type"], answer["id"], answer["error"], ident])
        sock = Socket(ws)
        for method, params in [
            ("agent.getTree", {}),
            ("subscription.unsubscribe", {"subscription_id": "none"}),
            ("subscription.subscribe", {"channels": ["lifecycle"]}),
        ]:
            answer, _ = await sock.call(method, params)
            got.append([answer["type"], answer.get("error"), sorted(answer.get("result", {}))])
    return got


@pytest.mark.slow
async def test_a_run_over_the_websocket_ends_alike(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _chat)
    assert peer["output"][-1] == ["ai", "you said: hi"]
    assert peer["events"][0] == ["lifecycle", "running"]
    assert ours == peer


@pytest.mark.slow
async def test_an_interrupt_answered_over_the_websocket_goes_on_alike(
    sides: dict[str, Side],
) -> None:
    ours, peer = await both(sides, _review)
    assert peer["output"][1] == "approved"
    assert ours == peer


@pytest.mark.slow
async def test_bad_frames_and_socket_commands_are_answered_alike(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _frames)
    assert peer[-1] == ["success", None, ["replayed_events", "subscription_id"]]
    assert ours == peer
