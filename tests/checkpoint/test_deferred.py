"""``normal`` durability: a task's ordinary writes wait for the next commit (``defer_writes``).

``put_writes`` returns once they are queued; the next commit (LangGraph's next checkpoint)
stores them, or the writer thread after ``defer_writes`` seconds; reads and writes through
any saver on the file in this process, ``close`` and interpreter exit store them first."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.types import ERROR

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.errors import ConfigError, RuntimeFailure

ROOT: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _stored_writes(path: Path) -> list[tuple[str, str]]:
    """What another connection (another process, say) sees in ``checkpoint_writes``."""
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT task_id, channel FROM checkpoint_writes ORDER BY 1").fetchall()


def test_writes_wait_for_the_next_checkpoint_and_share_its_commit(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    store = saver._store
    config = saver.put(ROOT, empty_checkpoint(), {"step": -1}, {})
    before = store._seq
    saver.put_writes(config, [("ch", 1)], "task-a")
    saver.put_writes(config, [("ch", 2)], "task-b")
    assert store._seq == before and _stored_writes(saver.path) == []  # queued, not stored
    saver.put(config, empty_checkpoint(), {"step": 0}, {})
    assert store._seq == before + 1  # one commit for the checkpoint and both tasks' writes
    assert _stored_writes(saver.path) == [("task-a", "ch"), ("task-b", "ch")]
    saver.close()


def test_special_writes_and_defer_writes_0_commit_before_returning(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    config = saver.put(ROOT, empty_checkpoint(), {}, {})
    saver.put_writes(config, [(ERROR, "boom")], "failed")  # ends the step: stored at once
    assert _stored_writes(saver.path) == [("failed", ERROR)]
    saver.close()
    plain = TrajectorySaver(tmp_path / "p.db", defer_writes=0)
    config = plain.put(ROOT, empty_checkpoint(), {}, {})
    plain.put_writes(config, [("ch", 1)], "task")
    assert _stored_writes(plain.path) == [("task", "ch")]
    plain.close()
    with pytest.raises(ConfigError, match="defer_writes"):
        TrajectorySaver(tmp_path / "x.db", defer_writes=-1)


def test_reads_in_this_process_see_deferred_writes(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    other = TrajectorySaver(tmp_path / "n.db")  # another saver on the same file
    config = saver.put(ROOT, empty_checkpoint(), {}, {})
    saver.put_writes(config, [("ch", 1)], "task")
    seen = other.get_tuple(config)
    assert seen is not None and seen.pending_writes == [("task", "ch", 1)]
    saver.put_writes(config, [("ch", 2)], "task-2")
    mine = saver.get_tuple(config)
    assert mine is not None and len(mine.pending_writes or []) == 2
    other.close()
    saver.close()


def test_the_writer_thread_stores_writes_nobody_takes_along(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=0.01)
    config = saver.put(ROOT, empty_checkpoint(), {}, {})
    saver.put_writes(config, [("ch", 1)], "task")
    for _ in range(1000):  # no further call: the writer commits them on its own
        if _stored_writes(saver.path):
            break
        time.sleep(0.01)
    assert _stored_writes(saver.path) == [("task", "ch")]
    saver.close()


def test_deferred_writes_are_stored_at_exit_and_on_close(tmp_path: Path) -> None:
    path = tmp_path / "n.db"
    script = textwrap.dedent(
        f"""
        from langgraph.checkpoint.base import empty_checkpoint
        from aworld_graph.checkpoint import TrajectorySaver
        saver = TrajectorySaver({str(path)!r}, defer_writes=600.0)
        config = saver.put({ROOT!r}, empty_checkpoint(), {{}}, {{}})
        for i in range(600):  # more than one commit batch
            saver.put_writes(config, [("ch", i)], f"task-{{i:03d}}")
        """
    )  # exits without close(), long before the writer would commit
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert len(_stored_writes(path)) == 600
    saver = TrajectorySaver(tmp_path / "c.db", defer_writes=600.0)
    config = saver.put(ROOT, empty_checkpoint(), {}, {})
    saver.put_writes(config, [("ch", 1)], "task")
    saver.close()
    assert _stored_writes(saver.path) == [("task", "ch")]


def test_a_failed_deferred_write_fails_the_next_write(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    config = saver.put(ROOT, empty_checkpoint(), {}, {})

    def broken(store: Any, conn: sqlite3.Connection, payloads: list[Any]) -> list[Any]:
        raise sqlite3.OperationalError("disk I/O error")

    saver._store.defer(broken, None, 60.0)
    saver._store.flush()  # nobody waits for it: the error is kept for the next write
    with pytest.raises(RuntimeFailure, match=r"n\.db.*deferred.*disk I/O error.*resume"):
        saver.put(config, empty_checkpoint(), {}, {})
    saver.put(config, empty_checkpoint(), {}, {})  # reported once; the store works on
    saver.close()


def test_a_checkpoint_names_the_node_whose_writes_share_its_commit(tmp_path: Path) -> None:
    """A resumed process (no cached parent) stores a step's writes and the checkpoint after
    them in one commit: the checkpoint's trajectory row still names the node that ran."""
    first = TrajectorySaver(tmp_path / "n.db")
    config = first.put(ROOT, empty_checkpoint(), {"step": -1}, {})
    first.close()
    resumed = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    resumed.put_writes(config, [("ch", 1)], "task", "~__pregel_pull, agent")
    after = resumed.put(config, empty_checkpoint(), {"step": 0}, {})
    row = resumed.transitions("t")[-1]
    assert row.checkpoint_id == after["configurable"]["checkpoint_id"]
    assert row.nodes == ["agent"]
    resumed.close()


def test_more_deferred_writes_than_one_batch_are_all_stored(tmp_path: Path) -> None:
    """A commit takes at most 512 queued payloads: reads, puts and close store them all
    (review, session 5: a put queued behind 600 writes returned before its own commit)."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=600.0)
    config = saver.put(ROOT, empty_checkpoint(), {}, {})
    for i in range(600):
        saver.put_writes(config, [("ch", i)], f"task-{i:03d}")
    seen = saver.get_tuple(config)
    assert seen is not None and len(seen.pending_writes or []) == 600
    for i in range(600):
        saver.put_writes(config, [("ch", i)], f"more-{i:03d}")
    after = saver.put(config, empty_checkpoint(), {"step": 0}, {})
    with sqlite3.connect(saver.path) as conn:  # committed before put returned
        ids = {r[0] for r in conn.execute("SELECT checkpoint_id FROM checkpoints")}
    assert after["configurable"]["checkpoint_id"] in ids
    assert len(_stored_writes(saver.path)) == 1200
    saver.close()


def test_a_saver_used_again_after_close_still_stores_deferred_writes(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=0.01)
    config = saver.put(ROOT, empty_checkpoint(), {}, {})
    saver.put_writes(config, [("ch", 1)], "before")
    saver.close()
    saver.put_writes(config, [("ch", 2)], "after")  # a new writer thread picks it up
    for _ in range(1000):
        if len(_stored_writes(saver.path)) == 2:
            break
        time.sleep(0.01)
    assert _stored_writes(saver.path) == [("after", "ch"), ("before", "ch")]
    saver.close()


# -- checkpoints whose next step is under way ---------------------------------------------


def _stored_checkpoints(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT checkpoint_id FROM checkpoints")}


def _config(checkpoint_id: str) -> Any:
    return {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}


def test_a_checkpoint_tasks_already_wrote_on_top_of_waits_for_the_next_commit(
    tmp_path: Path,
) -> None:
    """LangGraph's default (async) durability saves a checkpoint in the background while the
    next step runs: when that step's writes came first, the run is known to go on, and the
    checkpoint is stored by the next commit. A checkpoint nothing wrote on top of (the last
    of a run) is committed before ``put`` returns."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    first = saver.put(ROOT, empty_checkpoint(), {"step": -1}, {})
    second = empty_checkpoint()
    saver.put_writes(_config(second["id"]), [("ch", 1)], "task", "~__pregel_pull, agent")
    saver.put(first, second, {"step": 0}, {})
    assert _stored_checkpoints(saver.path) == {first["configurable"]["checkpoint_id"]}
    seen = saver.get_tuple(_config(second["id"]))  # reads in this process store it first
    assert seen is not None and seen.pending_writes == [("task", "ch", 1)]
    assert second["id"] in _stored_checkpoints(saver.path)
    third = empty_checkpoint()
    saver.put_writes(_config(third["id"]), [("ch", 2)], "task-2", "~__pregel_pull, agent")
    saver.put(_config(second["id"]), third, {"step": 1}, {})
    assert third["id"] not in _stored_checkpoints(saver.path)
    last = saver.put(_config(third["id"]), empty_checkpoint(), {"step": 2}, {})
    ids = _stored_checkpoints(saver.path)  # the last one took the queued one along
    assert {third["id"], last["configurable"]["checkpoint_id"]} <= ids
    assert [r.nodes for r in saver.transitions("t")][1:] == [[], ["agent"], ["agent"]]
    saver.close()


def test_a_checkpoint_with_a_special_write_on_top_commits_at_once(tmp_path: Path) -> None:
    """An error or interrupt may end the run there: nothing else would commit it."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    first = saver.put(ROOT, empty_checkpoint(), {"step": -1}, {})
    second = empty_checkpoint()
    saver.put_writes(_config(second["id"]), [("ch", 1)], "ok", "~__pregel_pull, a")
    saver.put_writes(_config(second["id"]), [(ERROR, "boom")], "failed", "~__pregel_pull, b")
    saver.put(first, second, {"step": 0}, {})
    assert second["id"] in _stored_checkpoints(saver.path)
    saver.close()


def test_a_late_task_write_names_its_node_on_a_checkpoint_still_queued(tmp_path: Path) -> None:
    """A task's writes saved after the checkpoint that follows them (LangGraph saves both in
    background threads) name the node on it, even when that checkpoint is queued in the same
    commit."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    first = saver.put(ROOT, empty_checkpoint(), {"step": -1}, {})
    second = empty_checkpoint()
    saver.put_writes(_config(second["id"]), [("ch", 1)], "next", "~__pregel_pull, b")
    saver.put(first, second, {"step": 0}, {})  # queued: a task already wrote on top
    saver.put_writes(first, [("ch", 0)], "late", "~__pregel_pull, a")
    saver.put(_config(second["id"]), empty_checkpoint(), {"step": 1}, {})
    assert [r.nodes for r in saver.transitions("t")] == [[], ["a"], ["b"]]
    saver.close()


def test_every_checkpoint_of_a_returned_run_is_in_the_file(tmp_path: Path) -> None:
    """Runs in LangGraph's default durability: once ``invoke`` returns, another connection
    sees every checkpoint, each naming the node that produced it."""
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict):
        n: int

    graph = StateGraph(State)
    for i in range(30):
        graph.add_node(f"n{i}", lambda s: {"n": s["n"] + 1})
        graph.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    graph.add_edge("n29", END)
    with TrajectorySaver(tmp_path / "n.db") as saver:
        app = graph.compile(checkpointer=saver)
        for run in range(10):
            app.invoke({"n": 0}, {"configurable": {"thread_id": f"r{run}"}})
            with sqlite3.connect(saver.path) as conn:
                rows = conn.execute(
                    "SELECT step, nodes FROM checkpoints WHERE thread_id = ? ORDER BY step",
                    (f"r{run}",),
                ).fetchall()
            assert [step for step, _ in rows] == list(range(-1, 31))
            assert [nodes for _, nodes in rows[2:]] == [f'["n{i}"]' for i in range(30)]
