"""A real uvicorn server on 127.0.0.1 in a thread of the test process, started and stopped by
each test that asks for one, serving ``tests.server.apps`` over a fresh SQLite store."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import Assistant, create_app, http_protocol
from tests.server import apps
from tests.server.langgraph_dev import Side, pair_or_skip, write_project

TARGETS = ("approval", "chat", "counter", "gated")


class LiveServer:
    """``with LiveServer(app) as server:`` – ``server.url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            access_log=False,
            lifespan="on",
            http=http_protocol(header_timeout=2.0),
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:  # startup takes milliseconds; bounded
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        apps.GATE.set()  # nothing stays blocked on the gate
        self.server.should_exit = True
        self.thread.join(30)
        assert not self.thread.is_alive(), "the test server did not stop"
        apps.GATE.clear()


def assistants() -> list[Assistant]:
    return [
        Assistant.of(getattr(apps, name), target=f"tests.server.apps:{name}") for name in TARGETS
    ]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TrajectorySaver]:
    saver = TrajectorySaver(tmp_path / "server.db")
    yield saver
    saver.close()


@pytest.fixture
def serve(store: TrajectorySaver) -> Iterator[Callable[..., LiveServer]]:
    """``serve(api_key=None, **options)`` starts a server (stopped at the end of the test)."""
    started: list[LiveServer] = []

    def start(**options: Any) -> LiveServer:
        options.setdefault("api_key", "")
        server = LiveServer(create_app(assistants(), store=store, **options))
        started.append(server.__enter__())
        return server

    yield start
    for server in reversed(started):
        server.__exit__(None, None, None)


@pytest.fixture
def server(serve: Callable[..., LiveServer]) -> LiveServer:
    return serve()


@pytest.fixture(scope="session")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    """``langgraph dev`` and ``aworld-graph serve`` on the same LangGraph project
    (:func:`~tests.server.langgraph_dev.write_project`), one pair for every side-by-side
    module that compares them on it; skips when ``langgraph dev`` cannot be installed."""
    folder = tmp_path_factory.mktemp("project")
    yield from pair_or_skip(write_project(folder), folder / "ours.db")
