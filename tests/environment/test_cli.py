"""``aworld-graph env serve`` and ``env tools``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from click.testing import CliRunner

from aworld_graph.cli import main
from aworld_graph.environment import Sandbox

from .conftest import bad

CLI = "from aworld_graph.cli import main; main()"


def test_serve_help() -> None:
    result = CliRunner().invoke(main, ["env", "serve", "--help"])
    assert result.exit_code == 0
    for option in ("--transport [stdio|streamable-http|sse]", "--host", "--port", "--root"):
        assert option in result.output


def test_env_serve_over_stdio(env_root: Path) -> None:
    config = {
        "mcpServers": {
            "env": {
                "command": sys.executable,
                "args": ["-c", CLI, "env", "serve", "--root", str(env_root)],
            }
        }
    }

    async def run() -> tuple[str, str]:
        async with Sandbox(mcp_config=config) as box:
            sum_ = await box.call_tool("env__calculator", {"expression": "2 ** 10"})
            text = await box.call_tool("env__read_file", {"path": "hello.txt"})
        return sum_.content, text.content

    assert asyncio.run(run()) == ("1024", "hello world\nsecond line\n")


def test_env_tools_lists_a_config(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"bad": bad()}}))
    result = CliRunner().invoke(main, ["env", "tools", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "bad__echo     Echo the text, ``times`` times." in lines
    assert len(lines) == 11


def test_env_tools_reports_a_dead_server_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text("mcpServers:\n  gone:\n    command: aworld-graph-no-such-command\n")
    result = CliRunner().invoke(main, ["env", "tools", str(path)])
    assert result.exit_code == 1
    assert result.output.startswith(
        "Error: MCP server 'gone' (stdio command 'aworld-graph-no-such-command')"
    )
    assert "Traceback" not in result.output


NOISY_APP = """
import sys
from aworld_graph import Agent
from aworld_graph.testing import ScriptedModel, tool_call

agent = Agent(
    name="noisy",
    mcp_config={"mcpServers": {"bad": {"command": sys.executable, "args": [%r]}}},
    model=ScriptedModel([
        tool_call("bad__noisy", {"text": "one"}, id="c1"),
        tool_call("bad__latin1", {}, id="c2"),
        tool_call("bad__noisy", {"text": "two"}, id="c3"),
        "done",
    ]),
)
"""


def test_a_run_keeps_server_line_noise_to_one_warning_line(tmp_path: Path) -> None:
    import subprocess

    from .conftest import BAD_SERVER

    (tmp_path / "noisy_app.py").write_text(NOISY_APP % str(BAD_SERVER))
    proc = subprocess.run(
        [sys.executable, "-c", "from aworld_graph.cli import main; main()", "run"]
        + ["noisy_app:agent", "--input", "go", "--db", str(tmp_path / "r.db")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "answer: done" in proc.stdout
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = proc.stderr.splitlines()
    assert sum("not JSON-RPC" in line for line in lines) == 2, proc.stderr  # one per noisy call
    assert sum("not UTF-8" in line for line in lines) == 1, proc.stderr
    assert all(line.startswith("warning: ") for line in lines), proc.stderr
