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


async def test_agent_calls_mcp_tools_and_the_trajectory_names_server_and_tool(
    tmp_path: Path, saver: Any
) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 391\n")
    model = ScriptedModel(
        [
            [
                tool_call("env__calculator", {"expression": "17*23"}),
                tool_call("env__read_file", {"path": "notes.txt"}),
            ],
            tool_call("env__read_file", {"path": "../../etc/passwd"}),
            tool_call("env__calculator", {"expression": 17}),
            "391",
        ]
    )
    agent = Agent(name="mcp_user", model=model, mcp_config=_config(tmp_path))
    response = await Runners.run("17*23?", agent=agent, checkpointer=saver)
    assert response.answer == "391" and response.success
    assert {"env__calculator", "env__read_file", "env__list_files"} <= set(
        model.calls[0].tool_names
    )
    first = response.trajectory[0]["reward"]["tool_outputs"]
    assert [(o["server"], o["name"], o["is_error"]) for o in first] == [
        ("env", "env__calculator", False),
        ("env", "env__read_file", False),
    ]
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
    await Runners.run(
        "hi", agent=Agent(name="a", model=model, mcp_config=config), checkpointer=saver
    )
    names = model.calls[0].tool_names
    assert any(n.startswith("env__") for n in names) and any(
        n.startswith("second__") for n in names
    )
    only = ScriptedModel(["ok"])
    await Runners.run(
        "hi",
        agent=Agent(name="b", model=only, mcp_config=config, mcp_servers=["second"]),
        checkpointer=saver,
    )
    assert all(n.startswith("second__") for n in only.calls[0].tool_names)


DEAD = {"command": "/bin/false"}


async def test_a_dead_server_is_left_out_recorded_and_reported(tmp_path: Path, saver: Any) -> None:
    config = _config(tmp_path)
    config["mcpServers"]["dead"] = DEAD
    model = ScriptedModel([tool_call("env__calculator", {"expression": "6*7"}), "42", "42"])
    agent = Agent(name="calc", model=model, mcp_config=config)
    response = await Runners.run("6*7?", agent=agent, checkpointer=saver)
    assert response.status == "finished" and response.answer == "42"
    assert not any(n.startswith("dead__") for n in model.calls[0].tool_names)
    assert "env__calculator" in model.calls[0].tool_names
    down = response.trajectory[0]["action"]["ext_info"]["unavailable_servers"]
    assert list(down) == ["dead"] and "mcpServers.dead" in down["dead"]
    assert response.trajectory[1]["action"]["ext_info"]["unavailable_servers"] is None  # once
    assert list(response.unavailable_servers) == ["dead"]
    assert "  without MCP server 'dead': MCP server 'dead' (stdio command '/bin/false')" in (
        response.summary()
    )
    again = await Runners.run("6*7?", agent=agent, checkpointer=saver)  # same graph, new run
    assert again.answer == "42" and list(again.unavailable_servers) == ["dead"]


def shout(text: str) -> str:
    """Shout a text."""
    return text.upper()


async def test_an_agent_with_its_own_tools_runs_when_every_server_is_dead(saver: Any) -> None:
    model = ScriptedModel([tool_call("shout", {"text": "hi"}), "HI"])
    config = {"mcpServers": {"dead": DEAD}}
    agent = Agent(name="loud", model=model, tools=[shout], mcp_config=config)
    response = await Runners.run("shout hi", agent=agent, checkpointer=saver)
    assert response.answer == "HI" and model.calls[0].tool_names == ["shout"]
    assert list(response.unavailable_servers) == ["dead"]


async def test_no_tool_source_left_is_an_error_naming_agent_and_servers(saver: Any) -> None:
    config = {"mcpServers": {"dead": DEAD, "gone": {"command": "/nonexistent/server"}}}
    agent = Agent(name="lonely", model=ScriptedModel([]), mcp_config=config)
    response = await Runners.run("hi", agent=agent, checkpointer=saver)
    assert response.status == "error"
    assert "agent 'lonely' has no tool source left" in str(response.msg)
    assert "mcpServers.dead" in str(response.msg) and "'gone'" in str(response.msg)
    assert "give the agent tools of its own" in str(response.msg)
