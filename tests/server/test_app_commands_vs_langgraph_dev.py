"""``aworld-graph serve`` side by side with ``langgraph dev`` on the graphs of
:mod:`tests.server.langgraph_more_apps`: a run steered with ``command`` (``update``, ``goto``,
a ``Send``), each kind of graph factory (async, a context manager given the config and a
``ServerRuntime``, a runtime only, a plain context manager) and a graph's subgraphs, through
the real ``langgraph-sdk`` client, compared as :mod:`tests.server.test_vs_langgraph_dev`
compares (ids and timestamps normalised)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server import langgraph_more_apps
from tests.server.langgraph_dev import pair_or_skip
from tests.server.test_vs_langgraph_dev import Side, both, state, status_of

pytestmark = pytest.mark.slow

GRAPHS = {
    "steps": "steps",
    "parent": "parent",
    "async_factory": "make_async",
    "managed_factory": "make_managed",
    "runtime_factory": "make_for_runtime",
    "context_factory": "make_in_context",
}


def write_project(folder: Path) -> Path:
    """A project serving :mod:`~tests.server.langgraph_more_apps`' graphs (copied as
    ``graphs.py``); its ``langgraph.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graphs.py").write_text(Path(langgraph_more_apps.__file__).read_text())
    graphs = {name: f"./graphs.py:{attr}" for name, attr in GRAPHS.items()}
    path = folder / "langgraph.json"
    path.write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    return path


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    """Both servers on :func:`write_project`'s project (this module's own pair)."""
    folder = tmp_path_factory.mktemp("project")
    yield from pair_or_skip(write_project(folder), folder / "ours.db")


async def test_a_command_steers_a_run_alike(sides: dict[str, Side]) -> None:
    async def scenario(client: Any) -> Any:
        tid = (await client.threads.create())["thread_id"]
        asked = await client.runs.wait(tid, "steps", input={"log": ["in"]})
        resumed = await client.runs.wait(
            tid, "steps", command={"resume": "yes", "update": {"note": "z"}}
        )
        steered = await client.runs.wait(
            tid, "steps", command={"update": [["note", "x"]], "goto": ["side"]}
        )
        after = state(await client.threads.get_state(tid))
        fresh = (await client.threads.create())["thread_id"]
        sent = await client.runs.wait(
            fresh, "steps", command={"goto": {"node": "side", "input": {"note": "sent"}}}
        )
        bad = await status_of(client.runs.wait(fresh, "steps", command={"goto": 5}))
        return {
            "asked": asked,
            "resumed": resumed,
            "steered": steered,
            "after": {k: after[k] for k in ("values", "next", "tasks")},
            "sent": sent["log"],
            "bad": bad,
        }

    ours, peer = await both(sides, scenario)
    assert ours == peer
    assert ours["steered"]["log"][-1] == "side:x" and ours["bad"] == 422


async def test_each_kind_of_factory_makes_the_same_run(sides: dict[str, Side]) -> None:
    async def scenario(client: Any) -> Any:
        config = {"configurable": {"greeting": "ahoy"}}
        made = {}
        for graph in ("async_factory", "managed_factory", "runtime_factory", "context_factory"):
            tid = (await client.threads.create())["thread_id"]
            made[graph] = await client.runs.wait(tid, graph, input={"log": []}, config=config)
            made[f"{graph} state"] = (await client.threads.get_state(tid))["values"]
        return made

    ours, peer = await both(sides, scenario)
    assert ours == peer
    assert ours["managed_factory"]["log"] == [
        "ahoy (threads.create_run, store True)",
        "open while running: True",
    ]


async def test_subgraphs_are_listed_alike(sides: dict[str, Side]) -> None:
    async def scenario(client: Any) -> Any:
        (parent,) = await client.assistants.search(graph_id="parent")
        (steps,) = await client.assistants.search(graph_id="steps")
        ident = parent["assistant_id"]
        return {
            "all": await client.assistants.get_subgraphs(ident),
            "recurse": await client.assistants.get_subgraphs(ident, recurse=True),
            "child": await client.assistants.get_subgraphs(ident, namespace="child"),
            "none": await client.assistants.get_subgraphs(steps["assistant_id"]),
        }

    ours, peer = await both(sides, scenario)
    assert ours == peer and list(ours["all"]) == ["child"]


def test_both_refuse_a_send_without_its_input(sides: dict[str, Side]) -> None:
    """A ``goto`` that is neither a node name nor a Send: a 422 from both."""
    for side in sides.values():
        tid = httpx.post(f"{side.url}/threads", json={}, timeout=30).json()["thread_id"]
        body = {"assistant_id": "steps", "command": {"goto": [{"node": "side"}]}}
        got = httpx.post(f"{side.url}/threads/{tid}/runs/wait", json=body, timeout=30)
        assert got.status_code == 422, (side.url, got.text)


async def test_stream_subgraphs_streams_alike(sides: dict[str, Side]) -> None:
    async def scenario(client: Any) -> Any:
        tid = (await client.threads.create())["thread_id"]
        streamed = client.runs.stream(
            tid,
            "parent",
            input={"log": []},
            stream_mode=["values", "updates", "custom"],
            stream_subgraphs=True,
        )
        return [[part.event, part.data] async for part in streamed]

    ours, peer = await both(sides, scenario)
    assert ours == peer
    child = [name for name, _ in ours if "|" in name]
    assert child and {name.split("|")[1] for name in child} == {"child:<id1>"}
