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


def _count(s: State) -> dict[str, int]:
    return {"count": s["count"] + 1}


def _chain(saver: TrajectorySaver, make: Any = lambda i: _count) -> Any:
    """START → n0 → … → n39 → END; node ``i`` runs ``make(i)``."""
    g = StateGraph(State).add_sequence([(f"n{i}", make(i)) for i in range(NODES)])
    g.add_edge(START, "n0").add_edge(f"n{NODES - 1}", END)
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
        with pytest.raises(RuntimeFailure, match="stored as a delta of checkpoint .* missing"):
            saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert saver.prune_keep_last(1) >= 0  # maintenance still runs over a broken thread
        saver.delete_thread("t")
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None


def test_a_page_whose_list_chain_starts_below_its_range_reads(tmp_path: Path) -> None:
    """A fork puts a delta in the middle of a page's version range whose chain starts below
    it: reading the page follows the chain to its start (found in review, session 4)."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = TrajectorySaver(tmp_path / "fork.db")

    def put(parent: Any, n: int, version: str, log: list[Any], pick: bool) -> Any:
        cp = empty_checkpoint()
        cp["id"] = f"1ef00000-0000-6000-8000-00000000000{n}"
        cp["channel_versions"] = {"log": version}
        cp["channel_values"] = {"log": log}
        return saver.put(parent, cp, {"step": 0, "pick": pick}, {"log": version})

    base: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    root = put(base, 1, "000000000001.aaaaaaaa", [0], False)
    a1 = put(root, 2, "000000000002.bbbbbbbb", [0, 1], False)
    put(a1, 3, "000000000003.bbbbbbbb", [0, 1, 2], True)
    put(root, 4, "000000000002.00000000", ["x"], True)  # a fork: stored whole
    picked = [t.checkpoint["channel_values"] for t in saver.list(base, filter={"pick": True})]
    assert picked == [{"log": ["x"]}, {"log": [0, 1, 2]}]
    saver.close()


def test_changing_a_checkpoint_after_put_does_not_change_what_the_next_one_stores(
    tmp_path: Path,
) -> None:
    """The skeleton kept as the next delta's base is the saver's own copy (review, session 4)."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = TrajectorySaver(tmp_path / "mutate.db")
    cp = empty_checkpoint()
    cp["channel_versions"] = {f"c{i}": saver.get_next_version(None) for i in range(40)}
    cp["versions_seen"] = {"node": {"c0": cp["channel_versions"]["c0"]}}
    first = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {})
    bumped = saver.get_next_version(cp["channel_versions"]["c0"])
    cp["channel_versions"]["c0"] = bumped  # changed in place after put()
    cp["versions_seen"]["node"]["c0"] = bumped
    child = copy.deepcopy(cp)
    child["id"] = empty_checkpoint()["id"]
    stored = saver.put(first, child, {}, {"c0": bumped})
    for reader in (saver, TrajectorySaver(tmp_path / "mutate.db")):
        got = reader.get_tuple(stored)
        assert got is not None
        assert got.checkpoint["channel_versions"]["c0"] == bumped
        assert got.checkpoint["versions_seen"]["node"]["c0"] == bumped
    saver.close()


def _wide(n: int) -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    cp["channel_versions"] = {f"c{i}": f"{n:012d}.{i:08x}" for i in range(40)}
    cp["versions_seen"] = {"node": {"c0": f"{n:012d}.00000000"}}
    cp["channel_values"] = {"c0": n}
    return cp


def test_a_thread_deleted_by_another_saver_mid_run_stays_readable(tmp_path: Path) -> None:
    """Another saver (an admin process) deletes the thread while a run on it goes on: this
    saver's cached last checkpoint is gone, so what it stores next is whole, not a delta of
    a deleted row (review, session 4)."""
    path = tmp_path / "mid.db"
    saver = TrajectorySaver(path)

    def step(i: int) -> Any:
        def run(s: State) -> dict[str, int]:
            if i == NODES // 2:
                with TrajectorySaver(path) as admin:
                    admin.delete_thread("t")
            return _count(s)

        return run

    cfg: Any = {"configurable": {"thread_id": "t"}}
    _chain(saver, step).invoke({"count": 0}, cfg, durability="sync")
    kept = _kinds(path, "t")
    assert 0 < len(kept) < NODES and any(kept)  # the second half, mostly deltas again
    with TrajectorySaver(path) as fresh:
        history = list(fresh.list(cfg))
        assert [h.checkpoint["channel_values"]["count"] for h in history][0] == NODES
        assert fresh.prune_keep_last(5) > 0
        assert len(list(fresh.list(cfg))) == 5
    saver.close()


def test_putting_a_checkpoint_again_keeps_what_was_stored_on_top_of_it(tmp_path: Path) -> None:
    """A direct caller may put one checkpoint id twice (LangGraph never does): the checkpoint
    is never a delta of itself, and checkpoints stored as deltas of it are stored whole first."""
    saver = TrajectorySaver(tmp_path / "again.db")
    first = _wide(1)
    parent = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, first, {}, {})
    again = copy.deepcopy(first)
    again["channel_versions"]["c1"] = "000000000009.00000009"
    saver.put(parent, again, {}, {})  # the same id, with its own config as the parent
    got = saver.get_tuple(parent)
    assert got is not None and got.checkpoint["channel_versions"]["c1"] == "000000000009.00000009"
    child = _wide(2)
    stored = saver.put(parent, child, {}, {"c0": "000000000002.00000000"})
    assert _kinds(tmp_path / "again.db", "t")[-1]  # the child is a delta of the parent
    saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, first, {}, {})
    for reader in (saver, TrajectorySaver(tmp_path / "again.db")):
        got = reader.get_tuple(stored)
        assert got is not None
        assert got.checkpoint["channel_versions"] == child["channel_versions"]
    saver.close()
