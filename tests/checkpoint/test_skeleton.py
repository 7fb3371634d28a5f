"""Wide graphs: checkpoint skeletons stored as deltas of their parents read back whole."""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.checkpoint._skeleton import SNAPSHOT_EVERY
from aworld_graph.errors import RuntimeFailure

NODES = 40  # ~40 branch channels: a skeleton big enough to be stored as deltas


class State(TypedDict):
    count: int


class Recording(TrajectorySaver):
    """Keeps a copy of every checkpoint put, to compare with what is read back."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.seen: dict[str, dict[str, Any]] = {}

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.seen[checkpoint["id"]] = copy.deepcopy(checkpoint)
        return super().put(config, checkpoint, metadata, new_versions)


def _chain(saver: TrajectorySaver) -> Any:
    g = StateGraph(State)
    for i in range(NODES):
        g.add_node(f"n{i}", lambda s: {"count": s["count"] + 1})
    g.add_edge(START, "n0")
    for i in range(NODES - 1):
        g.add_edge(f"n{i}", f"n{i + 1}")
    g.add_edge(f"n{NODES - 1}", END)
    return g.compile(checkpointer=saver)


def _kinds(path: Path, thread_id: str) -> list[bool]:
    """Per checkpoint, oldest first: stored as a delta?"""
    with sqlite3.connect(path) as conn:
        return [
            blob[:1] == b"\xc1"
            for (blob,) in conn.execute(
                "SELECT checkpoint FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id",
                (thread_id,),
            )
        ]


def _same(saver: Recording, got: Any) -> None:
    """``got`` holds what was put, channel values aside (compared elsewhere)."""
    put = saver.seen[got.config["configurable"]["checkpoint_id"]]
    assert {k: v for k, v in got.checkpoint.items() if k != "channel_values"} == {
        k: v for k, v in put.items() if k != "channel_values"
    }


def test_wide_graph_skeletons_are_deltas_and_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "wide.db"
    saver = Recording(path)
    app = _chain(saver)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    assert app.invoke({"count": 0}, cfg)["count"] == NODES
    kinds = _kinds(path, "t")
    assert sum(kinds) > len(kinds) // 2  # most of them deltas
    depth = 0
    for is_delta in kinds:  # a whole skeleton at least every SNAPSHOT_EVERY
        depth = depth + 1 if is_delta else 0
        assert depth < SNAPSHOT_EVERY
    history = list(saver.list(cfg))
    assert len(history) == len(kinds) == len(saver.seen)
    for item in history:
        _same(saver, item)
    # the same answers from a fresh saver (no cache: chains are read from the file)
    fresh = TrajectorySaver(path)
    for item in history:
        got = fresh.get_tuple(item.config)
        assert got is not None
        _same(saver, got)
    latest = fresh.get_tuple(cfg)
    assert latest is not None and latest.checkpoint["channel_values"]["count"] == NODES
    # values a reader changes do not leak into the next read
    latest.checkpoint["channel_versions"]["count"] = "tampered"
    latest.checkpoint["versions_seen"]["n1"]["branch:to:n1"] = "tampered"
    again = fresh.get_tuple(cfg)
    assert again is not None and "tampered" not in str(again.checkpoint)
    # the graph resumes from it, from the fresh saver (the next one is stored whole)
    assert _chain(fresh).get_state(cfg).values["count"] == NODES
    saver.close()
    fresh.close()


@pytest.mark.parametrize("how", ["keep_last", "delete_for_runs", "copy_thread"])
def test_retention_keeps_delta_chains_readable(tmp_path: Path, how: str) -> None:
    """Deleting checkpoints that later ones are deltas of first stores those whole."""
    path = tmp_path / f"{how}.db"
    saver = Recording(path)
    app = _chain(saver)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"count": 0}, {**cfg, "metadata": {"run_id": "run-1"}})
    app.invoke({"count": 0}, {**cfg, "metadata": {"run_id": "run-2"}})
    total = len(_kinds(path, "t"))
    if how == "keep_last":
        assert saver.prune_keep_last(SNAPSHOT_EVERY // 2 + 3, ["t"]) > 0
        thread = "t"
    elif how == "delete_for_runs":
        saver.delete_for_runs(["run-1"])
        thread = "t"
    else:
        saver.copy_thread("t", "copy")
        thread = "copy"
    kept = _kinds(path, thread)
    assert any(kept) and (len(kept) == total if how == "copy_thread" else 0 < len(kept) < total)
    fresh = TrajectorySaver(path)
    history = list(fresh.list({"configurable": {"thread_id": thread}}))
    assert len(history) == len(kept)
    for item in history:
        _same(saver, item)
    saver.close()
    fresh.close()


def test_a_delta_whose_parent_is_gone_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    with TrajectorySaver(path) as saver:
        _chain(saver).invoke({"count": 0}, {"configurable": {"thread_id": "t"}})
    with sqlite3.connect(path) as conn:  # someone deletes rows behind aworld-graph's back
        conn.execute(
            "DELETE FROM checkpoints WHERE substr(checkpoint, 1, 1) != x'c1' AND checkpoint_id "
            "!= (SELECT min(checkpoint_id) FROM checkpoints)"
        )
    with TrajectorySaver(path) as saver:
        with pytest.raises(RuntimeFailure, match="stored as a delta of a checkpoint"):
            saver.get_tuple({"configurable": {"thread_id": "t"}})
