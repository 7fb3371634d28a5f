"""A2A with the ``a2a-sdk`` client against a real server: each workflow is an agent whose
tasks are the server's runs on its threads (the LangGraph API sees the same ones)."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import shutil
import signal
import socket
import sqlite3
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from langgraph_sdk import get_client

from aworld_graph import Agent, Human, Swarm, edge
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import Assistant, create_app
from aworld_graph.testing import FunctionModel
from tests.server import apps
from tests.server.conftest import LiveServer, assistants
from tests.server.test_restart import Served, processes  # noqa: F401 (its fixture)

S = pb.TaskState
KEY = "a2a-test-key-0123456789"


def _noted(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    return f"noted ({len(messages)} messages)"


_talker = Agent(name="talker", model=FunctionModel(_noted))
_next = Human(name="next", prompt="Anything else? (say bye to finish)")
conversation = Swarm(
    _talker,
    _next,
    topology=[_talker, _next],
    edges=[edge(_next, _talker, '"bye" not in lower(context.next)', max_rounds=50)],
    name="conversation",
)
"""A task of many turns: each answer asks for the next message (``input-required``) until
'bye' (``tests.server.test_a2a:conversation``, also the workflow the conformance kit ran)."""


def _message(text: str, **ids: str) -> pb.SendMessageRequest:
    message = pb.Message(message_id=f"m-{text[:12]}", role=pb.Role.ROLE_USER, **ids)
    message.parts.append(pb.Part(text=text))
    return pb.SendMessageRequest(message=message)


async def _client(url: str, binding: str = "JSONRPC", *, streaming: bool = False, key: str = ""):
    http = httpx.AsyncClient(headers={"x-api-key": key} if key else {}, timeout=30)
    config = ClientConfig(
        streaming=streaming, supported_protocol_bindings=[binding], httpx_client=http
    )
    client = await create_client(url, config)
    _HTTP[id(client)] = http
    return client


_HTTP: dict[int, httpx.AsyncClient] = {}
"""Each client's HTTP client, which the test closes with it (the SDK leaves a given one open)."""


async def _close(client: Any) -> None:
    await client.close()
    await _HTTP.pop(id(client)).aclose()


async def _sent(client: Any, request: pb.SendMessageRequest) -> list[Any]:
    return [event async for event in client.send_message(request)]


def _task(events: list[Any]) -> pb.Task:
    """The task a (non-streamed) send answered."""
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


def _kinds(events: list[Any]) -> list[str]:
    return [e.WhichOneof("payload") for e in events]


async def _until(client: Any, task_id: str, done: Callable[[pb.Task], bool]) -> pb.Task:
    for _ in range(2000):  # bounded: the run moves within a few steps
        task = await client.get_task(pb.GetTaskRequest(id=task_id))
        if done(task):
            return task
        await asyncio.sleep(0.01)
    raise AssertionError(f"task {task_id} stayed {S.Name(task.status.state)}")


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_send_get_list_on_a_thread_the_langgraph_api_sees(
    server: LiveServer, binding: str
) -> None:
    client = await _client(f"{server.url}/a2a/chat", binding)
    first = _task(await _sent(client, _message("hello there")))
    assert first.status.state == S.TASK_STATE_COMPLETED
    assert first.status.message.parts[0].text == "turn 1: hello there"
    assert [a.parts[0].text for a in first.artifacts] == ["turn 1: hello there"]
    # the same context is the thread's next turn
    second = _task(await _sent(client, _message("and again", context_id=first.context_id)))
    assert second.context_id == first.context_id and second.id != first.id
    assert second.status.message.parts[0].text == "turn 2: hello there / and again"

    got = await client.get_task(pb.GetTaskRequest(id=first.id, history_length=1))
    assert got.status.state == S.TASK_STATE_COMPLETED and len(got.history) == 1
    # the first task reads as it ended, not as the thread is after the second
    got = await client.get_task(pb.GetTaskRequest(id=first.id))
    assert [a.parts[0].text for a in got.artifacts] == ["turn 1: hello there"]
    assert got.status.message.parts[0].text == "turn 1: hello there"
    assert [m.parts[0].text for m in got.history] == ["hello there", "turn 1: hello there"]
    listed = await client.list_tasks(pb.ListTasksRequest(context_id=first.context_id))
    assert [t.id for t in listed.tasks] == [second.id, first.id] and listed.total_size == 2
    paged = await client.list_tasks(pb.ListTasksRequest(page_size=1))
    assert len(paged.tasks) == 1 and paged.next_page_token
    with pytest.raises(TaskNotFoundError):
        await client.get_task(pb.GetTaskRequest(id="no-such-task"))
    with pytest.raises(UnsupportedOperationError):  # an ended task takes no more messages
        await _sent(client, _message("more", task_id=first.id))
    await _close(client)

    sdk = get_client(url=server.url, api_key=None)
    runs = await sdk.runs.list(first.context_id)
    assert {r["run_id"] for r in runs} == {first.id, second.id}  # a task is a run
    assert (await sdk.threads.get_state(first.context_id))["values"]["answer"].startswith("turn 2")
    await sdk.aclose()


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_stream_a_task(server: LiveServer, binding: str) -> None:
    client = await _client(f"{server.url}/a2a/counter", binding, streaming=True)
    events = await _sent(client, _message("three little words"))
    kinds = _kinds(events)
    assert kinds[0] == "task" and kinds[-2:] == ["artifact_update", "status_update"], kinds
    assert events[0].task.status.state in (S.TASK_STATE_SUBMITTED, S.TASK_STATE_WORKING)
    assert events[-2].artifact_update.artifact.parts[0].text == "3 words"
    assert events[-1].status_update.status.state == S.TASK_STATE_COMPLETED
    assert events[-1].status_update.task_id == events[0].task.id
    got = await client.get_task(pb.GetTaskRequest(id=events[0].task.id))
    assert got.status.state == S.TASK_STATE_COMPLETED
    await _close(client)


async def test_no_extended_card_is_declared_so_asking_for_one_is_unsupported(
    server: LiveServer,
) -> None:
    """A2A 1.0, 3.3.4: a card without ``capabilities.extendedAgentCard`` answers Get Extended
    Agent Card with UnsupportedOperationError (not ExtendedAgentCardNotConfiguredError, which
    is for an agent that declares one). The ``a2a-sdk`` client reads the card and answers with
    it without asking; the server's own answer is read over both bindings."""
    url = f"{server.url}/a2a/counter"
    client = await _client(url)
    card = await client.get_extended_agent_card(pb.GetExtendedAgentCardRequest())
    assert card.name == "counter" and not card.capabilities.extended_agent_card
    await _close(client)
    headers = {"A2A-Version": "1.0"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}
        rpc = (await http.post(url, json=body)).json()
        rest = await http.get(f"{url}/extendedAgentCard")
    assert rpc["error"]["code"] == -32004, rpc
    assert "offers no extended card" in rpc["error"]["message"]
    assert rest.status_code == 400 and "offers no extended card" in rest.text
    assert "UNSUPPORTED_OPERATION" in rest.text


async def test_cancel_and_resubscribe(server: LiveServer) -> None:
    client = await _client(f"{server.url}/a2a/gated", streaming=True)
    request = _message("four words go here")
    request.configuration.return_immediately = True
    polling = await _client(f"{server.url}/a2a/gated")
    started = _task(await _sent(polling, request))
    working = await _until(polling, started.id, lambda t: t.status.state == S.TASK_STATE_WORKING)
    with pytest.raises(UnsupportedOperationError) as busy:  # its context's task still works
        await _sent(polling, _message("more words", context_id=working.context_id))
    said = str(busy.value)
    assert "CancelTask" in said and "multitask_strategy" not in said, said

    seen: list[Any] = []

    async def follow() -> None:
        async for event in client.subscribe(pb.SubscribeToTaskRequest(id=working.id)):
            seen.append(event)
            if len(seen) == 1:
                threading.Timer(0.05, apps.GATE.set).start()

    await asyncio.wait_for(follow(), 60)
    assert _kinds(seen)[0] == "task" and seen[0].task.status.state == S.TASK_STATE_WORKING
    assert seen[-2].artifact_update.artifact.parts[0].text == "4 words"
    assert seen[-1].status_update.status.state == S.TASK_STATE_COMPLETED
    with pytest.raises(UnsupportedOperationError):  # an ended task: read it, not follow it
        async for _ in client.subscribe(pb.SubscribeToTaskRequest(id=working.id)):
            pass
    with pytest.raises(TaskNotCancelableError):
        await polling.cancel_task(pb.CancelTaskRequest(id=working.id))

    apps.GATE.clear()
    request = _message("two words", context_id=working.context_id)
    request.configuration.return_immediately = True
    other = _task(await _sent(polling, request))
    await _until(polling, other.id, lambda t: t.status.state == S.TASK_STATE_WORKING)
    cancelled = await polling.cancel_task(pb.CancelTaskRequest(id=other.id))
    assert cancelled.status.state == S.TASK_STATE_CANCELED
    got = await polling.get_task(pb.GetTaskRequest(id=other.id))
    assert got.status.state == S.TASK_STATE_CANCELED
    await _close(client)
    await _close(polling)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_input_required_then_answered(server: LiveServer, binding: str) -> None:
    client = await _client(f"{server.url}/a2a/approval", binding)
    asked = _task(await _sent(client, _message("Plan a team offsite")))
    assert asked.status.state == S.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == "Approve the plan?"
    # the LangGraph API sees the same pending human step
    sdk = get_client(url=server.url, api_key=None)
    assert (await sdk.threads.get_state(asked.context_id))["interrupts"]
    done = _task(await _sent(client, _message("approve", task_id=asked.id)))
    assert done.id == asked.id and done.status.state == S.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "published the plan"
    runs = await sdk.runs.list(asked.context_id)
    # the run that stopped at the human step ended success, as in LangGraph's server
    assert [r["status"] for r in runs] == ["success", "success"]
    await sdk.aclose()
    await _close(client)


async def test_one_task_of_many_turns(tmp_path: Path) -> None:
    store = TrajectorySaver(tmp_path / "turns.db")
    served = [
        *assistants(),
        Assistant.of(conversation, target="tests.server.test_a2a:conversation"),
    ]
    with LiveServer(create_app(served, store=store, api_key="")) as server:
        client = await _client(f"{server.url}/a2a/conversation", "HTTP+JSON")
        task = _task(await _sent(client, _message("hello")))
        for word in ("one", "two"):
            assert task.status.state == S.TASK_STATE_INPUT_REQUIRED
            assert task.status.message.parts[0].text == "Anything else? (say bye to finish)"
            task = _task(await _sent(client, _message(word, task_id=task.id)))
        done = _task(await _sent(client, _message("bye", task_id=task.id)))
        assert done.status.state == S.TASK_STATE_COMPLETED
        got = await client.get_task(pb.GetTaskRequest(id=task.id))
        said = [m.parts[0].text for m in got.history if m.role == pb.Role.ROLE_USER]
        assert said[0] == "hello" and said[-1] == "bye" and len(got.history) > 4
        short = await client.get_task(pb.GetTaskRequest(id=task.id, history_length=2))
        assert list(short.history) == list(got.history)[-2:]
        listed = await client.list_tasks(pb.ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [task.id]  # four runs, one task
        await _close(client)
    store.close()


async def test_cancel_a_task_waiting_for_input_then_a_new_task_on_its_context(
    server: LiveServer,
) -> None:
    client = await _client(f"{server.url}/a2a/approval")
    asked = _task(await _sent(client, _message("Plan a party")))
    assert asked.status.state == S.TASK_STATE_INPUT_REQUIRED
    cancelled = await client.cancel_task(pb.CancelTaskRequest(id=asked.id))
    assert cancelled.status.state == S.TASK_STATE_CANCELED
    with pytest.raises(UnsupportedOperationError):
        await _sent(client, _message("approve", task_id=asked.id))
    # a message on its context is no answer to the cancelled task: a new task, on top of the
    # thread (the human step it left is dropped), which drafts and asks again
    fresh = _task(await _sent(client, _message("Plan a picnic", context_id=asked.context_id)))
    assert fresh.id != asked.id and fresh.context_id == asked.context_id
    assert fresh.status.state == S.TASK_STATE_INPUT_REQUIRED
    users = [m.parts[0].text for m in fresh.history if m.role == pb.Role.ROLE_USER]
    assert users == ["Plan a party", "Plan a picnic"]
    # while it waits, a message naming only the context is a new task too (A2A 1.0, 3.4.3:
    # an answer names its task), and the waiting one, whose human step it drops, is cancelled
    third = _task(await _sent(client, _message("Plan a parade", context_id=asked.context_id)))
    assert third.id not in (asked.id, fresh.id) and third.context_id == asked.context_id
    assert third.status.state == S.TASK_STATE_INPUT_REQUIRED  # it drafts and asks in turn
    with pytest.raises(UnsupportedOperationError):  # the human step it left is gone
        await _sent(client, _message("approve", task_id=fresh.id))
    listed = await client.list_tasks(pb.ListTasksRequest(context_id=asked.context_id))
    assert sorted(t.id for t in listed.tasks) == sorted([asked.id, fresh.id, third.id])
    done = _task(await _sent(client, _message("approve", task_id=third.id)))
    assert done.id == third.id and done.status.state == S.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "published the plan"
    for old in (asked, fresh):
        got = await client.get_task(pb.GetTaskRequest(id=old.id))
        assert got.status.state == S.TASK_STATE_CANCELED
    await _close(client)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
async def test_killed_mid_task_then_continued(
    tmp_path: Path,
    processes: list[Served],  # noqa: F811 (test_restart's fixture)
) -> None:
    db, port = tmp_path / "served.db", _port()
    first = Served(db, port, AWORLD_TEST_SLOW="hang")
    processes.append(first)
    client = await _client(f"{first.url}/a2a/slow")
    request = _message("five words in this input")
    request.configuration.return_immediately = True
    task = _task(await _sent(client, request))
    sdk = get_client(url=first.url, api_key=None)
    for _ in range(2000):  # until the tool's step is saved; the next model call hangs
        state = await sdk.threads.get_state(task.context_id)
        if (state["values"] or {}).get("steps", 0) >= 2:
            break
        await asyncio.sleep(0.01)
    first.stop(signal.SIGKILL)
    await _close(client)
    await sdk.aclose()

    second = Served(db, port)
    processes.append(second)
    client = await _client(f"{second.url}/a2a/slow")
    back = await client.get_task(pb.GetTaskRequest(id=task.id))
    assert back.status.state == S.TASK_STATE_INPUT_REQUIRED
    assert back.metadata["run_status"] == "interrupted"
    assert "continue" in back.status.message.parts[0].text
    done = _task(await _sent(client, _message("go on", task_id=task.id)))
    assert done.id == task.id and done.status.state == S.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "5 words"
    sdk = get_client(url=second.url, api_key=None)
    trace = (await sdk.threads.get_state(task.context_id))["values"]["trace"]
    assert [r["kind"] for r in trace] == ["llm", "tools", "llm"]  # no step redone
    await sdk.aclose()
    await _close(client)
    second.stop()


async def test_api_key_guards_everything_but_the_card(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(api_key=KEY)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        for path in ("/.well-known/agent-card.json", "/a2a/chat/.well-known/agent-card.json"):
            card = await http.get(path)
            assert card.status_code == 200 and KEY not in card.text
            assert card.json()["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"] == (
                "x-api-key"
            )
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        refused = [
            await http.post("/a2a/chat", json=body),
            await http.post("/a2a/chat", json=body, headers={"x-api-key": "wrong"}),
            await http.get("/a2a/chat/tasks"),
            await http.post("/a2a/chat/message:send", json={}),
            await http.get("/a2a/chat/tasks/some-task"),
        ]
        assert [r.status_code for r in refused] == [401] * 5
        assert all(KEY not in r.text and "task" not in r.text.lower() for r in refused)
    client = await _client(f"{server.url}/a2a/chat", key=KEY)
    done = _task(await _sent(client, _message("with the key")))
    assert done.status.state == S.TASK_STATE_COMPLETED
    await _close(client)


def test_malformed_requests_get_json_rpc_errors(server: LiveServer) -> None:
    send = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    cases: list[tuple[Any, int]] = [
        (b"{not json", -32700),
        ({"jsonrpc": "2.0", "id": 1}, -32600),
        ({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod"}, -32601),
        ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": 5}}, -32602),
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}, -32001),
        ({"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "nope"}}, -32001),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
            },
            -32602,
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    **send,
                    "message": {**send["message"], "contextId": "bad id/with space"},
                },
            },
            -32602,
        ),
        ({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"status": "DONE"}}, -32602),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "CreateTaskPushNotificationConfig",
                "params": {"taskId": "t", "url": "http://127.0.0.1:1/"},
            },
            -32001,
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {**send, "configuration": {"taskPushNotificationConfig": {"url": "x"}}},
            },
            -32602,
        ),
    ]
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for body, code in cases:
            raw = body if isinstance(body, bytes) else None
            sent = http.post(
                "/a2a/chat",
                content=raw,
                json=None if raw else body,
                headers={"content-type": "application/json", "A2A-Version": "1.0"},
            )
            assert sent.status_code == 200, (body, sent.text)
            assert sent.json()["error"]["code"] == code, (body, sent.text)
        # the REST binding answers a missing task with a 404, not a 500
        assert http.get("/a2a/chat/tasks/nope", headers={"A2A-Version": "1.0"}).status_code == 404


JS_SDK = "@a2a-js/sdk@1.3.0"
JS_DIR = Path(__file__).resolve().parents[2] / ".cache" / "a2a-js"
"""Where the JavaScript client is installed (``.cache/`` is ignored by git)."""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed: no JS client")
def test_the_javascript_client(serve: Callable[..., LiveServer]) -> None:
    if not (JS_DIR / "node_modules" / "@a2a-js" / "sdk" / "package.json").exists():
        JS_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--prefix", str(JS_DIR), "--no-audit", "--no-fund", JS_SDK],
            check=True,
            capture_output=True,
            timeout=300,
        )
    script = JS_DIR / "a2a_client.mjs"  # beside its node_modules, where node finds the SDK
    shutil.copyfile(Path(__file__).resolve().parents[1] / "js" / "a2a_client.mjs", script)
    server = serve(api_key=KEY)
    ran = subprocess.run(
        ["node", str(script), f"{server.url}/a2a/approval", KEY],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    for transport in ("JSONRPC", "HTTP+JSON"):
        assert seen[transport] == {
            "asked": "TASK_STATE_INPUT_REQUIRED",
            "prompt": "Approve the plan?",
            "answered": "TASK_STATE_COMPLETED",
            "same_task": True,
            "answer": "published the plan",
            "streamed": ["task", "statusUpdate", "statusUpdate"],
        }


class _Webhook(http.server.BaseHTTPRequestHandler):
    """A loopback receiver of push notifications: each POST's token and JSON body."""

    got: list[tuple[str | None, dict[str, Any]]] = []

    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        size = int(self.headers.get("content-length") or 0)
        self.got.append(
            (self.headers.get("x-a2a-notification-token"), json.loads(self.rfile.read(size)))
        )
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # quiet
        pass


async def _notified(count: int) -> list[tuple[str | None, dict[str, Any]]]:
    for _ in range(2000):  # bounded: a notification follows the run's end
        if len(_Webhook.got) >= count:
            return _Webhook.got
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(_Webhook.got)} notifications, not {count}")


async def test_push_notifications_on_loopback(server: LiveServer, store: TrajectorySaver) -> None:
    _Webhook.got = []
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Webhook)
    serving = threading.Thread(target=hook.serve_forever, daemon=True)
    serving.start()
    try:
        url = f"http://127.0.0.1:{hook.server_address[1]}/a2a-hook"
        client = await _client(f"{server.url}/a2a/approval")
        async with httpx.AsyncClient() as web:
            card = (await web.get(f"{server.url}/a2a/approval/.well-known/agent-card.json")).json()
        assert card["capabilities"]["pushNotifications"] is True
        request = _message("Plan a team offsite")
        request.configuration.task_push_notification_config.url = url
        request.configuration.task_push_notification_config.token = "tok-1"
        asked = _task(await _sent(client, request))
        started, stopped = await _notified(2)  # when the run starts, and when it stops
        assert [started[0], stopped[0]] == ["tok-1", "tok-1"]
        assert started[1]["task"]["id"] == stopped[1]["task"]["id"] == asked.id
        assert started[1]["task"]["status"]["state"] in (
            "TASK_STATE_WORKING",
            "TASK_STATE_INPUT_REQUIRED",
        )
        assert stopped[1]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        listed = await client.list_task_push_notification_configs(
            pb.ListTaskPushNotificationConfigsRequest(task_id=asked.id)
        )
        assert [(c.id, c.url) for c in listed.configs] == [(asked.id, url)]
        second = pb.TaskPushNotificationConfig(
            task_id=asked.id, id="second", url=url, token="tok-2"
        )
        second.authentication.scheme = "Bearer"
        second.authentication.credentials = "webhook-secret"
        made = await client.create_task_push_notification_config(second)
        assert made.id == "second" and made.authentication.credentials == ""  # never answered
        got = await client.get_task_push_notification_config(
            pb.GetTaskPushNotificationConfigRequest(task_id=asked.id, id="second")
        )
        assert got.url == url and got.authentication.credentials == ""
        assert store.path is not None
        with contextlib.closing(sqlite3.connect(store.path)) as db:  # no secret in the store
            stored = db.execute("SELECT * FROM a2a_push_configs").fetchall()
        assert len(stored) == 2 and "tok-1" not in repr(stored)
        assert "tok-2" not in repr(stored) and "webhook-secret" not in repr(stored)
        done = _task(await _sent(client, _message("approve", task_id=asked.id)))
        assert done.status.state == S.TASK_STATE_COMPLETED
        finished = (await _notified(6))[-2:]  # to both webhooks, at the start and the end
        assert sorted(t for t, _ in finished) == ["tok-1", "tok-2"]
        assert {b["task"]["status"]["state"] for _, b in finished} == {"TASK_STATE_COMPLETED"}
        await client.delete_task_push_notification_config(
            pb.DeleteTaskPushNotificationConfigRequest(task_id=asked.id, id="second")
        )
        left = await client.list_task_push_notification_configs(
            pb.ListTaskPushNotificationConfigsRequest(task_id=asked.id)
        )
        assert [c.id for c in left.configs] == [asked.id]
        await _close(client)
    finally:
        hook.shutdown()
        hook.server_close()
        serving.join(10)


def test_protocol_0_3_and_requests_without_a_version_header(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:

        def call(method: str, params: dict[str, Any], **headers: str) -> Any:
            body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
            return http.post("/a2a/chat", json=body, headers=headers).json()

        part = {"kind": "text", "text": "old client"}
        legacy = {"kind": "message", "messageId": "m03", "role": "user", "parts": [part]}
        old = call("message/send", {"message": legacy})["result"]  # no header: 0.3
        assert old["kind"] == "task" and old["status"]["state"] == "completed"
        got = call("tasks/get", {"id": old["id"]})["result"]
        assert got["status"]["message"]["parts"][0]["text"] == "turn 1: old client"
        # a 1.0 method name without the header is 1.0 (the names of the two do not overlap)
        new = call("GetTask", {"id": old["id"]})["result"]
        assert new["id"] == old["id"] and new["status"]["state"] == "TASK_STATE_COMPLETED"
        # ... and a header naming another version is still refused
        refused = call("GetTask", {"id": old["id"]}, **{"A2A-Version": "0.3"})
        assert refused["error"]["code"] == -32009
        rest = http.get(f"/a2a/chat/tasks/{old['id']}")  # the 1.0 REST path, no header
        assert rest.status_code == 200 and rest.json()["id"] == old["id"]
        assert http.get("/a2a/chat/tasks", params={"status": "DONE"}).status_code == 400


def test_a_body_over_the_limit_is_refused(serve: Callable[..., LiveServer]) -> None:
    server = serve(max_body=4096)
    big = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x" * 8000}]}}
    headers = {"A2A-Version": "1.0"}
    with httpx.Client(base_url=server.url, timeout=30, headers=headers) as http:
        body = {"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": big}
        refused = http.post("/a2a/chat", json=body)
        assert refused.status_code == 200 and refused.json()["error"]["code"] == -32600
        assert "4096 bytes" in refused.json()["error"]["message"]
        assert http.post("/a2a/chat/message:send", json=big).status_code == 413
        assert http.post("/threads/search", json={}).json() == []  # nothing ran


async def test_a_restarted_server_sends_no_push_whose_secrets_it_lost(
    serve: Callable[..., LiveServer],
) -> None:
    """Push tokens live in the server's memory only: after a restart, a config set before it
    is listed without its token and not sent to; a config set again is."""
    _Webhook.got = []
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Webhook)
    serving = threading.Thread(target=hook.serve_forever, daemon=True)
    serving.start()
    try:
        url = f"http://127.0.0.1:{hook.server_address[1]}/a2a-hook"
        first = serve()
        client = await _client(f"{first.url}/a2a/approval")
        request = _message("Plan a team offsite")
        request.configuration.task_push_notification_config.url = url
        request.configuration.task_push_notification_config.token = "tok-old"
        asked = _task(await _sent(client, request))
        await _notified(2)  # sent while the first server held the token
        await _close(client)
        first.__exit__(None, None, None)

        _Webhook.got = []
        second = serve()
        client = await _client(f"{second.url}/a2a/approval")
        listed = await client.list_task_push_notification_configs(
            pb.ListTaskPushNotificationConfigsRequest(task_id=asked.id)
        )
        assert [(c.id, c.url, c.token) for c in listed.configs] == [(asked.id, url, "")]
        again = pb.TaskPushNotificationConfig(task_id=asked.id, id="again", url=url, token="new")
        await client.create_task_push_notification_config(again)
        done = _task(await _sent(client, _message("approve", task_id=asked.id)))
        assert done.status.state == S.TASK_STATE_COMPLETED
        sent = await _notified(2)  # the start and the end, to the config set again only
        assert [token for token, _ in sent] == ["new", "new"]
        assert sent[-1][1]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        await _close(client)
    finally:
        hook.shutdown()
        hook.server_close()
