"""The server's MCP face: every assistant a tool at ``/mcp`` (streamable HTTP) and over stdio
(``aworld-graph serve --mcp-stdio``), tried with the ``mcp`` client and with
``langchain-mcp-adapters`` (in a virtual environment of its own: it needs ``mcp<2``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import venv
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from langgraph_sdk import get_client
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.server import Assistant, create_app
from tests.server import apps
from tests.server.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]
KEY = "mcp-test-key-0123"


@asynccontextmanager
async def _session(url: str, key: str | None = KEY) -> AsyncIterator[ClientSession]:
    headers = {"x-api-key": key} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_tools_list_call_and_the_thread_shows_in_the_langgraph_api(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(api_key=KEY)
    async with _session(server.url) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"approval", "chat", "counter", "gated"}
        schema = tools["counter"].input_schema
        assert set(schema["properties"]) == {"input", "thread_id", "resume"}
        assert schema["properties"]["input"]["type"] == "string"
        result = await session.call_tool("counter", {"input": "one two three"})
    assert not result.is_error
    found = result.structured_content
    assert found is not None and found["status"] == "success"
    assert found["answer"] == "3 words"
    assert found["thread_id"] in result.content[0].text  # type: ignore[union-attr]
    client = get_client(url=server.url, api_key=KEY)
    state = await client.threads.get_state(found["thread_id"])
    runs = await client.runs.list(found["thread_id"])
    await client.aclose()
    assert state["values"]["answer"] == "3 words"  # type: ignore[index]
    assert [r["run_id"] for r in runs] == [found["run_id"]]
    assert runs[0]["status"] == "success" and runs[0]["assistant_id"] == "counter"


async def test_a_human_step_needs_input_and_a_second_call_answers_it(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(api_key=KEY)
    async with _session(server.url) as session:
        first = await session.call_tool("approval", {"input": "plan a trip"})
        asked = first.structured_content
        assert asked is not None and asked["status"] == "needs_input"
        assert asked["prompt"] == "Approve the plan?" and not first.is_error
        thread = asked["thread_id"]
        assert "needs input" in first.content[0].text  # type: ignore[union-attr]
        second = await session.call_tool("approval", {"thread_id": thread, "resume": "approve"})
        with pytest.raises(MCPError, match="nothing to resume"):  # answered once only
            await session.call_tool("approval", {"thread_id": thread, "resume": "again"})
    done = second.structured_content
    assert done is not None and done["status"] == "success"
    assert done["thread_id"] == thread and done["answer"] == "published the plan"
    client = get_client(url=server.url, api_key=KEY)
    state = await client.threads.get_state(thread)
    await client.aclose()
    assert state["values"]["answer"] == "published the plan"  # type: ignore[index]


async def test_a_second_call_with_the_thread_waits_for_the_run_going_on_it(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(api_key=KEY)
    async with _session(server.url) as session:
        first = asyncio.ensure_future(
            session.call_tool("gated", {"input": "held up here", "thread_id": "g-1"})
        )
        client = get_client(url=server.url, api_key=KEY)
        for _ in range(600):  # bounded: until the run holds the thread
            if await _has(client, "g-1") and [
                r for r in await client.runs.list("g-1") if r["status"] == "running"
            ]:
                break
            await asyncio.sleep(0.05)
        await client.aclose()
        second = asyncio.ensure_future(session.call_tool("gated", {"thread_id": "g-1"}))
        await asyncio.sleep(1)  # time for the second call to reach the server, where it waits
        assert not second.done()  # the gate holds the run, so it cannot have answered
        apps.GATE.set()
        answers = [(await first).structured_content, (await second).structured_content]
    assert answers[0] == answers[1] and answers[0] is not None
    assert answers[0]["answer"] == "3 words" and answers[0]["thread_id"] == "g-1"


async def test_bad_arguments_are_an_mcp_error_naming_the_field(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(api_key=KEY)
    async with _session(server.url) as session:
        cases = {
            "'input'": {"input": 7},
            "'colour'": {"input": "x", "colour": "red"},
            "'resume' needs 'thread_id'": {"resume": "yes"},
            "thread_id must be": {"thread_id": "no/slashes here"},
            "no thread": {"thread_id": "never-made", "resume": "yes"},
        }
        for field, arguments in cases.items():
            with pytest.raises(MCPError) as caught:
                await session.call_tool("counter", arguments)
            assert field in caught.value.error.message, arguments
        with pytest.raises(MCPError, match="no tool 'nope'"):
            await session.call_tool("nope", {"input": "x"})
        finished = await session.call_tool("counter", {"input": "a b"})
        thread = finished.structured_content["thread_id"]  # type: ignore[index]
        with pytest.raises(MCPError, match="not waiting for input"):
            await session.call_tool("counter", {"thread_id": thread, "resume": "yes"})


def _clashing() -> list[Assistant]:
    """Two assistants whose ids make the same MCP name (``math_v2``): a counter and a chat."""
    return [
        Assistant.of(apps.counter, assistant_id="math@v2", target="tests.server.apps:counter"),
        Assistant.of(apps.chat, assistant_id="math_v2", target="tests.server.apps:chat"),
    ]


async def test_ids_that_make_the_same_tool_name_are_both_tools_named_apart(
    store: TrajectorySaver,
) -> None:
    listed = []
    for served in (_clashing(), _clashing()[::-1]):  # the names do not depend on the order
        with LiveServer(create_app(served, store=store, api_key="")) as server:
            async with _session(server.url, key=None) as session:
                tools = {t.name: t for t in (await session.list_tools()).tools}
                listed.append(sorted(tools))
                suffixed = next(name for name in tools if name != "math_v2")
                by_id = {t.meta["aworld-graph/assistant_id"]: t for t in tools.values()}  # type: ignore[index]
                counted = await session.call_tool(suffixed, {"input": "one two"})
                chatted = await session.call_tool("math_v2", {"input": "hi"})
    assert listed[0] == listed[1] and len(listed[0]) == 2
    assert suffixed.startswith("math_v2_") and len(suffixed) == len("math_v2_") + 8
    assert by_id["math@v2"].name == suffixed and by_id["math@v2"].title == "math@v2"
    assert by_id["math_v2"].name == "math_v2" and by_id["math_v2"].title == "math_v2"
    assert counted.structured_content["answer"] == "2 words"  # type: ignore[index]
    assert chatted.structured_content["answer"] == "turn 1: hi"  # type: ignore[index]


def test_a_suffixed_tool_name_that_is_another_assistants_id_fails_at_start(
    store: TrajectorySaver,
) -> None:
    probe = create_app(_clashing(), store=store, api_key="")
    name = next(n for n in probe.state.server.mcp.tools if n != "math_v2")
    taken = Assistant.of(apps.gated, assistant_id=name, target="tests.server.apps:gated")
    with pytest.raises(ValueError, match=f"'math@v2' and '{name}' are both MCP tool '{name}'"):
        create_app([*_clashing(), taken], store=store, api_key="")


def test_without_the_key_mcp_is_401_and_says_nothing_of_the_tools(
    serve: Callable[..., LiveServer],
) -> None:
    server = serve(api_key=KEY)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers in ({}, {"x-api-key": "wrong"}, {"authorization": "Bearer wrong"}):
        answer = httpx.post(f"{server.url}/mcp", json=body, headers=headers)
        assert answer.status_code == 401
        assert "counter" not in answer.text and answer.json()["code"] == "unauthorized"
    for method in ("GET", "DELETE"):  # no stream to open, no session to end: POST only
        refused = httpx.request(method, f"{server.url}/mcp")  # without the key: 401 first
        assert refused.status_code == 401 and "counter" not in refused.text
        refused = httpx.request(method, f"{server.url}/mcp", headers={"x-api-key": KEY})
        assert refused.status_code == 405 and "counter" not in refused.text
    assert httpx.post(f"{server.url}/mcp", json=body, headers={"x-api-key": KEY}).status_code != 401


@pytest.mark.slow
async def test_a_call_cut_off_by_a_killed_server_continues_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    from tests.server.test_restart import Served, _port

    db, port, thread = tmp_path / "served.db", _port(), "mcp-call-1"
    first = Served(db, port, AWORLD_TEST_SLOW="hang")
    try:
        saved = await _call_then_kill(first, thread)
    finally:
        first.stop(signal.SIGKILL)
    assert saved, "the call's tool step was never saved"
    second = Served(db, port)
    try:
        async with _session(second.url, key=None) as session:
            done = await session.call_tool("slow", {"thread_id": thread})
        sdk = get_client(url=second.url, api_key=None)
        state = await sdk.threads.get_state(thread)
        await sdk.aclose()
    finally:
        second.stop()
    assert done.structured_content == {
        "thread_id": thread,
        "run_id": done.structured_content["run_id"],  # type: ignore[index]
        "status": "success",
        "answer": "5 words",
    }
    trace = state["values"]["trace"]  # type: ignore[index]
    assert [r["kind"] for r in trace] == ["llm", "tools", "llm"]  # no step was done twice


async def _call_then_kill(served: Any, thread: str) -> bool:
    """Call ``slow`` on ``thread`` and SIGKILL the server once the call's tool step is saved
    (its next model call hangs); whether it was saved."""

    async def call() -> None:
        async with _session(served.url, key=None) as session:
            await session.call_tool(
                "slow", {"input": "five words in this input", "thread_id": thread}
            )

    going = asyncio.ensure_future(call())
    sdk = get_client(url=served.url, api_key=None)
    saved = False
    for _ in range(600):  # bounded: 30 s
        if await _has(sdk, thread):
            state = await sdk.threads.get_state(thread)
            saved = (state["values"] or {}).get("steps", 0) >= 2  # type: ignore[union-attr]
            if saved:
                break
        await asyncio.sleep(0.05)
    await sdk.aclose()
    served.stop(signal.SIGKILL)
    going.cancel()
    await asyncio.gather(going, return_exceptions=True)  # cut off: it never answers
    return saved


async def _has(sdk: Any, thread: str) -> bool:
    found = await sdk.threads.search(limit=100)
    return any(t["thread_id"] == thread for t in found)


async def test_mcp_stdio_serves_the_same_tools_to_the_stdio_client(tmp_path: Path) -> None:
    db = tmp_path / "stdio.db"
    targets = ["tests.server.apps:counter", "tests.server.apps:approval"]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from aworld_graph.cli import main; main()", "serve", *targets],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    params.args += ["--mcp-stdio", "--db", str(db)]
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = sorted(t.name for t in (await session.list_tools()).tools)
        counted = await session.call_tool("counter", {"input": "a b c d"})
        asked = await session.call_tool("approval", {"input": "plan"})
        thread = asked.structured_content["thread_id"]  # type: ignore[index]
        answered = await session.call_tool("approval", {"thread_id": thread, "resume": "no"})
    assert names == ["approval", "counter"]
    assert counted.structured_content["answer"] == "4 words"  # type: ignore[index]
    assert asked.structured_content["status"] == "needs_input"  # type: ignore[index]
    assert answered.structured_content["answer"] == "revised the plan"  # type: ignore[index]
    assert db.exists()  # the runs went to the store named


# -- langchain-mcp-adapters, which needs mcp<2: a virtual environment of its own ---------------

ADAPTERS_VENV = ROOT / ".cache" / "mcp-adapters-venv"
ADAPTERS = ["langchain-mcp-adapters", "mcp<2", "langgraph"]

_ADAPTER_SCRIPT = """
import asyncio, json, sys
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langgraph.prebuilt import create_react_agent


class Model(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


async def main(url, key):
    client = MultiServerMCPClient(
        {"served": {"url": url, "transport": "streamable_http", "headers": {"x-api-key": key}}}
    )
    tools = await client.get_tools()
    call = {"name": "counter", "args": {"input": "how many words here"}, "id": "call-1"}
    model = Model(messages=iter([AIMessage("", tool_calls=[call]), AIMessage("done")]))
    agent = create_react_agent(model, tools)
    out = await agent.ainvoke({"messages": [{"role": "user", "content": "count"}]})
    said = [m.content for m in out["messages"] if m.type == "tool"]
    print(json.dumps({"tools": sorted(t.name for t in tools), "tool_said": said}))


asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def _adapters_python() -> Path:
    """The venv's python, made (once) with ``ADAPTERS`` from PyPI; skips when PyPI is out of
    reach."""
    python = ADAPTERS_VENV / "bin" / "python"
    ready = ADAPTERS_VENV / "installed.txt"
    if ready.exists() and ready.read_text() == "\n".join(ADAPTERS):
        return python
    try:
        httpx.head("https://pypi.org/simple/langchain-mcp-adapters/", timeout=10)
    except httpx.TransportError as exc:
        pytest.skip(f"PyPI cannot be reached to install langchain-mcp-adapters: {exc}")
    venv.create(ADAPTERS_VENV, with_pip=True, clear=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *ADAPTERS],
        check=True,
        timeout=900,
    )
    ready.write_text("\n".join(ADAPTERS))
    return python


@pytest.mark.slow
def test_langchain_mcp_adapters_load_the_tools_into_a_langgraph_agent(
    serve: Callable[..., LiveServer],
) -> None:
    python = _adapters_python()
    server = serve(api_key=KEY)
    done = subprocess.run(
        [str(python), "-c", _ADAPTER_SCRIPT, f"{server.url}/mcp", KEY],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ADAPTERS_VENV,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["tools"] == ["approval", "chat", "counter", "gated"]
    assert len(said["tool_said"]) == 1 and "4 words" in str(said["tool_said"][0])
