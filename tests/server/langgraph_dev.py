"""LangGraph's own server (``langgraph dev``) and ``aworld-graph serve`` on the same LangGraph
project, each in a process of its own on 127.0.0.1, for the side-by-side test and bench.

``langgraph dev`` comes from ``langgraph-cli[inmem]`` (PyPI), installed once into a virtual
environment of its own under the repository's ignored ``.cache/`` so its dependencies never
touch the project's. It runs offline: no version check, no analytics, no LangSmith tracing.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx

from tests.build_lock import building

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".cache" / "langgraph-dev-venv"
PINS = [
    "langgraph-cli[inmem]==0.4.40",
    "langgraph-api==0.16.7",
    "langgraph-runtime-inmem==0.36.7",
    "langgraph==1.2.24",
    "langgraph-sdk==0.4.14",
    "langchain-core==1.8.3",
]
"""What the venv holds: the versions the side-by-side comparison was written against."""

OFFLINE = {
    "LANGGRAPH_NO_VERSION_CHECK": "1",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}

GRAPHS = '''
"""The graphs both servers serve: no network, a fake chat model, an interrupt."""

import asyncio
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    delay: float
    fail: str


async def reply(state: State) -> dict[str, Any]:
    """Waits ``delay`` seconds, then a streamed 'you said: <the last message>' (or raises
    ``ValueError(fail)`` when the input sets ``fail``)."""
    await asyncio.sleep(float(state.get("delay") or 0))
    if state.get("fail"):
        raise ValueError(state["fail"])
    said = str(state["messages"][-1].content)
    model = GenericFakeChatModel(messages=iter([AIMessage(content=f"you said: {said}")]))
    return {"messages": [await model.ainvoke(state["messages"])]}


_chat = StateGraph(State)
_chat.add_node("reply", reply)
_chat.add_edge(START, "reply")
_chat.add_edge("reply", END)
chat = _chat.compile()


class Review(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    draft: str
    verdict: str


def write_draft(state: Review) -> Command[Any]:
    """A draft of the last message, then on to the person."""
    return Command(update={"draft": f"draft of {state['messages'][-1].content}"}, goto="review")


def ask(state: Review) -> dict[str, Any]:
    """Asks a person about the draft (``interrupt``): their answer is the verdict."""
    verdict = interrupt({"question": "Approve the draft?", "draft": state["draft"]})
    return {"verdict": str(verdict), "messages": [AIMessage(content=f"verdict: {verdict}")]}


review_graph = (
    StateGraph(Review)
    .add_node("draft", write_draft, destinations=("review",))
    .add_node("review", ask)
    .add_edge(START, "draft")
    .compile()
)
'''


class Unavailable(RuntimeError):
    """``langgraph dev`` cannot be installed here (PyPI out of reach); the message says why."""


def langgraph_dev_bin() -> Path:
    """The venv's ``langgraph`` command, installing ``PINS`` from PyPI on first use (minutes;
    the log is ``VENV/install.log``). Raises :class:`Unavailable` when PyPI cannot be
    reached."""
    with building(VENV):  # another test file's worker may be building it now
        return _installed()


def _installed() -> Path:
    command = VENV / "bin" / "langgraph"
    ready = VENV / "installed.txt"
    if ready.exists() and ready.read_text() == "\n".join(PINS) and command.exists():
        return command
    try:
        httpx.head("https://pypi.org/simple/langgraph-cli/", timeout=10)
    except httpx.TransportError as exc:
        raise Unavailable(f"PyPI cannot be reached to install langgraph-cli: {exc}") from exc
    venv.create(VENV, with_pip=True, clear=True)
    with (VENV / "install.log").open("wb") as log:
        subprocess.run(
            [str(VENV / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
            + PINS,
            check=True,
            timeout=900,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    ready.write_text("\n".join(PINS))
    return command


def write_project(folder: Path) -> Path:
    """A LangGraph project in ``folder``: ``graphs.py`` and a ``langgraph.json`` serving its
    ``chat`` and ``review`` graphs. Returns the ``langgraph.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graphs.py").write_text(GRAPHS)
    config = {
        "dependencies": ["."],
        "graphs": {"chat": "./graphs.py:chat", "review": "./graphs.py:review_graph"},
    }
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Process:
    """A server ``command`` in a process group of its own, up once ``GET /ok`` answers;
    ``with`` stops the whole group (no child left behind)."""

    def __init__(self, name: str, command: list[str], port: int, cwd: Path, env: dict[str, str]):
        self.name, self.command, self.cwd, self.env = name, command, cwd, env
        self.url = f"http://127.0.0.1:{port}"
        self.log = cwd / f"{name}-{port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Process:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.command,
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while True:  # bounded wait for the port to answer
            try:
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not start: {self.output()[-3000:]}")
            time.sleep(0.1)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL after 30 s; then checks the group is gone."""
        if self.proc is None:
            return
        group = self.proc.pid  # start_new_session: the group's id is the leader's pid
        _signal_group(group, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            _signal_group(group, signal.SIGKILL)
            self.proc.wait(30)
        deadline = time.monotonic() + 30
        while _group_alive(group):  # children (langgraph dev's reloader, workers) too
            if time.monotonic() > deadline:
                _signal_group(group, signal.SIGKILL)
                time.sleep(0.5)
                if _group_alive(group):
                    raise RuntimeError(f"{self.name} left processes in group {group}")
                break
            time.sleep(0.1)
        self.proc = None


def _signal_group(group: int, sig: signal.Signals) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member exists (a zombie being reaped)
        return True
    return True


def langgraph_dev(config: Path, port: int | None = None) -> Process:
    """``langgraph dev`` on ``config`` (not started: use ``with``)."""
    port = port or free_port()
    command = [str(langgraph_dev_bin()), "dev", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--no-browser", "--no-reload", "--config", str(config)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env.pop("PYTHONPATH", None)
    env.update(OFFLINE)
    return Process("langgraph-dev", command, port, config.parent, env)


def aworld_serve(config: Path, db: Path, port: int | None = None) -> Process:
    """``aworld-graph serve --config`` on ``config`` over the SQLite store ``db``."""
    port = port or free_port()
    command = [sys.executable, "-c", "from aworld_graph.cli import main; main()", "serve"]
    command += ["--config", str(config), "--port", str(port), "--db", str(db)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("AWORLD_GRAPH_API_KEY", None)
    return Process("aworld-graph", command, port, config.parent, env)


@dataclass
class Side:
    """One of the two servers of a side-by-side test."""

    url: str
    aliases: dict[str, str]
    """The side's system assistant ids by graph id (LangGraph's server: a uuid5 per graph;
    ours: the graph id itself, documented in docs/server.md)."""


def side_of(url: str) -> Side:
    """The server at ``url`` as a :class:`Side` (its system assistants read from it)."""
    found = httpx.post(f"{url}/assistants/search", json={"limit": 100}, timeout=30).json()
    return Side(url, {a["assistant_id"]: a["graph_id"] for a in found})


@contextmanager
def both_servers(config: Path, db: Path) -> Iterator[dict[str, Side]]:
    """``langgraph dev`` (``"peer"``) and ``aworld-graph serve`` (``"ours"``, on ``db``) on
    the project of ``config``, stopped when the block ends; raises :class:`Unavailable` when
    ``langgraph dev`` cannot be installed."""
    langgraph_dev_bin()
    with langgraph_dev(config) as peer, aworld_serve(config, db) as ours:
        yield {"peer": side_of(peer.url), "ours": side_of(ours.url)}


def pair_or_skip(config: Path, db: Path) -> Iterator[dict[str, Side]]:
    """:func:`both_servers` for a fixture to ``yield from``: the test skips, saying why, when
    ``langgraph dev`` cannot be installed."""
    import pytest

    try:
        with both_servers(config, db) as pair:
            yield pair
    except Unavailable as exc:
        pytest.skip(str(exc))
