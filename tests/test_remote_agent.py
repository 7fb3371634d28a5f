"""``RemoteAgent`` as a node: a tiny A2A agent written here (``a2a-sdk``'s server) and the
project's own ``aworld-graph serve`` (a LangGraph-API server) on loopback; a remote that hangs,
answers garbage or is gone is a tool error kept in the trajectory, and a run killed while it
waits resumes by joining the remote task instead of sending the message again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from aworld_graph import RemoteAgent, Runners, Swarm
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import Assistant, create_app
from tests.server import apps
from tests.server.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from aworld_graph.cli import main; main()"]


class Echo(AgentExecutor):
    """A2A agent: a task whose artifact is ``remote heard: <text>``; with ``hold`` set, it
    waits for ``release`` before it answers; with ``fail`` set, the task fails; with ``ask``
    set, a new task first asks 'Which color?' (``input-required``) and answers the reply."""

    def __init__(self) -> None:
        self.received: list[str] = []
        self.hold = False
        self.fail = False
        self.direct = False
        self.ask = False
        self.release = threading.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        text = context.get_user_input()
        self.received.append(text)
        if self.direct:  # an answer without a task
            await event_queue.enqueue_event(new_text_message(f"at once: {text}"))
            return
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if self.ask and context.current_task is None:
            await updater.requires_input(updater.new_agent_message([new_text_part("Which color?")]))
            return
        if self.hold:
            await asyncio.to_thread(
                self.release.wait, 60
            )  # bounded: a failed test never hangs the exit
        if self.fail:
            await updater.failed(updater.new_agent_message([new_text_part("out of ideas")]))
            return
        await updater.add_artifact([new_text_part(f"remote heard: {text}")])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def _a2a_app(agent: Echo, url: str) -> Starlette:
    card = AgentCard(
        name="echo",
        description="Says what it heard.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC")],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    handler = DefaultRequestHandler(
        agent_executor=agent, task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def a2a_agent() -> Iterator[tuple[Echo, str]]:
    """The echo agent served on a loopback port (stopped at the end)."""
    agent = Echo()
    holder: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:  # the card needs the URL
        await holder["app"](scope, receive, send)

    server = LiveServer(app)
    port = _free_port()
    server.server.config.port = port
    holder["app"] = _a2a_app(agent, f"http://127.0.0.1:{port}/")
    with server:
        yield agent, server.url
    agent.release.set()


@pytest.fixture
def garbage_url() -> Iterator[str]:
    """A server that answers every request with text that is neither A2A nor LangGraph's."""

    async def junk(request: Any) -> PlainTextResponse:
        return PlainTextResponse("<html>not an agent</html>")

    app = Starlette(routes=[Route("/{path:path}", junk, methods=["GET", "POST"])])
    with LiveServer(app) as server:
        yield server.url


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A server that takes every request and never answers (until the test ends)."""
    done = threading.Event()

    async def silent(request: Any) -> PlainTextResponse:
        await asyncio.to_thread(done.wait, 60)
        return PlainTextResponse("too late")

    app = Starlette(routes=[Route("/{path:path}", silent, methods=["GET", "POST"])])
    with LiveServer(app) as server:
        try:
            yield server.url
        finally:
            done.set()


def _gone_url() -> str:
    return f"http://127.0.0.1:{_free_port()}"  # nothing listens there any more


async def test_an_a2a_agent_answers_as_a_node(
    a2a_agent: tuple[Echo, str], saver: TrajectorySaver
) -> None:
    agent, url = a2a_agent
    remote = RemoteAgent(name="echo", url=url, description="the echo agent")
    response = await Runners.run("hello there", swarm=Swarm(remote), checkpointer=saver)
    assert response.success, response.msg
    assert response.answer == "remote heard: hello there"
    assert agent.received == ["hello there"]
    record = response.state["trace"][-1]
    assert record["kind"] == "remote" and record["raw"]["protocol"] == "a2a"
    assert record["sub_thread"] == record["raw"]["task_id"]  # the remote task the node ran


async def test_a_team_leader_delegates_to_a_remote_agent_wrapped_in_a_swarm(
    a2a_agent: tuple[Echo, str], saver: TrajectorySaver
) -> None:
    from aworld_graph import Agent, TeamSwarm
    from aworld_graph.testing import ScriptedModel, tool_call

    agent, url = a2a_agent
    member = Swarm(RemoteAgent(name="echo", url=url), name="echoes")
    leader = Agent(
        name="lead",
        model=ScriptedModel([tool_call("ask_echoes", {"request": "check this"}), "checked"]),
    )
    response = await Runners.run(
        "go", swarm=TeamSwarm(leader, member, root_agent=leader), checkpointer=saver
    )
    assert response.success and response.answer == "checked"
    assert agent.received == ["check this"]


async def test_a_langgraph_assistant_answers_as_a_node(
    saver: TrajectorySaver, tmp_path: Path
) -> None:
    served = Assistant.of(apps.counter, target="tests.server.apps:counter")
    with TrajectorySaver(tmp_path / "remote.db") as store:
        with LiveServer(create_app([served], store=store, api_key="")) as server:
            remote = RemoteAgent(name="far", url=server.url, assistant_id="counter")
            response = await Runners.run(
                "one two three four", swarm=Swarm(remote), checkpointer=saver
            )
    assert response.success, response.msg
    assert response.answer == "4 words"
    sent = response.state["trace"][-1]["raw"]
    assert sent["protocol"] == "langgraph" and sent["thread_id"] and sent["run_id"]


async def test_an_a2a_agent_that_answers_with_a_message_at_once(
    a2a_agent: tuple[Echo, str], saver: TrajectorySaver
) -> None:
    agent, url = a2a_agent
    agent.direct = True
    response = await Runners.run(
        "quick", swarm=Swarm(RemoteAgent(name="e", url=url)), checkpointer=saver
    )
    assert response.success and response.answer == "at once: quick"


async def test_the_api_key_is_read_from_the_named_variable(
    saver: TrajectorySaver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = Assistant.of(apps.chat, target="tests.server.apps:chat")
    with TrajectorySaver(tmp_path / "remote.db") as store:
        with LiveServer(create_app([served], store=store, api_key="remote-key-77")) as server:
            remote = RemoteAgent(
                name="far", url=server.url, assistant_id="chat", api_key_env="FAR_KEY"
            )
            swarm = Swarm(remote)
            refused = await Runners.run("hi", swarm=swarm, checkpointer=saver)
            monkeypatch.setenv("FAR_KEY", "remote-key-77")
            answered = await Runners.run("hi", swarm=swarm, checkpointer=saver)
    assert refused.status == "error" and "missing or wrong API key" in str(refused.msg)
    assert answered.success and answered.answer == "turn 1: hi"
    assert b"remote-key-77" not in (tmp_path / "runs.db").read_bytes()


async def test_a_remote_that_hangs_is_a_tool_error_and_the_resumed_run_joins_its_task(
    a2a_agent: tuple[Echo, str], saver: TrajectorySaver
) -> None:
    agent, url = a2a_agent
    agent.hold = True
    swarm = Swarm(RemoteAgent(name="slowpoke", url=url, timeout=1, poll_interval=0.05))
    first = await Runners.run("take your time", swarm=swarm, checkpointer=saver, task_id="hang")
    assert first.status == "error" and not first.success
    assert "remote agent 'slowpoke'" in str(first.msg) and "no answer within 1 s" in str(first.msg)
    failed = [r for r in saver.transitions("hang") if r.error]
    # the cut-off wait and the node fail with the same clear error (no cancelled task)
    assert failed and all("no answer within 1 s" in str(row.error) for row in failed), failed
    agent.release.set()
    second = await Runners.resume("hang", swarm=swarm, checkpointer=saver)
    assert second.success and second.answer == "remote heard: take your time"
    assert agent.received == ["take your time"]  # joined, never sent again


@pytest.mark.parametrize("protocol", ["a2a", "langgraph"])
async def test_garbage_and_gone_are_tool_errors_naming_the_agent(
    garbage_url: str, saver: TrajectorySaver, protocol: str
) -> None:
    extra = {"assistant_id": "counter"} if protocol == "langgraph" else {}
    for url in (garbage_url, _gone_url()):
        swarm = Swarm(RemoteAgent(name="peer", url=url, timeout=20, **extra))
        response = await Runners.run("hi", swarm=swarm, checkpointer=saver)
        assert response.status == "error", url
        message = str(response.msg)
        assert "ToolError" in message and f"remote agent 'peer' ({url})" in message
        assert "sending failed" in message and "Traceback" not in message


@pytest.mark.parametrize("protocol", ["a2a", "langgraph"])
async def test_a_remote_that_never_answers_the_sending_is_a_tool_error(
    silent_url: str, saver: TrajectorySaver, protocol: str
) -> None:
    extra = {"assistant_id": "counter"} if protocol == "langgraph" else {}
    swarm = Swarm(RemoteAgent(name="mute", url=silent_url, timeout=0.5, **extra))
    response = await Runners.run("hello?", swarm=swarm, checkpointer=saver)
    assert response.status == "error"
    assert "no answer within 0.5 s (sending it did not finish)" in str(response.msg)


async def test_a_failed_remote_task_is_a_tool_error(
    a2a_agent: tuple[Echo, str], saver: TrajectorySaver
) -> None:
    agent, url = a2a_agent
    agent.fail = True
    response = await Runners.run(
        "x", swarm=Swarm(RemoteAgent(name="peer", url=url)), checkpointer=saver
    )
    assert response.status == "error"
    assert "ended: out of ideas" in str(response.msg)


async def test_a_polled_a2a_agent_that_asks_makes_a_human_step_answered_on_its_task(
    a2a_agent: tuple[Echo, str], saver: TrajectorySaver
) -> None:
    agent, url = a2a_agent  # its card says it does not stream: the node polls it
    agent.ask = True
    swarm = Swarm(RemoteAgent(name="painter", url=url, poll_interval=0.05))
    asked = await Runners.run("paint the fence", swarm=swarm, checkpointer=saver, task_id="p")
    assert asked.status == "interrupted"
    value = asked.interrupts[0]["value"]
    assert {k: value[k] for k in ("node", "prompt", "answer")} == {
        "node": "painter",
        "prompt": "Which color?",
        "answer": None,
    }
    # the agent-inbox request the Agent Chat UI answers with its form, as a Human step's
    assert value["action_request"] == {"action": "Which color?", "args": {}}
    assert value["config"]["allow_respond"] and value["config"]["allow_accept"]
    done = await Runners.resume(
        "p", swarm=swarm, value=[{"type": "response", "args": "green"}], checkpointer=saver
    )
    assert done.success, done.msg
    assert done.answer == "remote heard: green"
    assert agent.received == ["paint the fence", "green"]  # the answer went to the same task
    record = done.state["trace"][-1]
    assert (
        record["raw"]["replies"] == ["green"] and record["sub_thread"] == record["raw"]["task_id"]
    )


_CARD = """\
name: relay
nodes:
  - kind: remote
    name: echo
    url: ${ECHO_URL}
    api_key_env: ECHO_KEY
    timeout: 30
    description: the echo agent
"""


async def test_a_yaml_workflow_card_runs_a_remote_node_and_writes_back(
    a2a_agent: tuple[Echo, str],
    saver: TrajectorySaver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aworld_graph import load_workflow
    from aworld_graph.spec.writer import card_to_dict

    agent, url = a2a_agent
    monkeypatch.setenv("ECHO_URL", url)
    monkeypatch.setenv("ECHO_KEY", "sk-remote-secret-1")
    (tmp_path / "relay.yaml").write_text(_CARD)
    swarm = load_workflow(tmp_path / "relay.yaml")
    remote = swarm.nodes["echo"]
    assert isinstance(remote, RemoteAgent) and remote.protocol == "a2a" and remote.timeout == 30
    response = await Runners.run("via yaml", swarm=swarm, checkpointer=saver)
    assert response.answer == "remote heard: via yaml"
    assert card_to_dict(remote) == {
        "kind": "remote",
        "name": "echo",
        "version": 1,
        "description": "the echo agent",
        "url": url,
        "protocol": "a2a",
        "timeout": 30.0,
        "api_key_env": "ECHO_KEY",
    }
    stored = (tmp_path / "runs.db").read_bytes() if (tmp_path / "runs.db").exists() else b""
    assert b"sk-remote-secret-1" not in stored  # the key is read at call time, never kept


def test_a_bad_remote_card_names_the_field(tmp_path: Path) -> None:
    from aworld_graph import load_workflow
    from aworld_graph.errors import DefinitionError

    (tmp_path / "bad.yaml").write_text(
        "name: bad\nnodes:\n  - {kind: remote, name: r, url: 'ftp://x', timeout: 0}\n"
    )
    with pytest.raises(DefinitionError) as caught:
        load_workflow(tmp_path / "bad.yaml")
    assert "url" in str(caught.value) and "timeout" in str(caught.value)


def test_bad_definitions_say_what_to_fix() -> None:
    from aworld_graph.errors import DefinitionError

    with pytest.raises(DefinitionError, match="url must be an http"):
        RemoteAgent(name="x", url="ftp://host")
    with pytest.raises(DefinitionError, match="needs assistant_id"):
        RemoteAgent(name="x", url="http://127.0.0.1:1", protocol="langgraph")
    with pytest.raises(DefinitionError, match="protocol must be"):
        RemoteAgent(name="x", url="http://127.0.0.1:1", protocol="grpc")  # type: ignore[arg-type]


# -- kill -9 while waiting: the resumed node joins the remote task --------------------------

# The killed CLI runs ``tests.procs.remote_caller:far``, one remote node at ``$REMOTE_URL``.


def _saved(db: Path, text: str) -> bool:
    """Whether a saved task write of the store holds ``text``."""
    if not db.exists():
        return False
    with TrajectorySaver(db) as saver:
        return any(text in repr(w[2]) for tup in saver.list(None) for w in tup.pending_writes or [])


def _kill_when_saved(env: dict[str, str], db: Path, sent: Any) -> None:
    run = ["run", "tests.procs.remote_caller:far", "--input", "go", "--task-id", "t1", "--json"]
    proc = subprocess.Popen([*CLI, *run], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (sent() and _saved(db, sent())):  # the remote id is in the checkpoint
        assert proc.poll() is None, "the run ended before it was killed"
        assert time.monotonic() < deadline, "the remote call was never saved"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL


def _resume(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [*CLI, "resume", "t1", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.mark.slow
def test_killed_while_an_a2a_task_runs_the_resume_joins_it(
    a2a_agent: tuple[Echo, str], tmp_path: Path
) -> None:
    agent, url = a2a_agent
    agent.hold = True
    db = tmp_path / "crash.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AWORLD_GRAPH_DB": str(db), "REMOTE_URL": url}
    env.pop("REMOTE_ASSISTANT", None)
    tasks: list[str] = []

    def sent() -> str | None:
        if agent.received and not tasks:
            tasks.extend(_task_ids(db))
        return tasks[0] if tasks else None

    _kill_when_saved(env, db, sent)
    agent.release.set()
    out = _resume(env)
    assert out["answer"] == "remote heard: go" and out["status"] == "finished"
    assert agent.received == ["go"]  # the message was sent once


def _task_ids(db: Path) -> list[str]:
    """The A2A task ids the store's writes name."""
    if not db.exists():
        return []
    with TrajectorySaver(db) as saver:
        found = [
            w[2]["task_id"]
            for tup in saver.list(None)
            for w in tup.pending_writes or []
            if isinstance(w[2], dict) and "task_id" in w[2]
        ]
    return found


@pytest.mark.slow
def test_killed_while_a_langgraph_run_goes_the_resume_joins_it(tmp_path: Path) -> None:
    served = Assistant.of(apps.gated, target="tests.server.apps:gated")
    db = tmp_path / "crash.db"
    with TrajectorySaver(tmp_path / "remote.db") as store:
        with LiveServer(create_app([served], store=store, api_key="")) as server:
            env = {**os.environ, "PYTHONPATH": str(ROOT), "AWORLD_GRAPH_DB": str(db)}
            env |= {"REMOTE_URL": server.url, "REMOTE_ASSISTANT": "gated"}

            def sent() -> str | None:
                threads = [t for t in store.list(None) if t.config["configurable"]["thread_id"]]
                return "run_id" if threads else None

            _kill_when_saved(env, db, sent)
            apps.GATE.set()
            out = _resume(env)
            runs = _remote_runs(store)
    assert out["answer"] == "1 words" and out["status"] == "finished", out
    assert len(runs) == 1, runs  # one remote run: joined after the crash, not started again


def _remote_runs(store: TrajectorySaver) -> set[str]:
    return {str(t.metadata.get("run_id")) for t in store.list(None) if t.metadata.get("run_id")}


@pytest.mark.slow
def test_killed_while_subscribed_to_a_served_a2a_task_the_resume_subscribes_again(
    tmp_path: Path,
) -> None:
    """The served agent streams, so the node follows its task by subscription; killed while
    it does, the resumed node subscribes to the same task (nothing is sent again)."""
    served = Assistant.of(apps.gated, target="tests.server.apps:gated")
    db = tmp_path / "crash.db"
    with TrajectorySaver(tmp_path / "remote.db") as store:
        with LiveServer(create_app([served], store=store, api_key="")) as server:
            env = {**os.environ, "PYTHONPATH": str(ROOT), "AWORLD_GRAPH_DB": str(db)}
            env |= {"REMOTE_URL": f"{server.url}/a2a/gated"}
            env.pop("REMOTE_ASSISTANT", None)
            tasks: list[str] = []

            def sent() -> str | None:
                tasks.extend([] if tasks else _task_ids(db))
                return tasks[0] if tasks else None

            _kill_when_saved(env, db, sent)
            apps.GATE.set()
            out = _resume(env)
            runs = _remote_runs(store)
    assert out["answer"] == "1 words" and out["status"] == "finished", out
    assert runs == {tasks[0]}  # the task's one run: subscribed to again, not sent again
