"""A run's steps mapped onto the drawn nodes, for delegations, nested swarms and hand-offs inside
a team; and the page's embedded data."""

from __future__ import annotations

import json
import re
from typing import Any

from aworld_graph import Agent, HybridSwarm, Runners, Swarm, TeamSwarm
from aworld_graph.testing import ScriptedModel, tool_call
from aworld_graph.viz import run_path, to_html, view_of

from .swarms import report, say


def _path(response: Any, swarm: Any) -> list[tuple[str | None, str, bool]]:
    return [
        (s["node"], s["kind"], bool(s["thread"]))
        for s in run_path(response, view_of(swarm))["steps"]
    ]


async def test_team_delegating_to_a_nested_swarm(saver: Any) -> None:
    boss = Agent(
        name="boss",
        model=ScriptedModel(
            [
                [
                    tool_call("ask_crew", {"request": "dig"}),
                    tool_call("ask_helper", {"request": "help"}),
                ],
                "done",
            ]
        ),
    )
    swarm = TeamSwarm(boss, Swarm(say("scout"), say("reporter"), name="crew"), say("helper"))
    response = await Runners.run("go", swarm=swarm, checkpointer=saver)
    assert _path(response, swarm) == [
        ("n_boss", "llm", False),
        ("n_boss", "tools", False),
        ("n_crew__scout", "llm", True),
        ("n_crew__reporter", "llm", True),
        ("n_helper", "llm", True),
        ("n_boss", "llm", False),
    ]


async def test_hybrid_member_handing_off(saver: Any) -> None:
    lead = Agent(name="lead", model=ScriptedModel([tool_call("ask_a", {"request": "go"}), "ok"]))
    a = Agent(name="a", model=ScriptedModel([tool_call("transfer_to_b", {})]))
    swarm = HybridSwarm(lead, a, say("b"), topology=[(lead, a), (lead, "b"), (a, "b")])
    response = await Runners.run("x", swarm=swarm, checkpointer=saver)
    nodes = [node for node, _, _ in _path(response, swarm)]
    assert nodes == ["n_lead", "n_lead", "n_a", "n_a", "n_b", "n_lead"]


async def test_tool_execution_steps_land_on_tool_nodes_when_drawn(saver: Any) -> None:
    swarm = report()
    response = await Runners.run("go", swarm=swarm, checkpointer=saver)
    steps = run_path(response, view_of(swarm, tools=True))["steps"]
    assert [s["node"] for s in steps if s["kind"] == "tools"] == ["t_searcher"]
    tools = next(s for s in steps if s["kind"] == "tools")
    assert tools["tool_results"][0]["content"] == "found k" and tools["duration_ms"] is not None
    llm = steps[0]
    assert llm["usage"]["total_tokens"] > 0 and llm["time"] and llm["model"] == "function-model"
    critic = [s for s in steps if s["kind"] == "critic"]
    assert [(c["score"], c["status"]) for c in critic] == [(0.3, "retry"), (1.0, "pass")]


async def test_embedded_data_cannot_end_its_script_element(saver: Any) -> None:
    swarm = report()
    response = await Runners.run("go", swarm=swarm, checkpointer=saver)
    page = to_html(swarm, response, use_dot=False)
    body = re.search(r'id="viz-data">(.*?)</script>', page, re.S)
    assert body is not None and "<" not in body.group(1)
    data = json.loads(body.group(1))
    planner = next(n for n in data["nodes"] if n["id"] == "n_planner")
    assert planner["card"]["system_prompt"] == "Plan the work. </script><!-- not the end -->"
    assert data["run"]["visited"] == sorted(
        {"n_planner", "n_searcher", "n_research", "n_research__i1", "n_research__i2"}
        | {"n_writer", "n_reviewer"}
    )
    assert "http://" not in page.replace("http://www.w3.org/", "")
    assert "https://" not in page
