"""``threads.get_state(subgraphs=True)`` side by side with LangGraph's own server (``langgraph
dev``): a graph whose subgraph stops at a person's step (:mod:`tests.server.nested_interrupt`),
each server on the same ``langgraph.json``, with the real ``langgraph-sdk`` client. With ``subgraphs`` the parent's
pending task holds the subgraph's own state (its values, next node and interrupt); without,
it holds none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.server import nested_interrupt
from tests.server.langgraph_dev import pair_or_skip
from tests.server.test_vs_langgraph_dev import normalise

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    folder = tmp_path_factory.mktemp("nested")
    (folder / "graphs.py").write_text(Path(nested_interrupt.__file__).read_text())
    config = folder / "langgraph.json"
    config.write_text(
        json.dumps({"dependencies": ["."], "graphs": {"parent": "./graphs.py:parent"}})
    )
    for pair in pair_or_skip(config, folder / "ours.db"):
        yield {name: side.url for name, side in pair.items()}


def _state(s: dict[str, Any] | None) -> Any:
    """What a thread state means: values, next, its tasks (with a subgraph's state)."""
    if not s:
        return s
    return {
        "values": s["values"],
        "next": s["next"],
        "tasks": [
            {
                "name": t["name"],
                "interrupts": [i["value"] for i in t["interrupts"]],
                "state": _state(t["state"]),
            }
            for t in s["tasks"]
        ],
    }


async def _scenario(url: str) -> dict[str, Any]:
    client = get_client(url=url, api_key=None)
    try:
        found = await client.assistants.search(limit=10)
        aliases = {a["assistant_id"]: a["graph_id"] for a in found}
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "parent", input={"log": ["start"]})
        flat = await client.threads.get_state(tid)
        deep = await client.threads.get_state(tid, subgraphs=True)
        at = await client.threads.get_state(tid, checkpoint=deep["checkpoint"], subgraphs=True)
        said = {"flat": _state(flat), "deep": _state(deep), "at": _state(at)}
    finally:
        await client.aclose()
    return normalise(said, aliases)


async def test_get_state_with_subgraphs_as_langgraphs(urls: dict[str, str]) -> None:
    peer = await _scenario(urls["peer"])
    ours = await _scenario(urls["ours"])
    inner = peer["deep"]["tasks"][0]["state"]
    assert inner["values"] == {"log": ["start"]} and inner["next"] == ["ask"]
    assert peer["flat"]["tasks"][0]["state"] is None
    assert ours == peer
