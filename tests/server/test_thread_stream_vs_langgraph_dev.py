"""``client.threads.stream`` (the SDK's thread stream protocol: ``POST …/commands``,
``POST …/stream/events``) side by side with LangGraph's own server (``langgraph dev``), on the
LangGraph project of :mod:`tests.server.langgraph_dev`, with the real ``langgraph-sdk`` client
(issue 37): a run's output, its lifecycle and input events, its model's streamed message,
a person's answer to an interrupt, and, on a project of its own
(:mod:`tests.server.langgraph_tool_app`), a tool call: its arguments as content blocks on
``messages`` and its start and result (or error) on ``tools``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server import langgraph_tool_app
from tests.server.langgraph_dev import pair_or_skip
from tests.server.test_vs_langgraph_dev import Side, both, status_of, user

__all__ = ["tool_sides"]  # the fixture: both servers on the tool project

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


def _tool_project(folder: Path) -> Path:
    """A ``langgraph.json`` in ``folder`` serving :mod:`tests.server.langgraph_tool_app`'s
    ``tooled`` and ``untold`` (the module copied in as ``tool_graphs.py``)."""
    (folder / "tool_graphs.py").write_text(Path(langgraph_tool_app.__file__).read_text())
    graphs = {name: f"./tool_graphs.py:{name}" for name in ("tooled", "untold")}
    config = folder / "langgraph.json"
    config.write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    return config


@pytest.fixture(scope="module")
def tool_sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    """Both servers on the project of :func:`_tool_project`."""
    config = _tool_project(tmp_path_factory.mktemp("tools"))
    yield from pair_or_skip(config, config.parent / "ours.db")


def _tool_scenario(text: str, assistant: str = "tooled") -> Any:
    async def scenario(client: Any) -> dict[str, Any]:
        """A run of ``tooled`` told ``text``: its output, its ``tools`` and ``messages``
        events (every namespace) in order, and its tool call as ``thread.tool_calls`` has it."""
        seen: list[Any] = []

        async def watch(thread: Any) -> None:
            async for event in thread.subscribe(["lifecycle", "tools", "messages"]):
                params = event["params"]
                if event["method"] != "lifecycle":
                    seen.append([event["method"], params["namespace"], params["data"]])
                elif params["data"]["event"] == "completed" and not params["namespace"]:
                    return

        async def first_call(thread: Any) -> Any:
            handles = [handle async for handle in thread.tool_calls]  # until the run ends
            if not handles:
                return None
            try:
                return [handles[0].name, handles[0].input, await handles[0].output]
            except Exception as exc:  # a tool-error fails its handle's output
                return [handles[0].name, handles[0].input, type(exc).__name__, str(exc)]

        async with client.threads.stream(assistant_id=assistant) as thread:
            watching = asyncio.create_task(watch(thread))
            calling = asyncio.create_task(first_call(thread))
            await thread.run.start(input=user(text))
            output = await thread.output.with_timeout(30)
            await asyncio.wait_for(watching, 30)
            called = await asyncio.wait_for(calling, 30)
        return {"output": said(output), "events": seen, "called": called}

    return scenario


async def test_a_tool_call_streams_alike(tool_sides: dict[str, Side]) -> None:
    ours, peer = await both(tool_sides, _tool_scenario("add 2 3"))
    assert peer["output"][-1] == ["ai", "the tool said: 5"]
    assert [e[2]["event"] for e in peer["events"] if e[0] == "tools"] == [
        "tool-started",
        "tool-finished",
    ]
    assert ours == peer


async def test_a_tool_error_streams_alike(tool_sides: dict[str, Side]) -> None:
    ours, peer = await both(tool_sides, _tool_scenario("divide 1 0"))
    assert [e[2]["event"] for e in peer["events"] if e[0] == "tools"] == [
        "tool-started",
        "tool-error",
    ]
    assert ours == peer


async def test_a_graph_without_the_tool_transformer_sends_no_tools_alike(
    tool_sides: dict[str, Side],
) -> None:
    ours, peer = await both(tool_sides, _tool_scenario("add 2 3", "untold"))
    assert peer["called"] is None
    assert [e for e in peer["events"] if e[0] == "tools"] == []
    assert ours == peer


async def _runs_tools(client: Any) -> list[Any]:
    """``tools`` as a run's stream mode, which the runs routes do not serve: the status of
    ``runs.stream`` and ``runs.create`` with it, and the thread's runs after."""
    thread = (await client.threads.create())["thread_id"]

    async def streamed() -> list[Any]:
        parts = client.runs.stream(thread, "tooled", input=user("add 2 3"), stream_mode="tools")
        return [part async for part in parts]

    made = client.runs.create(thread, "tooled", input=user("add 2 3"), stream_mode=["tools"])
    return [await status_of(streamed()), await status_of(made), await client.runs.list(thread)]


async def test_tools_is_no_stream_mode_of_a_run_alike(tool_sides: dict[str, Side]) -> None:
    ours, peer = await both(tool_sides, _runs_tools)
    assert peer == [422, 422, []]
    assert ours == peer
