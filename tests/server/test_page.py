"""The live run page in a real headless Chromium, against a real server: it loads with no
console error and no request off the server; the view follows a streaming run; a human step
answered on the page resumes the run; a fork from a step continues on a new thread."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from tests.server import apps
from tests.server.conftest import LiveServer
from tests.viz.chromium import Chromium

STATE = """(() => !window.page || !document.getElementById("status") ? {ready: false} : {
    ready: window.pageReady === true,
    assistants: Array.from(document.querySelectorAll("#assistants li")).map(li => li.textContent),
    status: document.getElementById("status").textContent,
    position: document.getElementById("position").textContent,
    steps: window.page.run ? window.page.run.steps.length : 0,
    streaming: window.page.streaming,
    thread: window.page.thread,
    visited: Array.from(document.querySelectorAll("svg g.visited")).map(g => g.id).sort(),
    current: Array.from(document.querySelectorAll("svg g.current")).map(g => g.id),
    human: document.getElementById("human").style.display === "block",
    prompt: document.getElementById("prompt").textContent,
    events: document.getElementById("events").textContent,
})()"""


async def _until(browser: Chromium, check: Any, what: str) -> dict[str, Any]:
    """The page state once ``check(state)`` holds (bounded wait; the page updates itself)."""
    deadline = time.monotonic() + 30
    while True:
        state = dict(await browser.js(STATE))
        if check(state):
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"page never showed {what}: {state}")
        await asyncio.sleep(0.05)


async def _open(browser: Chromium, server: LiveServer) -> dict[str, Any]:
    await browser.send("Page.navigate", url=server.url + "/")
    return await _until(browser, lambda s: s["ready"], "ready")


async def _type(browser: Chromium, selector: str, text: str) -> None:
    await browser.js(f"document.querySelector({json.dumps(selector)}).value = {json.dumps(text)}")


def _clean(browser: Chromium, server: LiveServer) -> None:
    bad = [m for m in browser.console if m["type"] in ("error", "warning", "assert")]
    assert browser.errors == [] and bad == [], (browser.errors, bad)
    assert browser.requests and all(u.startswith(server.url + "/") for u in browser.requests)


async def test_the_view_follows_a_streaming_run(server: LiveServer, tmp_path: Path) -> None:
    async with Chromium(tmp_path / "profile") as browser:
        state = await _open(browser, server)
        assert state["assistants"] == ["approval", "chat", "counter", "gated"]
        await browser.click("#assistants li:nth-child(4)")
        await _until(browser, lambda s: "workflow gated" in s["status"], "the gated workflow")
        await _type(browser, "#input", "four words right here")
        await browser.click("#start")
        mid = await _until(
            browser, lambda s: s["steps"] == 2 and s["streaming"] == 1, "a run in progress"
        )
        assert mid["position"] == "step 2 of 2" and mid["visited"] == ["n_gated"]
        assert mid["current"] == ["n_gated"] and "[tool_call]" in mid["events"]
        apps.GATE.set()  # the model answers now
        done = await _until(browser, lambda s: "answer: 4 words" in s["status"], "the answer")
        assert done["position"] == "step 3 of 3" and done["streaming"] == 0
        await browser.click("#prev")
        assert (await browser.js(STATE))["position"] == "step 2 of 3"
        await browser.key("ArrowLeft")
        assert (await browser.js(STATE))["position"] == "step 1 of 3"
        await browser.screenshot(tmp_path / "live.png")
        _clean(browser, server)


async def test_answer_a_human_step_and_fork_on_the_page(server: LiveServer, tmp_path: Path) -> None:
    async with Chromium(tmp_path / "profile") as browser:
        await _open(browser, server)
        await _type(browser, "#input", "plan the offsite")
        await browser.click("#start")
        # the interrupt may show while the run is still ending (thread busy), then its status
        asked = await _until(
            browser, lambda s: s["human"] and "interrupted" in s["status"], "the human step"
        )
        assert asked["prompt"] == "Approve the plan?"
        first = asked["thread"]
        await _type(browser, "#answer", "approve")
        await browser.click("#reply")
        done = await _until(browser, lambda s: "published the plan" in s["status"], "the answer")
        assert done["thread"] == first and not done["human"]

        await browser.click("#timeline li:nth-child(1)")  # back to the drafter's step
        await _type(browser, "#edit", '{"context": {"budget": 50}}')
        await browser.click("#fork")
        forked = await _until(
            browser, lambda s: s["human"] and s["thread"] != first, "the fork asking again"
        )
        _clean(browser, server)

    sdk = get_client(url=server.url, api_key=None)
    original, fork = await sdk.threads.get(first), await sdk.threads.get(forked["thread"])
    await sdk.aclose()
    assert original["values"]["answer"] == "published the plan"
    assert fork["status"] == "interrupted" and fork["values"]["context"] == {"budget": 50}


async def test_the_topology_is_drawn_with_and_without_graphviz(
    serve: Callable[..., LiveServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's drawing is ``viz.to_svg``: Graphviz's when ``dot`` is installed, else the
    built-in layout; either way one ``g.node`` group per node, by its view id."""
    drawn = {}
    for graphviz in (True, False):
        if not graphviz:
            monkeypatch.setattr("aworld_graph.viz.html.shutil.which", lambda name: None)
        server = serve()
        async with httpx.AsyncClient(base_url=server.url) as http:
            view = (await http.get("/ui/assistants/approval/view")).json()
        drawn[graphviz] = view["svg"]
        assert view["svg"].startswith("<svg") and 'id="n_approval"' in view["svg"]
        assert "n_drafter" in {n["id"] for n in view["data"]["nodes"]}
    if shutil.which("dot"):
        assert drawn[True] != drawn[False]  # two different layouts
