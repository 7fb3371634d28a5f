"""A caller killed with SIGKILL while it answers a remote agent's question never sends the
answer twice, over A2A and over the LangGraph API.

The remote is a real ``aworld-graph serve`` of ``tests.server.test_a2a:conversation`` (each
message is answered with "Anything else?" – an ``input-required`` A2A task, a LangGraph run
stopped at an interrupt – until "bye"), reached through a loopback proxy written here that
forwards every request unchanged and can hold one. The caller is the CLI in a child process,
running a swarm whose one node is ``RemoteAgent`` at the proxy (``tests/procs/remote_caller.py``).
The person's first answer is given with ``resume --value``, and the caller is killed:

- ``sent``: the remote has taken the answer, and the proxy holds its reply, so the caller
  cannot have saved that it sent it;
- ``saved``: the reply reached the caller and is saved in its checkpoint, and the proxy
  holds the caller's next request (it waits for the remote's next question).

Then ``resume`` in a new process: the remote is sent nothing twice (each message once through
the proxy, one run per message on the remote thread, whose user messages are the three in
order), the caller stops at the remote's second question, and the answer "bye" ends the run
with the remote's final answer, as a run never killed does.
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
from langgraph_sdk import get_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from aworld_graph import Runners, TaskResponse
from aworld_graph.checkpoint import TrajectorySaver
from tests.procs.remote_caller import caller
from tests.server.app_server import CLI, ROOT, ServeProcess
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.slow


_HOP = {"connection", "keep-alive", "transfer-encoding", "upgrade"}


class Proxy:
    """Forwards every request to ``target`` as it came (its ``Host`` too, so the agent card
    names the proxy and the caller's every request passes here), noting what is sent through
    it. ``hold``: ``"sent"`` keeps the remote's reply to the first answer sent (an A2A message
    on a task, a LangGraph run that resumes a thread); ``"saved"`` passes that reply, then
    keeps every later request. A kept request waits until :attr:`release` is set."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.hold: str | None = None
        self.sent: list[tuple[bool, str, str]] = []
        """What was sent through the proxy, in order: whether it answers, its text, and its
        thread (the A2A context)."""
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
        sent = _sent_by(request.method, request.url.path, body)
        if sent is not None:
            self.sent.append(sent)
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
        if sent is not None and sent[0] and self.hold and not self._holding:
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


def _sent_by(method: str, path: str, body: bytes) -> tuple[bool, str, str] | None:
    """What a request sends, if it sends something: an A2A message (JSON-RPC or REST), or a
    LangGraph run's input or resume; whether it answers, its text, and its thread."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    params = data.get("params", data)
    message = params.get("message") if isinstance(params, dict) else None
    if isinstance(message, dict):
        text = str(message["parts"][0]["text"])
        return bool(message.get("taskId")), text, str(message["contextId"])
    parts = path.strip("/").split("/")
    if method == "POST" and len(parts) == 3 and parts[0] == "threads" and parts[2] == "runs":
        if data.get("command"):
            return True, str(data["command"]["resume"]), parts[1]
        return False, str(data["input"]["messages"][0]["content"]), parts[1]
    return None


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One remote for every case: each conversation is a remote task and thread of its own,
    and each case reads back only its own thread."""
    folder = tmp_path_factory.mktemp("remote")
    served = ServeProcess(["tests.server.test_a2a:conversation"], db=folder / "remote.db")
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def proxy(remote: ServeProcess) -> Iterator[tuple[Proxy, str]]:
    through = Proxy(remote.url)
    with LiveServer(through.app) as server:
        try:
            yield through, server.url
        finally:
            through.release.set()  # nothing stays held when the server stops


def _env(db: Path, url: str, protocol: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AWORLD_GRAPH_DB": str(db)}
    env["REMOTE_URL"] = f"{url}/a2a/conversation" if protocol == "a2a" else url
    env["REMOTE_ASSISTANT"] = "conversation" if protocol == "langgraph" else ""
    env.pop("AWORLD_GRAPH_API_KEY", None)
    return env


def _cli(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [*CLI, *args, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _answer_saved(db: Path) -> bool:
    """Whether the caller's store holds what sending an answer returned: an A2A reply names
    the waiting it ``answered``; a LangGraph one names a second remote run."""
    with TrajectorySaver(db) as saver:
        saved = [
            w[2]
            for tup in saver.list(None)
            for w in tup.pending_writes or []
            if isinstance(w[2], dict)
        ]
    return any("answered" in w for w in saved) or len({w.get("run_id") for w in saved} - {None}) > 1


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


async def _remote_side(url: str, thread_id: str) -> tuple[list[str], int]:
    """The remote thread's user messages, in order, and how many runs it had (the A2A task's
    history is that thread's messages; each message it took is a run)."""
    sdk = get_client(url=url, api_key=None)
    try:
        state = await sdk.threads.get_state(thread_id)
        runs = await sdk.runs.list(thread_id)
    finally:
        await sdk.aclose()
    values = state["values"]
    assert isinstance(values, dict)
    users = [m["content"] for m in values["messages"] if m["role"] == "user"]
    return users, len(runs)


async def _uninterrupted(env: dict[str, str], db: Path) -> TaskResponse:
    """The conversation of the test, in this process and never killed: "hello", then the
    answers "one" and "bye"."""
    swarm = caller(env["REMOTE_URL"], env["REMOTE_ASSISTANT"] or None)
    with TrajectorySaver(db) as saver:
        first = await Runners.run("hello", swarm=swarm, checkpointer=saver, task_id="c")
        assert first.status == "interrupted", first
        second = await Runners.resume("c", swarm=swarm, value="one", checkpointer=saver)
        assert second.status == "interrupted", second
        return await Runners.resume("c", swarm=swarm, value="bye", checkpointer=saver)


@pytest.mark.parametrize("protocol", ["a2a", "langgraph"])
@pytest.mark.parametrize("when", ["sent", "saved"])
def test_a_caller_killed_around_sending_an_answer_sends_it_once(
    tmp_path: Path, remote: ServeProcess, proxy: tuple[Proxy, str], when: str, protocol: str
) -> None:
    through, url = proxy
    clean = _env(tmp_path / "clean.db", url, protocol)  # the same conversation, never killed
    expected = asyncio.run(_uninterrupted(clean, tmp_path / "clean.db"))
    assert expected.status == "finished", expected
    assert _said(tmp_path / "clean.db", "c") == ["one", "bye", expected.answer]
    assert str(expected.answer).startswith("noted")
    through.sent.clear()
    run = ["run", "tests.procs.remote_caller:swarm", "--input", "hello", "--task-id"]

    db = tmp_path / "caller.db"
    env = _env(db, url, protocol)
    first = _cli([*run, "t"], env)  # the CLI names the workflow its later processes resume
    assert _asked(first) == ["Anything else? (say bye to finish)"]

    through.hold = when
    if when == "sent":
        ready, why = through.answered.is_set, "the remote never took the answer"
    else:
        ready, why = (
            lambda: through.answered.is_set() and _answer_saved(db),
            "sending the answer was never saved",
        )
    _kill_when(["resume", "t", "--value", "one"], env, ready, why)
    through.passing()

    again = _cli(["resume", "t"], env)  # the person's answer "one" is in the checkpoint
    assert _asked(again) == ["Anything else? (say bye to finish)"]  # the remote's second
    swarm = caller(env["REMOTE_URL"], env["REMOTE_ASSISTANT"] or None)
    with TrajectorySaver(db) as saver:  # the last answer in this process
        done = asyncio.run(Runners.resume("t", swarm=swarm, value="bye", checkpointer=saver))
    assert done.status == "finished", done
    assert done.answer == expected.answer
    assert _said(db, "t") == ["one", "bye", done.answer]

    sent = [(answers, text) for answers, text, _ in through.sent]
    assert sent == [(False, "hello"), (True, "one"), (True, "bye")]  # each sent once
    threads = {thread for _, _, thread in through.sent}
    assert len(threads) == 1  # one remote task (its context), one remote thread
    users, runs = asyncio.run(_remote_side(remote.url, threads.pop()))
    assert users == ["hello", "one", "bye"] and runs == 3  # one run per message taken
