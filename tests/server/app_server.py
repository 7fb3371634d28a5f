"""A real server of the LangGraph applications of :mod:`tests.server.langgraph_apps` (and one
aworld-graph agent, ``counter``) over a fresh SQLite store, and an SDK client of it: the
fixtures ``app_server`` and ``app_sdk`` of the LangGraph-application and assistant tests; and
``aworld-graph serve`` in a child process (:class:`ServeProcess`), for the tests that start
the CLI's server, kill it and start it again."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.run import LangGraphApp
from aworld_graph.server import Assistant, create_app
from tests.server import apps
from tests.server import langgraph_apps as graphs
from tests.server.conftest import LiveServer

__all__ = [
    "CLI",
    "ROOT",
    "ServeProcess",
    "app_sdk",
    "app_server",
    "free_port",
    "served",
]

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from aworld_graph.cli import main; main()"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServeProcess:
    """``aworld-graph serve ARGS --port PORT --db DB`` in a child process on 127.0.0.1, run in
    folder ``cwd`` with the repository on ``PYTHONPATH``, no API key, and ``env`` set (a value
    ``None`` unsets it); its output goes to a log file beside ``db``. Returns once the server
    answers ``/ok``; stopped by :meth:`stop`."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        db: Path,
        cwd: Path = ROOT,
        port: int | None = None,
        env: Mapping[str, str | None] | None = None,
    ) -> None:
        port = port or free_port()
        self.url = f"http://127.0.0.1:{port}"
        environ = {**os.environ, "PYTHONPATH": str(ROOT)}
        environ.pop("AWORLD_GRAPH_API_KEY", None)
        for key, value in (env or {}).items():
            if value is None:
                environ.pop(key, None)
            else:
                environ[key] = value
        self.log_path = db.parent / f"serve-{port}-{time.monotonic_ns()}.log"
        command = [*CLI, "serve", *args, "--port", str(port), "--db", str(db)]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                command, cwd=cwd, env=environ, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 60
        while True:  # bounded wait for the port to answer
            try:
                if httpx.get(f"{self.url}/ok", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError(f"serve did not start: {self.log()!r}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> str:
        """Send ``sig`` (if it still runs), wait for it to end (killing it if it will not);
        what it wrote."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        return self.log()

    def log(self) -> str:
        """What the server wrote (stdout and stderr)."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def served() -> list[Assistant]:
    """``chat``, ``review``, ``greeter`` (a factory), ``nested`` and ``persona``, and the
    aworld-graph agent ``counter``."""
    return [
        Assistant.of(graphs.chat, assistant_id="chat", target="tests.server.langgraph_apps:chat"),
        Assistant.of(graphs.review_graph, assistant_id="review"),
        Assistant.of(LangGraphApp(graphs.make_graph, name="greeter")),
        Assistant.of(graphs.nested, assistant_id="nested"),
        Assistant.of(graphs.persona, assistant_id="persona"),
        Assistant.of(apps.counter, target="tests.server.apps:counter"),
    ]


@pytest.fixture
def app_server(store: TrajectorySaver, request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """The server of :func:`served`, or of the test module's own ``served()`` if it has one."""
    assistants = getattr(request.module, "served", served)()
    with LiveServer(create_app(assistants, store=store, api_key="")) as live:
        yield live


@pytest.fixture
async def app_sdk(app_server: LiveServer) -> AsyncIterator[Any]:
    client = get_client(url=app_server.url, api_key=None)
    yield client
    await client.aclose()
