"""``RemoteAgent`` against a served aworld-graph A2A agent (a real server on loopback, reached
with the ``a2a-sdk`` client the node uses): a remote human step becomes the calling run's own
human step, the remote task is followed by subscription, and a message sent again with the same
``messageId`` in the same context starts nothing new."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from langgraph_sdk import get_client

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import Assistant, create_app
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
