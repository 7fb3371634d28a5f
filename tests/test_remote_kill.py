"""A caller killed with SIGKILL while it answers a remote agent's question never sends the
answer twice.

The remote is a real ``aworld-graph serve`` of ``tests.server.test_a2a:conversation`` (each
message is answered with "Anything else?", an ``input-required`` task, until "bye"), reached
through a loopback proxy written here that forwards every request unchanged and can hold
one. The caller is the CLI in a child process, running a swarm whose one node is
``RemoteAgent(url=the proxy)``. The person's first answer is given with ``resume --value``,
and the caller is killed:

- ``sent``: the remote has taken the answer, and the proxy holds its reply, so the caller
  cannot have saved that it sent it;
- ``saved``: the reply reached the caller and is saved in its checkpoint, and the proxy
  holds the caller's next request (it waits for the remote's next question).

Then ``resume`` in a new process: the remote is asked nothing twice (one SendMessage per
message id through the proxy, one run per message on the remote thread, the task's history
the messages in order), the caller stops at the remote's second question, and the answer
"bye" ends the run with the remote's final answer, as a run never killed does.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from langgraph_sdk import get_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from aworld_graph import RemoteAgent, Swarm
from aworld_graph.checkpoint import TrajectorySaver
from tests.server.app_server import CLI, ROOT, ServeProcess
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.slow

caller = Swarm(
    RemoteAgent(
        name="talk",
        url=os.environ.get("REMOTE_URL", "http://127.0.0.1:9"),
        timeout=60,
        poll_interval=0.05,
    ),
    name="caller",
)
"""The workflow the killed CLI runs: one remote node at ``$REMOTE_URL``."""

_HOP = {"connection", "keep-alive", "transfer-encoding", "upgrade"}


class Proxy:
    """Forwards every request to ``target`` as it came (its ``Host`` too, so the agent card
    names the proxy and the caller's every request passes here), counting the A2A messages
    sent through it. ``hold``: ``"sent"`` keeps the remote's reply to the first message
    that answers a task; ``"saved"`` passes that reply, then keeps every later request. A
    kept request waits until :attr:`release` is set."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.hold: str | None = None
        self.messages: list[dict[str, Any]] = []
        """The A2A messages sent through the proxy (their JSON), in order."""
        self.answered = threading.Event()
        """Set once the remote has taken an answer (its reply is in hand)."""
        self.release = threading.Event()
        self._holding = False
        self.app = Starlette(
            routes=[Route("/{path:path}", self.forward, methods=["GET", "POST", "DELETE"])]
        )

    async def _kept(self) -> None:
        await asyncio.to_thread(self.release.wait, 120)

    async def forward(self, request: Request) -> StreamingResponse:
        body = await request.body()
        message = _message_of(body)
        if message is not None:
            self.messages.append(message)
        if self._holding:
            await self._kept()
        http = httpx.AsyncClient(timeout=None)
        headers = [(k, v) for k, v in request.headers.raw if k.decode().lower() not in _HOP]
        upstream = await http.send(
            http.build_request(
                request.method,
                self.target + request.url.path,
                params=request.url.query,
                headers=headers,
                content=body,
            ),
            stream=True,
        )
        read: list[bytes] | None = None
        if message is not None and message.get("taskId") and self.hold and not self._holding:
            read = [chunk async for chunk in upstream.aiter_raw()]  # the answer is taken
            self.answered.set()
            if self.hold == "sent":
                self._holding = True
                await self._kept()
            self._holding = True  # "saved": this reply goes; what follows waits

        async def relay() -> AsyncIterator[bytes]:
            try:
                for chunk in read or ():
                    yield chunk
                if read is None:
                    async for chunk in upstream.aiter_raw():
                        yield chunk
            finally:
                await upstream.aclose()
                await http.aclose()

        kept = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
        return StreamingResponse(relay(), status_code=upstream.status_code, headers=kept)

    def passing(self) -> None:
        """From now on forward everything at once."""
        self.hold, self._holding = None, False
        self.release.set()


def _message_of(body: bytes) -> dict[str, Any] | None:
    """The A2A message a request sends (JSON-RPC or REST), if it sends one."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return None
    params = data.get("params", data) if isinstance(data, dict) else None
    message = params.get("message") if isinstance(params, dict) else None
    return message if isinstance(message, dict) else None


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[ServeProcess]:
    served = ServeProcess(["tests.server.test_a2a:conversation"], db=tmp_path / "remote.db")
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def proxy(remote: ServeProcess) -> Iterator[tuple[Proxy, str]]:
    through = Proxy(remote.url)
    try:
        with LiveServer(through.app) as server:
            yield through, server.url
    finally:
        through.release.set()


def _env(db: Path, url: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AWORLD_GRAPH_DB": str(db)}
    env["REMOTE_URL"] = f"{url}/a2a/conversation"
    env.pop("AWORLD_GRAPH_API_KEY", None)
    return env


def _cli(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [*CLI, *args, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _saved(db: Path, key: str) -> bool:
    """Whether a saved task write of the caller's store is a dict holding ``key``."""
    with TrajectorySaver(db) as saver:
        return any(
            isinstance(w[2], dict) and key in w[2]
            for tup in saver.list(None)
            for w in tup.pending_writes or []
        )


def _kill_when(args: list[str], env: dict[str, str], ready: Any, why: str) -> None:
    proc = subprocess.Popen([*CLI, *args, "--json"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not ready():
            assert proc.poll() is None, "the caller ended before it was killed"
            assert time.monotonic() < deadline, why
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL


def _asked(out: dict[str, Any]) -> list[str]:
    assert out["status"] == "interrupted", out
    return [i["value"]["prompt"] for i in out["interrupts"]]


def _said(db: Path, thread_id: str) -> list[str]:
    """What the caller's remote node added to its thread: the answers it sent and the
    remote's final answer (read from the caller's last checkpoint)."""
    with TrajectorySaver(db) as saver:
        saved = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    assert saved is not None
    messages = saved.checkpoint["channel_values"]["messages"]
    return [m["content"] for m in messages if m.get("_agent") == "talk"]


async def _remote_side(url: str, task_id: str) -> tuple[list[str], int]:
    """The remote task's user messages, in order, and how many runs its thread had."""
    async with httpx.AsyncClient(timeout=30) as http:
        client = await create_client(
            f"{url}/a2a/conversation", ClientConfig(streaming=False, httpx_client=http)
        )
        try:
            task = await client.get_task(pb.GetTaskRequest(id=task_id))
        finally:
            await client.close()
    users = [m.parts[0].text for m in task.history if m.role == pb.Role.ROLE_USER]
    sdk = get_client(url=url, api_key=None)
    try:
        runs = await sdk.runs.list(task.context_id)
    finally:
        await sdk.aclose()
    return users, len(runs)


@pytest.mark.parametrize("when", ["sent", "saved"])
def test_a_caller_killed_around_sending_an_answer_sends_it_once(
    tmp_path: Path, remote: ServeProcess, proxy: tuple[Proxy, str], when: str
) -> None:
    through, url = proxy
    clean = _env(tmp_path / "clean.db", url)  # the same conversation, never killed
    run = ["run", "tests.test_remote_kill:caller", "--input", "hello", "--task-id"]
    assert _asked(_cli([*run, "c"], clean))
    assert _asked(_cli(["resume", "c", "--value", "one"], clean))
    expected = _cli(["resume", "c", "--value", "bye"], clean)
    assert expected["status"] == "finished", expected
    assert _said(tmp_path / "clean.db", "c") == ["one", "bye", expected["answer"]]
    assert expected["answer"].startswith("noted")
    through.messages.clear()

    db = tmp_path / "caller.db"
    env = _env(db, url)
    first = _cli([*run, "t"], env)
    assert _asked(first) == ["Anything else? (say bye to finish)"]

    through.hold = when
    if when == "sent":
        ready, why = through.answered.is_set, "the remote never took the answer"
    else:
        ready, why = (
            lambda: through.answered.is_set() and _saved(db, "answered"),
            "sending the answer was never saved",
        )
    _kill_when(["resume", "t", "--value", "one"], env, ready, why)
    through.passing()

    again = _cli(["resume", "t"], env)  # the person's answer "one" is in the checkpoint
    assert _asked(again) == ["Anything else? (say bye to finish)"]  # the remote's second
    done = _cli(["resume", "t", "--value", "bye"], env)
    assert done["status"] == "finished", done
    assert done["answer"] == expected["answer"]
    assert _said(db, "t") == ["one", "bye", done["answer"]]

    sent = [(m.get("taskId") is not None, m["parts"][0]["text"]) for m in through.messages]
    assert sent == [(False, "hello"), (True, "one"), (True, "bye")]  # each sent once
    ids = [m["messageId"] for m in through.messages]
    assert len(set(ids)) == 3
    task_id = next(m["taskId"] for m in through.messages if m.get("taskId"))
    users, runs = asyncio.run(_remote_side(remote.url, task_id))
    assert users == ["hello", "one", "bye"] and runs == 3  # one run per message taken
