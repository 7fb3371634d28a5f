"""``RemoteAgent`` against a served aworld-graph A2A agent (a real server on loopback, reached
with the ``a2a-sdk`` client the node uses): a remote human step becomes the calling run's own
human step, the remote task is followed by subscription, and a message sent again with the same
``messageId`` in the same context starts nothing new."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from langgraph_sdk import get_client

from aworld_graph import RemoteAgent, Runners, Swarm
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import Assistant, create_app
from tests.server import apps
from tests.server.conftest import LiveServer, assistants
from tests.server.test_a2a import conversation

S = pb.TaskState


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[LiveServer]:
    """A served aworld-graph (the test apps and ``conversation``) on its own store."""
    served = [
        *assistants(),
        Assistant.of(conversation, target="tests.server.test_a2a:conversation"),
    ]
    with TrajectorySaver(tmp_path / "remote.db") as store:
        with LiveServer(create_app(served, store=store, api_key="")) as server:
            yield server


def _message(text: str, ident: str, **ids: str) -> pb.SendMessageRequest:
    message = pb.Message(message_id=ident, role=pb.Role.ROLE_USER, **ids)
    message.parts.append(pb.Part(text=text))
    return pb.SendMessageRequest(message=message)


async def _send(url: str, request: pb.SendMessageRequest) -> pb.Task:
    async with httpx.AsyncClient(timeout=30) as http:
        client = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
        try:
            events = [event async for event in client.send_message(request)]
        finally:
            await client.close()
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


async def _runs(url: str, thread_id: str) -> list[dict[str, Any]]:
    sdk = get_client(url=url, api_key=None)
    try:
        return list(await sdk.runs.list(thread_id))
    finally:
        await sdk.aclose()


async def test_a_message_sent_again_in_its_context_starts_nothing(remote: LiveServer) -> None:
    url = f"{remote.url}/a2a/approval"
    first = await _send(url, _message("Plan a team offsite", "m-1", context_id="ctx-again"))
    assert first.status.state == S.TASK_STATE_INPUT_REQUIRED
    again = await _send(url, _message("Plan a team offsite", "m-1", context_id="ctx-again"))
    assert again.id == first.id and again.status.state == S.TASK_STATE_INPUT_REQUIRED
    assert len(await _runs(remote.url, "ctx-again")) == 1

    answered = await _send(url, _message("approve", "m-2", task_id=first.id))
    assert answered.status.state == S.TASK_STATE_COMPLETED
    resent = await _send(url, _message("approve", "m-2", task_id=first.id))  # not "has ended"
    assert resent.id == first.id and resent.status.state == S.TASK_STATE_COMPLETED
    assert len(await _runs(remote.url, "ctx-again")) == 2  # the first run and its answer's
    other = await _send(url, _message("Plan a team offsite", "m-3", context_id="ctx-again"))
    assert other.id != first.id  # a new messageId is a new turn


async def _task(url: str, task_id: str) -> pb.Task:
    async with httpx.AsyncClient(timeout=30) as http:
        client = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
        try:
            return await client.get_task(pb.GetTaskRequest(id=task_id))
        finally:
            await client.close()


def _node(remote: LiveServer, assistant_id: str, name: str) -> tuple[str, Swarm]:
    """The URL of the served agent ``assistant_id`` and a swarm whose one node calls it."""
    url = f"{remote.url}/a2a/{assistant_id}"
    return url, Swarm(RemoteAgent(name=name, url=url))


def _user_texts(task: pb.Task) -> list[str]:
    return [m.parts[0].text for m in task.history if m.role == pb.Role.ROLE_USER]


async def test_a_remote_human_step_is_the_runs_own_and_its_answer_resumes_the_remote_task(
    remote: LiveServer, saver: TrajectorySaver
) -> None:
    url, swarm = _node(remote, "approval", "planner")
    asked = await Runners.run("Plan a team offsite", swarm=swarm, checkpointer=saver, task_id="h")
    assert asked.status == "interrupted" and not asked.success
    assert [i["value"]["prompt"] for i in asked.interrupts] == ["Approve the plan?"]
    assert asked.interrupts[0]["value"]["node"] == "planner"

    done = await Runners.resume("h", swarm=swarm, value="approve", checkpointer=saver)
    assert done.success, done.msg
    assert done.answer == "published the plan"
    record = done.state["trace"][-1]
    assert record["raw"]["replies"] == ["approve"]
    task = await _task(url, record["raw"]["task_id"])  # one remote task, answered on it
    assert task.status.state == S.TASK_STATE_COMPLETED
    assert _user_texts(task) == ["Plan a team offsite", "approve"]
    runs = await _runs(remote.url, task.context_id)
    assert len(runs) == 2  # the task's first run and the answer's: nothing sent twice
    said = [m["content"] for m in done.state["messages"] if m.get("_agent") == "planner"]
    assert said == ["approve", "published the plan"]
    # the node's first message named its own context by its messageId: sent again (a crash
    # between sending and saving), the server answers with the same task and starts nothing
    again = await _send(
        url, _message("Plan a team offsite", task.context_id, context_id=task.context_id)
    )
    assert again.id == task.id and len(await _runs(remote.url, task.context_id)) == 2


@pytest.mark.parametrize("protocol", ["a2a", "langgraph"])
async def test_many_remote_questions_in_turn_each_sent_once(
    remote: LiveServer, saver: TrajectorySaver, protocol: str
) -> None:
    url, swarm = _node(remote, "conversation", "talk")
    if protocol == "langgraph":
        swarm = Swarm(RemoteAgent(name="talk", url=remote.url, assistant_id="conversation"))
    step = await Runners.run("hello", swarm=swarm, checkpointer=saver, task_id="c")
    for word in ("one", "two"):
        assert step.status == "interrupted", step.msg
        assert step.interrupts[0]["value"]["prompt"].startswith("Anything else?")
        step = await Runners.resume("c", swarm=swarm, value=word, checkpointer=saver)
    step = await Runners.resume("c", swarm=swarm, value="bye", checkpointer=saver)
    assert step.success, step.msg
    assert step.answer.startswith("noted")
    raw = step.state["trace"][-1]["raw"]
    assert raw["replies"] == ["one", "two", "bye"]
    thread_id = raw.get("context_id") or raw["thread_id"]
    assert len(await _runs(remote.url, thread_id)) == 4  # each answer sent once
    if protocol == "a2a":
        task = await _task(url, raw["task_id"])
        assert _user_texts(task) == ["hello", "one", "two", "bye"]


async def test_a_remote_langgraph_interrupt_is_the_runs_own_human_step(
    remote: LiveServer, saver: TrajectorySaver
) -> None:
    swarm = Swarm(RemoteAgent(name="planner", url=remote.url, assistant_id="approval"))
    asked = await Runners.run("Plan a party", swarm=swarm, checkpointer=saver, task_id="g")
    assert asked.status == "interrupted"
    assert asked.interrupts[0]["value"]["prompt"] == "Approve the plan?"
    done = await Runners.resume("g", swarm=swarm, value="no, smaller", checkpointer=saver)
    assert done.success, done.msg
    assert done.answer == "revised the plan"
    thread_id = done.state["trace"][-1]["raw"]["thread_id"]
    assert len(await _runs(remote.url, thread_id)) == 2


async def test_a_streaming_agent_is_followed_by_subscription(
    remote: LiveServer, saver: TrajectorySaver
) -> None:
    """The served agent's card says it streams: the node subscribes to the task. Its polling
    interval is an hour, so an answer within the node's timeout came through the stream."""
    url = f"{remote.url}/a2a/gated"
    swarm = Swarm(RemoteAgent(name="far", url=url, poll_interval=3600, timeout=30))

    async def open_gate_once_working() -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            client = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
            working = pb.ListTasksRequest(status=S.TASK_STATE_WORKING)
            for _ in range(3000):  # bounded: the task starts working within a few steps
                if (await client.list_tasks(working)).tasks:
                    break
                await asyncio.sleep(0.02)
            await client.close()
        await asyncio.sleep(1)  # the node has looked at the task by now: it waits on it
        apps.GATE.set()

    opener = asyncio.create_task(asyncio.wait_for(open_gate_once_working(), 60))
    done = await Runners.run("three little words", swarm=swarm, checkpointer=saver)
    await opener
    assert done.success, done.msg
    assert done.answer == "3 words"
