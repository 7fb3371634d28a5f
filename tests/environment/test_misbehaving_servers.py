"""Servers that crash, hang, talk garbage, or cannot start: every failure is a ToolOutcome."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from aworld_graph.environment import Sandbox, ServerUnavailable
from aworld_graph.tools import ToolOutcome

from .conftest import REPO, SECRET_ENV, alive, bad, no_secret

pytestmark = pytest.mark.asyncio(loop_scope="module")


def pid_of(outcome: ToolOutcome) -> int:
    assert not outcome.is_error, outcome.content
    return int(outcome.result["structuredContent"]["result"])


def pids_tagged(tag: str) -> list[int]:
    """Processes whose command line contains ``tag`` (for servers that cannot tell their pid)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if tag.encode() in (proc / "cmdline").read_bytes() and alive(int(proc.name)):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    config = {"mcpServers": {"bad": bad(), "missing": {"command": "aworld-graph-no-such-command"}}}
    async with Sandbox(mcp_config=config, mcp_servers=["bad"], call_timeout=20) as box:
        yield box


async def test_structured_image_and_error_results(sandbox: Sandbox) -> None:
    record = await sandbox.mcpservers.call_tool("bad", "record", {"name": "n"})
    assert record.result["structuredContent"] == {"name": "n", "count": 3}
    assert json.loads(record.content) == {"name": "n", "count": 3}
    picture = await sandbox.mcpservers.call_tool("bad", "picture", {})
    assert picture.content == "a tiny picture\n[image: image/png, 70 bytes; not shown as text]"
    image = picture.result["content"][1]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert image["size_bytes"] == 70 and len(base64.b64decode(image["data"])) == 70  # kept whole
    big = await sandbox.mcpservers.call_tool("bad", "picture", {"big_kib": 1100})
    assert big.content == "[image: image/png, 1126400 bytes; not shown as text]"
    assert big.result["content"][0] == {
        "type": "image",
        "mimeType": "image/png",
        "size_bytes": 1126400,
        "sha256": hashlib.sha256(bytes(1126400)).hexdigest(),
        "omitted": True,
    }
    failed = await sandbox.mcpservers.call_tool("bad", "fail", {"reason": "disk on fire"})
    assert failed.is_error and failed.server == "bad"
    assert (
        failed.content
        == "Tool 'bad__fail' reported an error: Error executing tool fail: disk on fire"
    )
    assert failed.result["isError"] is True


async def test_garbage_is_an_error_and_the_connection_survives(sandbox: Sandbox) -> None:
    connects = sandbox.mcpservers.connection("bad").connects
    outcome = await sandbox.mcpservers.call_tool("bad", "garbage", {})
    assert outcome.is_error and outcome.result["error_type"] == "bad_response"
    assert "MCP server 'bad' answered 'garbage' with a malformed result" in outcome.content
    assert "content: Input should be a valid list" in outcome.content
    assert (await sandbox.mcpservers.call_tool("bad", "echo", {"text": "ok"})).content == "ok"
    assert sandbox.mcpservers.connection("bad").connects == connects


@pytest.mark.parametrize("where", ["result", "line"])
async def test_bytes_that_are_not_utf8_restart_the_server(sandbox: Sandbox, where: str) -> None:
    connection = sandbox.mcpservers.connection("bad")
    pid = pid_of(await sandbox.mcpservers.call_tool("bad", "pid", {}))
    connects = connection.connects
    outcome = await sandbox.mcpservers.call_tool("bad", "latin1", {"where": where}, timeout=60)
    assert outcome.is_error and outcome.result["error_type"] == "bad_encoding"
    assert "MCP server 'bad' wrote bytes that are not UTF-8 to its stdout while running" in (
        outcome.content
    )
    assert ("b'\\xe9'" if where == "result" else "b'\\xff") in outcome.content
    assert "restarted on the next call" in outcome.content
    new_pid = pid_of(await sandbox.mcpservers.call_tool("bad", "pid", {}))
    assert new_pid != pid and not alive(pid)
    assert connection.connects == connects + 1
    assert (await sandbox.mcpservers.call_tool("bad", "echo", {"text": "ok"})).content == "ok"


async def test_a_line_that_is_not_json_is_one_warning_line(
    sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    connects = sandbox.mcpservers.connection("bad").connects
    with caplog.at_level("WARNING"):
        outcome = await sandbox.mcpservers.call_tool("bad", "noisy", {"text": "fine"})
    assert outcome.content == "fine" and not outcome.is_error
    records = [r for r in caplog.records if "not JSON-RPC" in r.getMessage()]
    assert len(records) == 1 and records[0].exc_info is None
    assert records[0].levelname == "WARNING"
    assert "'DEBUG: this line is not JSON-RPC'" in records[0].getMessage()
    assert sandbox.mcpservers.connection("bad").connects == connects


async def test_hanging_tool_times_out_and_the_connection_survives(sandbox: Sandbox) -> None:
    pid = pid_of(await sandbox.mcpservers.call_tool("bad", "pid", {}))
    outcome = await sandbox.mcpservers.call_tool("bad", "hang", {}, timeout=0.5)
    assert outcome.is_error and outcome.result["error_type"] == "timeout"
    assert outcome.content.startswith(
        "Tool 'bad__hang' did not answer within 0.5 s and was cancelled."
    )
    assert "mcpServers.bad.timeout" in outcome.content
    assert pid_of(await sandbox.mcpservers.call_tool("bad", "pid", {})) == pid


async def test_caller_cancellation_propagates_and_the_connection_survives(sandbox: Sandbox) -> None:
    pid = pid_of(await sandbox.mcpservers.call_tool("bad", "pid", {}))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await sandbox.call_tool("bad__hang", {})
    assert pid_of(await sandbox.mcpservers.call_tool("bad", "pid", {})) == pid


async def test_crash_mid_call_then_reconnect(sandbox: Sandbox) -> None:
    connection = sandbox.mcpservers.connection("bad")
    pid = pid_of(await sandbox.mcpservers.call_tool("bad", "pid", {}))
    connects = connection.connects
    crashed = await sandbox.mcpservers.call_tool("bad", "crash", {"leak": True})
    assert crashed.is_error and crashed.result["error_type"] == "server_died"
    assert (
        "MCP server 'bad' closed the connection while running 'crash' (it crashed or exited)"
        in crashed.content
    )
    assert "fatal: token *** rejected" in crashed.content  # its stderr, with the env secret masked
    assert "It will be restarted on the next call" in crashed.content
    no_secret(crashed, crashed.result)
    new_pid = pid_of(await sandbox.mcpservers.call_tool("bad", "pid", {}))
    assert new_pid != pid and not alive(pid)
    assert connection.connects == connects + 1


async def test_missing_command() -> None:
    config = {"mcpServers": {"bad": bad(), "missing": {"command": "aworld-graph-no-such-command"}}}
    async with Sandbox(mcp_config=config, mcp_servers=["missing"]) as box:
        outcome = await box.mcpservers.call_tool("missing", "anything", {"x": 1})
        assert outcome.is_error and outcome.server == "missing"
        assert outcome.result["error_type"] == "server_unavailable"
        assert (
            "MCP server 'missing' (stdio command 'aworld-graph-no-such-command'): command "
            "'aworld-graph-no-such-command' was not found; install it or fix mcpServers.missing.command"
        ) in outcome.content
        assert "The call to 'anything' was not made." in outcome.content
        with pytest.raises(ServerUnavailable, match="was not found") as info:
            await box.mcpservers.list_tools()
        assert info.value.server == "missing"
        via_provider = await box.call_tool("missing__anything", {})
        assert via_provider.is_error and "was not found" in via_provider.content
    async with Sandbox(mcp_config=config, skip_unavailable=True) as box:
        names = {tool["function"]["name"] for tool in await box.mcpservers.list_tools()}
        assert "bad__echo" in names and not any(n.startswith("missing__") for n in names)
        assert "was not found" in box.mcpservers.unavailable["missing"]


async def test_server_that_exits_at_start() -> None:
    async with Sandbox(mcp_config={"mcpServers": {"b": bad("--crash-at-start")}}) as box:
        outcome = await box.mcpservers.call_tool("b", "pid", {})
    assert outcome.is_error and outcome.result["error_type"] == "server_unavailable"
    assert "exited or closed its output before the MCP handshake finished" in outcome.content
    assert "bad-server: cannot start, token *** invalid" in outcome.content
    no_secret(outcome, outcome.result)


async def test_server_that_never_answers_the_handshake_is_stopped() -> None:
    tag = f"--tag={uuid.uuid4()}"
    box = Sandbox(mcp_config={"mcpServers": {"b": bad("--silent-start", tag)}}, connect_timeout=0.5)
    async with box:
        outcome = await box.mcpservers.call_tool("b", "pid", {})
        assert outcome.is_error
        assert "did not finish the MCP handshake within 0.5 s" in outcome.content
    assert pids_tagged(tag) == []


async def test_unreachable_http_server() -> None:
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = {
        "mcpServers": {
            "web": {
                "url": f"http://127.0.0.1:{port}/mcp",
                "headers": {"Authorization": "Bearer ${AWORLD_GRAPH_TEST_TOKEN}"},
            }
        }
    }
    async with Sandbox(mcp_config=config) as box:
        outcome = await box.call_tool("web__anything", {})
    assert outcome.is_error and outcome.result["error_type"] == "server_unavailable"
    assert (
        f"MCP server 'web' (streamable-http endpoint http://127.0.0.1:{port}/mcp) cannot be reached"
        in outcome.content
    )
    assert "start the server or fix mcpServers.web.url" in outcome.content
    no_secret(outcome, outcome.result)


async def test_cancelled_run_leaves_no_server_process() -> None:
    pids: list[int] = []
    started = asyncio.Event()

    async def run() -> None:
        async with Sandbox(mcp_config={"mcpServers": {"b": bad()}}) as box:
            pids.append(pid_of(await box.mcpservers.call_tool("b", "pid", {})))
            started.set()
            await box.mcpservers.call_tool("b", "hang", {})

    task = asyncio.create_task(run())
    await started.wait()
    assert alive(pids[0])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not alive(pids[0])


async def test_timed_out_run_leaves_no_server_process() -> None:
    pids: list[int] = []
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(None) as deadline:
            async with Sandbox(mcp_config={"mcpServers": {"b": bad()}}) as box:
                pids.append(pid_of(await box.mcpservers.call_tool("b", "pid", {})))
                deadline.reschedule(asyncio.get_running_loop().time() + 0.2)
                await box.mcpservers.call_tool("b", "hang", {}, timeout=60)
    assert not alive(pids[0])


SEED_SCRIPT = """
import asyncio, sys
from aworld_graph.environment import Sandbox

mcp_config = {"mcpServers": {"bad": {"command": sys.executable, "args": [sys.argv[1]]}}}

async def _list_tools():
    sand_box = Sandbox(mcp_config=mcp_config, mcp_servers=["bad"])
    tools = await sand_box.mcpservers.list_tools()
    print((await sand_box.mcpservers.call_tool("bad", "pid", {})).content)
    return tools

if __name__ == "__main__":
    tools = asyncio.run(_list_tools())
    print(len(tools))
"""


async def test_seed_usage_without_closing_leaves_no_server_process(tmp_path: Path) -> None:
    script = tmp_path / "seed.py"
    script.write_text(SEED_SCRIPT)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-W", "always::ResourceWarning", str(script), str(REPO / "tests/environment/bad_server.py"),
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    pid, count = out.decode().split()
    assert int(count) == 11
    assert not alive(int(pid))
    for trouble in ("Traceback", "Exception ignored", "Task was destroyed", "ResourceWarning"):
        assert trouble not in err.decode()


async def test_secrets_stay_out_of_everything(sandbox: Sandbox) -> None:
    assert SECRET_ENV not in repr(sandbox.config) and SECRET_ENV not in repr(sandbox)
    outcome = await sandbox.mcpservers.call_tool("bad", "echo", {"text": 5})
    no_secret(outcome, outcome.result)
