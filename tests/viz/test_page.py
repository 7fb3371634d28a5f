"""The HTML page in a real headless Chromium: every node drawn, the run's path highlighted,
stepping by button and key, node cards on click, a screenshot, no console error and no
network request."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from aworld_graph import Runners
from aworld_graph.viz import run_path, to_html, view_of

from .chromium import Chromium, need_tool
from .swarms import failing_handoff, report


async def _state(browser: Chromium) -> dict[str, Any]:
    return dict(
        await browser.js(
            """({
        position: document.getElementById("position").textContent,
        current: Array.from(document.querySelectorAll("svg g.current")).map(g => g.id),
        visited: Array.from(document.querySelectorAll("svg g.visited")).map(g => g.id).sort(),
        traversed: document.querySelectorAll("svg g.edge.traversed").length,
        step: document.getElementById("step").textContent,
        card: document.getElementById("card").textContent,
        prev: document.getElementById("prev").disabled,
        next: document.getElementById("next").disabled,
        ready: window.vizReady === true,
    })"""
        )
    )


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _clean(browser: Chromium, page: Path) -> None:
    bad = [m for m in browser.console if m["type"] in ("error", "warning", "assert")]
    assert browser.errors == [] and bad == [], (browser.errors, bad)
    assert browser.requests == [page.resolve().as_uri()], browser.requests


async def _every_node_in_dom(browser: Chromium, swarm: Any) -> None:
    view = view_of(swarm)
    expected = {n.id: n.label.split("\n")[0] for n in view.nodes} | {
        c.id: c.label for c in view.clusters
    }
    found = await browser.js(
        f"""(() => {{ const out = {{}};
        for (const id of {json.dumps(sorted(expected))}) {{
            const g = document.querySelector('svg g[id="' + id + '"]');
            out[id] = g ? g.textContent : null; }}
        return out; }})()"""
    )
    missing = {i: n for i, n in expected.items() if found[i] is None or n not in found[i]}
    assert missing == {}


async def test_run_page_with_graphviz_layout(saver: Any, tmp_path: Path) -> None:
    need_tool("dot")
    swarm = report()
    response = await Runners.run(
        "write a report", swarm=swarm, checkpointer=saver, task_id="page-1"
    )
    assert response.success
    steps = run_path(response, view_of(swarm))["steps"]
    page = tmp_path / "report.html"
    page.write_text(to_html(swarm, response, use_dot=True), encoding="utf-8")

    async with Chromium(tmp_path / "profile") as browser:
        await browser.open(page)
        await _every_node_in_dom(browser, swarm)
        state = await _state(browser)
        assert state["ready"] and state["position"] == f"step 1 of {len(steps)}" == "step 1 of 11"
        ran = {
            "n_planner",
            "n_searcher",
            "n_research",
            "n_research__i1",
            "n_research__i2",
            "n_writer",
            "n_reviewer",
        }
        assert state["visited"] == sorted(ran | {"j_writer"})  # the join gate was passed too
        assert state["traversed"] >= 9 and state["current"] == ["n_planner"] and state["prev"]
        assert "Plan the work. </script><!-- not the end -->" in state["card"]  # root's card

        await browser.click("#next")
        assert (await _state(browser))["current"] == ["n_research"]  # the nested swarm
        await browser.key("ArrowRight")
        state = await _state(browser)
        assert state["current"] == ["n_research__i1"] and state["position"] == "step 3 of 11"
        assert "sub-run" in state["step"] and "page-1.research.1" in state["step"]
        await browser.key("ArrowLeft")
        assert (await _state(browser))["position"] == "step 2 of 11"

        await browser.click("#timeline li:nth-child(6)")
        state = await _state(browser)
        assert (
            state["current"] == ["n_searcher"]
            and "lookup" in state["step"]
            and "found k" in state["step"]
        )
        await browser.click("#timeline li:nth-child(9)")
        state = await _state(browser)
        assert (
            "score0.3" in state["step"]
            and "retry" in state["step"]
            and "more detail" in state["step"]
        )
        await browser.click("#timeline li:last-child")
        state = await _state(browser)
        assert (
            state["next"] and state["current"] == ["n_reviewer"] and "tokens" not in state["step"]
        )
        await browser.click("#timeline li:nth-child(8)")
        assert "usage" in (await _state(browser))["step"]

        await browser.click('svg g[id="n_writer"]')
        card = (await _state(browser))["card"]
        assert card.startswith("writeragent") and "run steps8, 10" in card

        shot = await browser.screenshot(tmp_path / "report.png")
        width, height = _png_size(shot)
        assert width >= 800 and height >= 600 and len(shot) > 30_000
        _clean(browser, page)


async def test_failed_run_page_with_builtin_layout(saver: Any, tmp_path: Path) -> None:
    swarm = failing_handoff()
    response = await Runners.run("go", swarm=swarm, checkpointer=saver, task_id="page-2")
    assert response.status == "error"
    page = tmp_path / "failing.html"
    page.write_text(to_html(swarm, response, use_dot=False), encoding="utf-8")

    async with Chromium(tmp_path / "profile") as browser:
        await browser.open(page)
        await _every_node_in_dom(browser, swarm)
        state = await _state(browser)
        assert state["visited"] == ["n_expert", "n_triage"] and state["position"] == "step 1 of 5"
        for _ in range(4):
            await browser.key("ArrowRight")
        state = await _state(browser)
        assert state["current"] == ["n_expert"] and "model endpoint down" in state["step"]
        errors = await browser.js('document.querySelectorAll("#timeline .error").length')
        assert errors == 2  # the failed tool call and the failed model call
        await browser.key("ArrowRight")  # past the end: stays on the last step
        assert (await _state(browser))["position"] == "step 5 of 5"
        await browser.screenshot(tmp_path / "failing.png")
        _clean(browser, page)


async def test_topology_page_without_a_run(tmp_path: Path) -> None:
    swarm = report()
    page = tmp_path / "topology.html"
    page.write_text(to_html(swarm), encoding="utf-8")
    need_tool("chromium", "chromium-browser")
    async with Chromium(tmp_path / "profile") as browser:
        await browser.open(page)
        await _every_node_in_dom(browser, swarm)
        state = await _state(browser)
        assert (
            state["visited"] == []
            and state["position"] == "no run"
            and state["prev"]
            and state["next"]
        )
        await browser.click('svg g[id="n_reviewer"]')
        card = (await _state(browser))["card"]
        assert "reviewercritic" in card and "judgeswriter" in card and "threshold0.7" in card
        _clean(browser, page)
