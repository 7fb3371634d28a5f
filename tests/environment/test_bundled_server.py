"""The bundled environment server through a Sandbox, over stdio, streamable HTTP and SSE."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from aworld_graph.environment import Sandbox
from aworld_graph.tools import MAX_TOOL_TEXT, ToolProvider

from .conftest import bundled, no_secret

pytestmark = pytest.mark.asyncio(loop_scope="module")

TOOLS = {
    "calculator",
    "list_files",
    "read_file",
    "search_files",
    "note_set",
    "note_get",
    "note_list",
}


def http_config(url: str, kind: str = "streamable-http") -> dict[str, object]:
    return {
        "mcpServers": {
            "env": {
                "type": kind,
                "url": url,
                "timeout": 30,
                "headers": {"Authorization": "Bearer ${AWORLD_GRAPH_TEST_TOKEN}"},
            }
        }
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["stdio", "http", "sse"])
async def sandbox(request: pytest.FixtureRequest, env_root: Path) -> AsyncIterator[Sandbox]:
    if request.param == "stdio":
        config: dict[str, object] = {"mcpServers": {"env": bundled(env_root)}}
    elif request.param == "http":
        config = http_config(request.getfixturevalue("http_url"))
    else:
        config = http_config(request.getfixturevalue("sse_url"), "sse")
    async with Sandbox(mcp_config=config) as box:
        yield box


async def test_seed_usage_lists_openai_tools(sandbox: Sandbox) -> None:
    tools = await sandbox.mcpservers.list_tools()
    assert {tool["function"]["name"] for tool in tools} == {f"env__{name}" for name in TOOLS}
    calculator = next(t for t in tools if t["function"]["name"] == "env__calculator")
    assert calculator["type"] == "function"
    assert calculator["function"]["parameters"]["required"] == ["expression"]
    assert "arithmetic" in calculator["function"]["description"]


async def test_sandbox_is_a_tool_provider(sandbox: Sandbox) -> None:
    assert isinstance(sandbox, ToolProvider)
    specs = await sandbox.tool_specs()
    assert {spec.name for spec in specs} == {f"env__{name}" for name in TOOLS}
    outcome = await sandbox.call_tool("env__calculator", {"expression": "6 * 7"})
    assert (outcome.content, outcome.is_error, outcome.server) == ("42", False, "env")
    assert outcome.result == {
        "content": [{"type": "text", "text": "42"}],
        "structuredContent": {"result": 42},
    }
    assert outcome.duration_ms > 0


async def test_calculator_errors_reach_the_model(sandbox: Sandbox) -> None:
    outcome = await sandbox.mcpservers.call_tool(
        "env", "calculator", {"expression": "__import__('os')"}
    )
    assert outcome.is_error
    assert "Tool 'env__calculator' reported an error" in outcome.content
    assert "'__import__' is not available" in outcome.content


async def test_arguments_are_validated_before_the_call(sandbox: Sandbox) -> None:
    missing = await sandbox.mcpservers.call_tool("env", "calculator", {})
    wrong = await sandbox.mcpservers.call_tool("env", "read_file", {"path": 3})
    for outcome in (missing, wrong):
        assert outcome.is_error and outcome.server == "env"
        assert outcome.result["error_type"] == "invalid_arguments"
        assert "Call it again with arguments matching its schema" in outcome.content
    assert (
        "Invalid arguments for tool 'env__calculator': (arguments): 'expression' is a required property"
        in missing.content
    )
    assert "path: 3 is not of type 'string'" in wrong.content


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": "docs/../../outside/secret.txt"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "link_out"}),
        ("read_file", {"path": "dir_out/secret.txt"}),
        ("list_files", {"path": "dir_out"}),
        ("list_files", {"path": ".."}),
        ("search_files", {"pattern": "secret", "path": "../outside"}),
    ],
)
async def test_path_escapes_are_refused(
    sandbox: Sandbox, tool: str, arguments: dict[str, str]
) -> None:
    outcome = await sandbox.mcpservers.call_tool("env", tool, arguments)
    assert outcome.is_error
    assert "outside the environment root" in outcome.content
    assert "top secret" not in json.dumps(outcome.result)


async def test_files_inside_the_root(sandbox: Sandbox) -> None:
    listing = await sandbox.mcpservers.call_tool("env", "list_files", {})
    assert "docs/" in listing.content.splitlines()
    read = await sandbox.mcpservers.call_tool("env", "read_file", {"path": "docs/notes.md"})
    assert read.content == "# Notes\nThe answer is 42.\n"
    found = await sandbox.mcpservers.call_tool("env", "search_files", {"pattern": "answer"})
    assert found.content == "docs/notes.md:2: The answer is 42."
    secret = await sandbox.mcpservers.call_tool("env", "search_files", {"pattern": "top secret"})
    assert secret.content == "no matches for 'top secret' under '.'"


async def test_large_results_are_truncated_for_the_model_only(sandbox: Sandbox) -> None:
    outcome = await sandbox.mcpservers.call_tool("env", "read_file", {"path": "big.txt"})
    assert not outcome.is_error
    assert outcome.content.endswith(f"[truncated: showing {MAX_TOOL_TEXT} of 20000 characters]")
    assert outcome.result["content"][0]["text"] == "y" * 20_000


async def test_notebook_per_session(sandbox: Sandbox, request: pytest.FixtureRequest) -> None:
    calls = sandbox.mcpservers
    assert (
        await calls.call_tool("env", "note_set", {"key": "plan", "value": "step 1"})
    ).content == "saved note 'plan'"
    assert (await calls.call_tool("env", "note_get", {"key": "plan"})).content == "step 1"
    listed = await calls.call_tool("env", "note_list", {})
    assert listed.result["structuredContent"] == {"result": ["plan"]}
    missing = await calls.call_tool("env", "note_get", {"key": "nope"})
    assert missing.is_error and "no note 'nope'; saved keys: 'plan'" in missing.content
    # Another session (a second connection) has its own, empty notebook.
    async with Sandbox(mcp_config=sandbox.config) as other:
        assert (await other.mcpservers.call_tool("env", "note_list", {})).result[
            "structuredContent"
        ] == {"result": []}


async def test_one_connection_serves_many_concurrent_calls(sandbox: Sandbox) -> None:
    before = sandbox.mcpservers.connection("env").connects
    outcomes = await asyncio.gather(
        *(sandbox.call_tool("env__calculator", {"expression": f"{i} * 2"}) for i in range(20))
    )
    assert [o.content for o in outcomes] == [str(i * 2) for i in range(20)]
    assert sandbox.mcpservers.connection("env").connects == before == 1


async def test_unknown_names_are_errors_not_exceptions(sandbox: Sandbox) -> None:
    tool = await sandbox.mcpservers.call_tool("env", "teleport", {})
    assert (
        tool.is_error
        and "has no tool 'teleport' (its tools: calculator, list_files" in tool.content
    )
    server = await sandbox.mcpservers.call_tool("elsewhere", "x", {})
    assert (
        server.is_error
        and "No MCP server named 'elsewhere' in this sandbox (servers: env)" in server.content
    )
    exposed = await sandbox.call_tool("nothing_here", {})
    assert exposed.is_error and "No tool named 'nothing_here'" in exposed.content


async def test_headers_never_leak(http_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with Sandbox(mcp_config=http_config(http_url), call_timeout=5) as box:
        outcomes = [
            await box.call_tool("env__calculator", {"expression": "1 + 1"}),
            await box.call_tool("env__calculator", {"expression": 1}),
            await box.call_tool("env__read_file", {"path": "../x"}),
        ]
        no_secret(box, box.config, *outcomes, *(o.result for o in outcomes))
    no_secret(caplog.text)


async def test_a_catastrophic_search_is_an_error_and_the_server_answers_after(
    tmp_path: Path,
) -> None:
    (tmp_path / "long.txt").write_text("needle\n" + "a" * 60 + "!\n")
    async with Sandbox(mcp_config={"mcpServers": {"env": bundled(tmp_path)}}) as box:
        slow = await box.mcpservers.call_tool("env", "search_files", {"pattern": "(a|aa)+$"})
        assert slow.is_error
        assert "search_files stopped: pattern '(a|aa)+$' took longer than 2 s" in slow.content
        found = await box.mcpservers.call_tool("env", "search_files", {"pattern": "needle"})
        assert found.content == "long.txt:1: needle"
