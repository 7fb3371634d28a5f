"""Agents with MCP tools from the bundled environment server, through the whole runner."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from aworld_graph import Agent, Runners
from aworld_graph.testing import ScriptedModel, tool_call


def _config(root: Path) -> dict[str, Any]:
    return {
        "mcpServers": {
            "env": {
                "command": sys.executable,
                "args": ["-m", "aworld_graph.environment.server", "--root", str(root)],
                "env": {"SECRET_TOKEN": "sk-never-store-me"},
            }
        }
    }


async def test_agent_calls_mcp_tools_and_the_trajectory_names_server_and_tool(tmp_path: Path, saver: Any) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 391\n")
    model = ScriptedModel(
        [
            [tool_call("env__calculator", {"expression": "17*23"}), tool_call("env__read_file", {"path": "notes.txt"})],
            tool_call("env__read_file", {"path": "../../etc/passwd"}),
            tool_call("env__calculator", {"expression": 17}),
            "391",
        ]
    )
    agent = Agent(name="mcp_user", model=model, mcp_config=_config(tmp_path))
    response = await Runners.run("17*23?", agent=agent, checkpointer=saver)
    assert response.answer == "391" and response.success
    assert {"env__calculator", "env__read_file", "env__list_files"} <= set(model.calls[0].tool_names)
    first = response.trajectory[0]["reward"]["tool_outputs"]
    assert [(o["server"], o["name"], o["is_error"]) for o in first] == [("env", "env__calculator", False), ("env", "env__read_file", False)]
    assert first[0]["content"] == "391" and "the answer is 391" in first[1]["content"]
    escape = response.trajectory[1]["reward"]["tool_outputs"][0]
    assert escape["is_error"] and "outside the environment root" in escape["content"]
    assert "root:" not in escape["content"]
    invalid = response.trajectory[2]["reward"]["tool_outputs"][0]
    assert invalid["is_error"]
    raw = (tmp_path / "runs.db").read_bytes() if (tmp_path / "runs.db").exists() else b""
    assert b"sk-never-store-me" not in raw


async def test_all_servers_are_used_when_mcp_servers_is_omitted(tmp_path: Path, saver: Any) -> None:
    config = _config(tmp_path)
    config["mcpServers"]["second"] = dict(config["mcpServers"]["env"])
    model = ScriptedModel(["no tools needed"])
    await Runners.run("hi", agent=Agent(name="a", model=model, mcp_config=config), checkpointer=saver)
    names = model.calls[0].tool_names
    assert any(n.startswith("env__") for n in names) and any(n.startswith("second__") for n in names)
    only = ScriptedModel(["ok"])
    await Runners.run("hi", agent=Agent(name="b", model=only, mcp_config=config, mcp_servers=["second"]), checkpointer=saver)
    assert all(n.startswith("second__") for n in only.calls[0].tool_names)
