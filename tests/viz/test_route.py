"""The run's route: only the edges the run really took (which node's writes triggered which
node), in Python and on the page, with step badges that cover no edge label."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aworld_graph import Agent, HandoffSwarm, Runners, Swarm, TeamSwarm
from aworld_graph.testing import ScriptedModel, tool_call
from aworld_graph.viz import run_path, to_html, view_of

from .chromium import Chromium, need_tool
from .swarms import conditional, failing_handoff, report, say


def desk() -> Swarm:
    """triage → billing → tech → triage, in a topology that also allows the other ways."""
    triage = Agent(
        name="triage", model=ScriptedModel([tool_call("transfer_to_billing", {}), "done"])
    )
    billing = Agent(name="billing", model=ScriptedModel([tool_call("transfer_to_tech", {})]))
    tech = Agent(name="tech", model=ScriptedModel([tool_call("transfer_to_triage", {})]))
    return HandoffSwarm(
        triage,
        billing,
        tech,
        topology=[
            (triage, billing),
            (billing, tech),
            (tech, triage),
            (billing, triage),
            (triage, tech),
        ],
        name="desk",
    )


async def _route(swarm: Swarm, saver: Any, **view: Any) -> list[tuple[str, str]]:
    response = await Runners.run("go", swarm=swarm, checkpointer=saver)
    return [(r["source"], r["target"]) for r in run_path(response, view_of(swarm, **view))["route"]]


async def test_a_handoff_loop_lights_only_the_handoffs_made(saver: Any) -> None:
    route = await _route(desk(), saver)
    assert route == [
        ("s__start", "n_triage"),
        ("n_triage", "n_billing"),
        ("n_billing", "n_tech"),
        ("n_tech", "n_triage"),
    ]  # not billing → triage, not triage → tech


async def test_a_condition_lights_the_branch_taken_and_not_otherwise(saver: Any) -> None:
    route = await _route(conditional(), saver)
    assert route == [
        ("s__start", "n_triage"),
        ("n_mathematician", "s__end"),
        ("n_triage", "n_mathematician"),
    ]


async def test_parallel_branches_a_nested_swarm_a_join_and_a_critic_retry(saver: Any) -> None:
    route = await _route(report(), saver, tools=True)
    assert route == [
        ("s__start", "n_planner"),
        ("n_planner", "n_research"),
        ("n_research__i1", "n_research__i2"),
        ("n_planner", "n_searcher"),
        ("n_searcher", "t_searcher"),
        ("j_writer", "n_writer"),
        ("n_research", "j_writer"),
        ("n_searcher", "j_writer"),
        ("n_writer", "n_reviewer"),
        ("n_reviewer", "n_writer"),  # the critic's retry
        ("n_reviewer", "s__end"),
    ]


async def test_delegations_and_a_failed_step(saver: Any) -> None:
    boss = Agent(
        name="boss",
        model=ScriptedModel([tool_call("ask_crew", {"request": "dig"}), "done"]),
    )
    team = TeamSwarm(boss, Swarm(say("scout"), say("reporter"), name="crew"), say("helper"))
    assert await _route(team, saver) == [
        ("s__start", "n_boss"),
        ("n_boss", "n_crew"),  # not boss → helper: never asked
        ("n_crew__scout", "n_crew__reporter"),
    ]
    assert await _route(failing_handoff(), saver) == [
        ("s__start", "n_triage"),
        ("n_triage", "n_expert"),  # the hand-off to the step that failed
    ]


_BOXES = """(() => {
    const box = e => { const r = e.getBoundingClientRect();
        return {l: r.left, t: r.top, r: r.right, b: r.bottom}; };
    return {
        labels: Array.from(document.querySelectorAll("svg g.edge text")).map(box),
        nodes: Array.from(document.querySelectorAll("svg g.node")).map(
            g => box(g.querySelector("polygon, ellipse, circle, rect, path"))),
        badges: Array.from(document.querySelectorAll("svg g.badge")).map(box),
        traversed: Array.from(document.querySelectorAll("svg g.edge.traversed")).map(g => g.id),
    }; })()"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["l"] < b["r"] and b["l"] < a["r"] and a["t"] < b["b"] and b["t"] < a["b"]


async def test_the_page_draws_the_route_and_badges_cover_no_label(
    saver: Any, tmp_path: Path
) -> None:
    need_tool("dot")
    for name, swarm in (("desk", desk()), ("report", report())):
        response = await Runners.run("go", swarm=swarm, checkpointer=saver)
        route = run_path(response, view_of(swarm))["route"]
        for use_dot in (True, False):
            page = tmp_path / f"{name}-{use_dot}.html"
            page.write_text(to_html(swarm, response, use_dot=use_dot), encoding="utf-8")
            async with Chromium(tmp_path / f"profile-{name}-{use_dot}") as browser:
                await browser.open(page)
                found = await browser.js(_BOXES)
                assert sorted(found["traversed"]) == sorted(r["edge"] for r in route)
                assert len(found["badges"]) >= 3
                for i, badge in enumerate(found["badges"]):
                    others = found["badges"][:i] + found["badges"][i + 1 :]
                    hits = [b for b in found["labels"] + others if _overlap(badge, b)]
                    assert hits == [], (name, use_dot, badge, hits)
