"""A sandbox outlives an event loop: ``Runners.sync_run`` twice uses two ``asyncio.run`` loops."""

from __future__ import annotations

import asyncio
from typing import Any

from aworld_graph.environment import Sandbox

from .conftest import alive, bad
from .test_misbehaving_servers import pid_of


def test_a_new_event_loop_reconnects() -> None:
    box = Sandbox(mcp_config={"mcpServers": {"b": bad()}})
    outcomes: list[Any] = []

    async def call() -> None:
        outcomes.append(await box.mcpservers.call_tool("b", "pid", {}))

    asyncio.run(call())  # connection left open: it dies with this loop
    asyncio.run(call())
    first, second = (pid_of(o) for o in outcomes)
    assert first != second and not alive(first)
    asyncio.run(box.aclose())
    assert not alive(second)
