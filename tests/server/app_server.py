"""A real server of the LangGraph applications of :mod:`tests.server.langgraph_apps` (and one
aworld-graph agent, ``counter``) over a fresh SQLite store, and an SDK client of it: the
fixtures ``app_server`` and ``app_sdk`` of the LangGraph-application and assistant tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langgraph_sdk import get_client

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.run import LangGraphApp
from aworld_graph.server import Assistant, create_app
from tests.server import apps
from tests.server import langgraph_apps as graphs
from tests.server.conftest import LiveServer

__all__ = ["app_sdk", "app_server", "served"]


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
def app_server(store: TrajectorySaver) -> Iterator[LiveServer]:
    with LiveServer(create_app(served(), store=store, api_key="")) as live:
        yield live


@pytest.fixture
async def app_sdk(app_server: LiveServer) -> AsyncIterator[Any]:
    client = get_client(url=app_server.url, api_key=None)
    yield client
    await client.aclose()
