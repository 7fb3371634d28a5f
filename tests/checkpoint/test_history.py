"""``list()`` reads a page of plain ``CheckpointTuple`` s at a time, each with its own values."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.checkpoint.saver import PAGE


class S(TypedDict):
    n: int
    log: list[str]


def _graph(saver: Any, steps: int) -> Any:
    def step(s: S) -> dict[str, Any]:
        return {"n": s["n"] + 1, "log": [*s["log"], f"step {s['n']}"]}

    g = StateGraph(S)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["n"] >= steps else "step")
    return g.compile(checkpointer=saver)


@pytest.fixture
def saver(tmp_path: Path) -> Any:
    with TrajectorySaver(tmp_path / "h.db") as saver:
        cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 1000}
        _graph(saver, 450).invoke({"n": 0, "log": []}, cfg)
        yield saver


THREAD = {"configurable": {"thread_id": "t"}}


def test_listed_tuples_are_plain_and_equal_get_tuple(saver: TrajectorySaver) -> None:
    listed = list(saver.list(THREAD))
    assert len(listed) == 452  # input, 450 steps and the first loop checkpoint
    for t in (listed[0], listed[1], listed[250], listed[-1]):
        direct = saver.get_tuple(t.config)
        assert type(t) is CheckpointTuple and direct == t
    values = listed[0].checkpoint["channel_values"]
    assert type(values) is dict and values["n"] == 450 and len(values["log"]) == 450
    assert json.loads(json.dumps(listed[0]))[1]["channel_values"]["n"] == 450
    assert [t.metadata["step"] for t in listed[:3]] == [450, 449, 448]


def test_each_tuple_owns_its_values(saver: TrajectorySaver) -> None:
    """Two checkpoints sharing a channel version, and two reads of one checkpoint, never
    share a mutable object."""
    first, again = list(saver.list(THREAD, limit=1)), list(saver.list(THREAD, limit=1))
    first[0].checkpoint["channel_values"]["log"].append("changed")
    assert len(again[0].checkpoint["channel_values"]["log"]) == 450
    assert len(saver.get_tuple(THREAD).checkpoint["channel_values"]["log"]) == 450


def test_limit_before_and_pages_agree(saver: TrajectorySaver) -> None:
    every = [t.config["configurable"]["checkpoint_id"] for t in saver.list(THREAD)]
    assert every == sorted(every, reverse=True) and len(set(every)) == len(every)
    some = [t.config["configurable"]["checkpoint_id"] for t in saver.list(THREAD, limit=205)]
    assert some == every[:205]
    before = {"configurable": {"thread_id": "t", "checkpoint_id": every[10]}}
    after_ten = [
        t.config["configurable"]["checkpoint_id"] for t in saver.list(THREAD, before=before)
    ]
    assert after_ten == every[11:]
    across = [t.config["configurable"]["checkpoint_id"] for t in saver.list(None)]
    assert across == every


def test_copying_history_into_other_savers_keeps_every_value(
    saver: TrajectorySaver, tmp_path: Path
) -> None:
    conn = sqlite3.connect(tmp_path / "peer.db", check_same_thread=False)
    targets = [SqliteSaver(conn), InMemorySaver()]
    for target in targets:
        for t in reversed(list(saver.list(THREAD))):
            cfg = {"configurable": {**t.config["configurable"]}}
            if t.parent_config:
                cfg["configurable"]["checkpoint_id"] = t.parent_config["configurable"][
                    "checkpoint_id"
                ]
            else:
                cfg["configurable"].pop("checkpoint_id")
            target.put(cfg, t.checkpoint, t.metadata, t.checkpoint["channel_versions"])
        copied = target.get_tuple(THREAD)
        assert copied is not None
        assert copied.checkpoint["channel_values"]["n"] == 450
        assert len(copied.checkpoint["channel_values"]["log"]) == 450
    conn.close()


def test_a_thread_deleted_while_listing_ends_the_listing(saver: TrajectorySaver) -> None:
    """Each page is read in its own snapshot: what was handed out stays; later pages of a
    deleted thread are simply not there."""
    listing = saver.list(THREAD)
    first = next(listing)
    saver.delete_thread("t")
    rest = list(listing)
    assert first.checkpoint["channel_values"]["n"] == 450
    assert len(rest) == PAGE - 1  # the rest of the first page, read before the delete
    assert list(saver.list(THREAD)) == []


def test_alist_matches_list(saver: TrajectorySaver) -> None:
    async def collect() -> list[CheckpointTuple]:
        return [t async for t in saver.alist(THREAD, limit=230)]

    listed = asyncio.run(collect())
    assert listed == list(saver.list(THREAD, limit=230))


def test_the_checkpoints_guide_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "checkpoints.md"
    block = guide.read_text().split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(guide), "exec"), {"__name__": "guide_example"})
    assert capsys.readouterr().out.strip() == "3 {'n': 2}"
    assert (tmp_path / "checkpoints" / "docs-example.db").exists()


def test_concurrent_aget_tuple_calls_match_get_tuple(saver: TrajectorySaver) -> None:
    listed = list(saver.list(THREAD, limit=5))
    configs: list[Any] = [THREAD, THREAD, {"configurable": {"thread_id": "absent"}}]
    configs += [t.config for t in listed]

    async def ask() -> list[Any]:
        return await asyncio.gather(*(saver.aget_tuple(c) for c in configs))

    answers = asyncio.run(ask())
    assert answers[2] is None
    assert answers[0] is not answers[1] and answers[0] == answers[1]
    answers[0].checkpoint["channel_values"]["n"] = -1
    assert answers[1].checkpoint["channel_values"]["n"] == 450
    for config, answer in zip(configs[3:], answers[3:], strict=True):
        assert answer == saver.get_tuple(config)
