"""New input on a workflow's thread that has tasks pending, as LangGraph's server takes it:
on top of the state the thread stands in, the pending tasks dropped. A person who sends a new
message instead of answering a human step starts a new turn; a thread whose run its server's
death stopped takes new input after the restart. Every checkpoint the thread had stays in its
history, and ``aworld-graph resume`` goes on with the thread as the server left it. Over MCP,
a call with ``input`` and the ``thread_id`` of a run that needs input is its next turn. A tool
call the stopped run left without a result is answered as not run, so the model (and a chat
API, which refuses an unanswered call) reads a whole conversation.
(LangGraph applications: side by side with ``langgraph dev`` in ``test_vs_langgraph_dev.py``.)"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from langgraph_sdk import get_client
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from aworld_graph import Agent
from aworld_graph.agent import STOPPED_CALL
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import Assistant, create_app
from aworld_graph.testing import FunctionModel, tool_call
from tests.server.app_server import CLI, ROOT, free_port
from tests.server.conftest import LiveServer
from tests.server.test_restart import Served, processes  # noqa: F401 (its fixture)


async def _ids(sdk: Any, thread: str) -> list[str]:
    """The thread's checkpoint ids, newest first; checks that they make one chain."""
    history = await sdk.threads.get_history(thread, limit=100)
    for newer, older in zip(history, history[1:], strict=False):
        assert newer["parent_checkpoint"]["checkpoint_id"] == older["checkpoint"]["checkpoint_id"]
    return [h["checkpoint"]["checkpoint_id"] for h in history]


def _resume(db: Path, thread: str, *value: str) -> subprocess.CompletedProcess[str]:
    answer = ["--value", *value] if value else []
    return subprocess.run(
        [*CLI, "resume", thread, *answer, "--db", str(db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _users(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values["messages"] if m["role"] == "user"]


@pytest.mark.slow
async def test_new_input_on_a_waiting_or_killed_thread_is_a_new_turn_on_top(
    tmp_path: Path,
    processes: list[Served],  # noqa: F811 (test_restart's fixture)
) -> None:
    db, port = tmp_path / "served.db", free_port()
    first = Served(db, port, "slow", "approval", AWORLD_TEST_SLOW="hang")
    processes.append(first)
    sdk = get_client(url=first.url, api_key=None)
    killed = (await sdk.threads.create())["thread_id"]
    await sdk.runs.create(killed, "slow", input={"input": "five words in this input"})
    for _ in range(600):  # bounded: until the tool's step is saved (the model call hangs next)
        if ((await sdk.threads.get_state(killed))["values"] or {}).get("steps", 0) >= 2:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the run did not save its tool's step")
    first.stop(signal.SIGKILL)
    await sdk.aclose()

    second = Served(db, port, "slow", "approval")
    processes.append(second)
    sdk = get_client(url=second.url, api_key=None)
    assert (await sdk.threads.get(killed))["status"] == "interrupted"
    kept = await _ids(sdk, killed)
    # new input, not input null: the pending model call is dropped and the new turn runs on
    # top; the agent takes up what the killed run left (its last message is the tool's result)
    on_top = await sdk.runs.wait(killed, "slow", input={"input": "two words"})
    assert "__error__" not in on_top and on_top["answer"] == "5 words"
    assert _users(on_top) == ["five words in this input", "two words"]
    assert [r["status"] for r in await sdk.runs.list(killed)] == ["success", "interrupted"]
    now = await _ids(sdk, killed)
    assert now[-len(kept) :] == kept and len(now) > len(kept)  # every step before stays

    waiting = (await sdk.threads.create())["thread_id"]
    asked = await sdk.runs.wait(waiting, "approval", input={"input": "plan the offsite"})
    assert asked["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
    kept = await _ids(sdk, waiting)
    # a new message instead of the answer: a new turn (drafted again, it asks again)
    again = await sdk.runs.wait(waiting, "approval", input={"input": "plan a picnic"})
    assert again["__interrupt__"][0]["value"]["prompt"] == "Approve the plan?"
    assert again["input"] == "plan a picnic"
    assert _users(again) == ["plan the offsite", "plan a picnic"]
    assert (await sdk.threads.get(waiting))["status"] == "interrupted"
    now = await _ids(sdk, waiting)
    assert now[-len(kept) :] == kept and len(now) > len(kept)
    await sdk.aclose()
    second.stop()

    # the CLI reads both threads as the server left them
    shown = await asyncio.to_thread(_resume, db, killed)
    assert shown.returncode == 0, shown.stderr
    assert f"task {killed}: finished" in shown.stdout and "answer: 5 words" in shown.stdout
    answered = await asyncio.to_thread(_resume, db, waiting, "approve")
    assert answered.returncode == 0, answered.stderr
    assert "answer: published the plan" in answered.stdout


async def test_mcp_input_on_a_thread_that_needs_input_is_its_next_turn(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve()
    url = f"{server.url}/mcp"
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        asked = (await mcp.call_tool("approval", {"input": "plan a trip"})).structured_content
        assert asked is not None and asked["status"] == "needs_input"
        thread = asked["thread_id"]
        # input with the thread, not resume: a new turn on top, which asks again
        call = {"thread_id": thread, "input": "plan a picnic"}
        again = (await mcp.call_tool("approval", call)).structured_content
        assert again is not None and again["status"] == "needs_input"
        assert again["prompt"] == "Approve the plan?" and again["thread_id"] == thread
        answer = {"thread_id": thread, "resume": "approve"}
        done = (await mcp.call_tool("approval", answer)).structured_content
    assert done is not None and done["status"] == "success"
    assert done["answer"] == "published the plan"
    sdk = get_client(url=server.url, api_key=None)
    state = await sdk.threads.get_state(thread)
    await sdk.aclose()
    assert _users(state["values"]) == ["plan a trip", "plan a picnic", "approve"]


HOLD = threading.Event()
"""Holds ``lookup`` until a test sets it."""


async def lookup(word: str) -> str:
    """Look a word up."""
    await asyncio.to_thread(HOLD.wait, 60)
    return f"{word}: found"


async def test_a_tool_call_a_cancelled_run_left_is_answered_as_not_run(
    store: TrajectorySaver,
) -> None:
    prompts: list[list[dict[str, Any]]] = []

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        prompts.append(messages)
        if messages[-1]["role"] == "user" and messages[-1]["content"] == "look it up":
            return tool_call("lookup", {"word": "x"}, id="call-1")
        return "a plain answer"

    agent = Agent(name="looker", model=FunctionModel(reply), tools=[lookup])
    HOLD.clear()
    with LiveServer(create_app([Assistant.of(agent)], store=store, api_key="")) as live:
        sdk = get_client(url=live.url, api_key=None)
        try:
            thread = (await sdk.threads.create())["thread_id"]
            said = {"messages": [{"role": "user", "content": "look it up"}]}
            run = await sdk.runs.create(thread, "looker", input=said)
            for _ in range(300):  # until its tool runs
                if (await sdk.threads.get_state(thread))["next"] == ["looker__tools"]:
                    break
                await asyncio.sleep(0.05)
            await sdk.runs.cancel(thread, run["run_id"], wait=True)
            HOLD.set()
            again = {"messages": [{"role": "user", "content": "hello again"}]}
            done = await sdk.runs.wait(thread, "looker", input=again)
        finally:
            HOLD.set()
            await sdk.aclose()
    assert done["messages"][-1]["content"] == "a plain answer"
    last = [(m["role"], m.get("tool_call_id"), m["content"]) for m in prompts[-1][1:]]
    assert last == [
        ("user", None, "look it up"),
        ("assistant", None, ""),
        ("tool", "call-1", STOPPED_CALL),
        ("user", None, "hello again"),
    ]
    assert prompts[-1][2]["tool_calls"][0]["id"] == "call-1"
