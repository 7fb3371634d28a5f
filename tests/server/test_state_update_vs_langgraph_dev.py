"""The thread stream's ``state_update`` side by side with LangGraph's own server (``langgraph
dev``), on the LangGraph project of :mod:`tests.server.langgraph_dev`, with the real
``langgraph-sdk`` client (issue 37).

LangGraph's server publishes a ``state_update`` to a thread's stream when the thread's state
is edited (``threads.update_state``), not after a run. It reads the thread stream's modes from
the query parameter ``stream_modes``, while the Python SDK's ``join_stream`` sends
``stream_mode`` (which it leaves unread, serving ``run_modes``); ours reads both, so the
scenario passes the modes both ways.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.test_vs_langgraph_dev import Side, both, state, user

pytestmark = pytest.mark.slow

MODES = ["lifecycle", "state_update"]


async def _state_update(client: Any) -> list[Any]:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "chat", input=user("hi"))
    parts = await client.threads.join_stream(
        tid, stream_mode=MODES, params={"stream_modes": ",".join(MODES)}
    )
    # a run that takes a second: the stream (LangGraph's polls for a thread's new runs) is
    # following it before it ends
    run = await client.runs.create(tid, "chat", input=user("again", delay=1.0))
    seen: list[Any] = []
    async for part in parts:
        if part.event == "metadata" and "attempt" in part.data:
            continue  # a run's start: LangGraph's may have sent it before the stream followed
        seen.append([part.event, part.data])
        if part.event == "metadata" and part.data.get("status") == "run_done":
            break
    edited = await client.threads.update_state(
        tid, {"messages": [{"role": "ai", "content": "edited answer"}]}, as_node="reply"
    )
    async for part in parts:
        seen.append([part.event, {**part.data, "state": state(part.data["state"])}])
        break
    await parts.aclose()
    assert seen[-1][1]["state"]["checkpoint_id"] == edited["checkpoint"]["checkpoint_id"]
    assert seen[0][1]["run_id"] == run["run_id"]
    return seen


async def test_an_edit_of_the_state_is_a_state_update_as_langgraphs(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _state_update)
    assert [event for event, _ in peer] == ["metadata", "state_update"]
    assert peer[1][1]["state"]["values"]["messages"][-1]["content"] == "edited answer"
    assert ours == peer
