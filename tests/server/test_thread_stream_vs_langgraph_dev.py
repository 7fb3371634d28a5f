"""``client.threads.stream`` (the SDK's thread stream protocol: ``POST …/commands``,
``POST …/stream/events``) side by side with LangGraph's own server (``langgraph dev``), on the
LangGraph project of :mod:`tests.server.langgraph_dev`, with the real ``langgraph-sdk`` client
(issue 37): a run's output, its lifecycle and input events, its model's streamed message,
and a person's answer to an interrupt."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.server.test_vs_langgraph_dev import Side, both, sides, user

__all__ = ["sides"]  # the fixture: both servers on the same project

pytestmark = pytest.mark.slow


def said(values: dict[str, Any]) -> list[list[str]]:
    """The messages' types and texts. A run of LangGraph's thread stream keeps an AI message's
    content as content blocks (``[{"type": "text", "text": …}]``), ours as the text."""
    return [[m["type"], _text(m["content"])] for m in values.get("messages", [])]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


async def _control(thread: Any, seen: list[Any]) -> None:
    """The lifecycle, input and messages events of ``thread``'s root graph, as ``(method,
    what)`` (a message event whole), until it completes."""
    async for event in thread.subscribe(["lifecycle", "input", "messages"]):
        params = event["params"]
        if params["namespace"]:
            continue  # a subgraph's: LangGraph's server names each node's
        data = params["data"]
        if event["method"] == "messages":
            seen.append(["messages", data])
            continue
        seen.append([event["method"], data.get("event") or data.get("interrupt_id")])
        if data.get("event") == "completed":
            return


async def _chat(client: Any) -> dict[str, Any]:
    async with client.threads.stream(assistant_id="chat") as thread:
        seen: list[Any] = []
        watch = asyncio.create_task(_control(thread, seen))
        started = await thread.run.start(input=user("hi"))
        output = await thread.output.with_timeout(30)
        await asyncio.wait_for(watch, 30)  # its stream may read the end just after
        state = await client.threads.get_state(thread.thread_id)
    assert isinstance(started["run_id"], str)
    return {"output": said(output), "state": said(state["values"]), "events": seen}


async def _review(client: Any) -> dict[str, Any]:
    async with client.threads.stream(assistant_id="review") as thread:
        await thread.run.start(input=user("my essay"))
        async with asyncio.timeout(30):
            while not thread.interrupted:  # noqa: ASYNC110 (a plain attribute of the SDK's)
                await asyncio.sleep(0.01)
        asked = [i["interrupt_id"] for i in thread.interrupts]
        pending = (await client.threads.get_state(thread.thread_id))["interrupts"]
        await thread.run.respond("approved")
        output = await thread.output.with_timeout(30)
    return {
        "asked": asked,
        "pending": [[i["id"], i["value"]] for i in pending],
        "output": [said(output), output.get("verdict")],
    }


async def test_a_run_started_on_a_thread_stream_ends_alike(sides: dict[str, Side]) -> None:
    ours, peer = await both(sides, _chat)
    assert peer["output"][-1] == ["ai", "you said: hi"]
    streamed = [data for method, data in peer["events"] if method == "messages"]
    assert streamed[0]["event"] == "message-start" and streamed[-1]["event"] == "message-finish"
    assert ours == peer


async def test_an_interrupt_answered_on_a_thread_stream_goes_on_alike(
    sides: dict[str, Side],
) -> None:
    ours, peer = await both(sides, _review)
    assert peer["output"][1] == "approved"
    assert ours == peer
