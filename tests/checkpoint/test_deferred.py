"""Writes nothing waits for are queued for the next commit (``defer_writes``).

``normal`` durability: ``put_writes`` of ordinary channels returns once they are queued.
Both durabilities: a ``put`` whose checkpoint tasks have already written on top of (LangGraph's
background saves lag behind the steps) is queued too. The next commit (LangGraph's next
checkpoint) stores them, or the writer thread after ``defer_writes`` seconds; reads and
writes through any saver on the file in this process, ``close`` and interpreter exit store
them first."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.types import ERROR

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.checkpoint._write import PutRecord
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


# -- checkpoints whose run has a later save on its way -------------------------------------


def _stored_checkpoints(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT checkpoint_id FROM checkpoints")}


def _config(checkpoint_id: str) -> Any:
    return {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}


def _lagging_run(saver: TrajectorySaver) -> tuple[Any, Any, Any]:
    """What LangGraph's background saves look like when they fall behind the steps: the
    tasks of steps 1-3 wrote on checkpoints 0-2 before the saves of checkpoints 1 and 2
    ran. Returns the three checkpoints; 0 is stored, 1 is put (and queued)."""
    c0, c1, c2 = empty_checkpoint(), empty_checkpoint(), empty_checkpoint()  # ids ascend
    saver.put(ROOT, c0, {"step": -1}, {})  # nothing newer written yet: committed
    for checkpoint, node in ((c0, "a"), (c1, "b"), (c2, "c")):
        saver.put_writes(
            _config(checkpoint["id"]), [("ch", node)], f"task-{node}", f"~__pregel_pull, {node}"
        )
    saver.put(_config(c0["id"]), c1, {"step": 0}, {})
    return c0, c1, c2


@pytest.mark.parametrize("durability", ["normal", "full"])
def test_a_checkpoint_whose_successor_is_on_its_way_is_stored_by_its_commit(
    tmp_path: Path, durability: Any
) -> None:
    """Tasks wrote on a newer checkpoint, so that checkpoint's save is already on its way
    (LangGraph chains its saves): this one is queued and that save's commit stores it. The
    newest save commits (and, in ``full``, flushes) before it returns."""
    saver = TrajectorySaver(tmp_path / "n.db", durability=durability, defer_writes=60.0)
    c0, c1, c2 = _lagging_run(saver)
    assert _stored_checkpoints(saver.path) == {c0["id"]}  # checkpoint 1 is queued
    saver.put(_config(c1["id"]), c2, {"step": 1}, {})
    assert _stored_checkpoints(saver.path) == {c0["id"], c1["id"], c2["id"]}
    store = saver._store
    assert durability == "normal" or store._synced == store._seq  # flushed before returning
    assert [r.nodes for r in saver.transitions("t")] == [[], ["a"], ["b"]]
    saver.close()


def test_reads_in_this_process_and_flush_store_a_queued_checkpoint(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    _, c1, _ = _lagging_run(saver)
    seen = saver.get_tuple(_config(c1["id"]))
    assert seen is not None and seen.pending_writes == [("task-b", "ch", "b")]
    assert c1["id"] in _stored_checkpoints(saver.path)
    c0, c1, _ = _lagging_run(other := TrajectorySaver(tmp_path / "o.db", defer_writes=60.0))
    other.flush()  # before reading the file with a connection of one's own
    assert _stored_checkpoints(other.path) == {c0["id"], c1["id"]}
    other.close()
    saver.close()


def test_a_save_that_fails_to_serialize_stores_what_is_queued_first(tmp_path: Path) -> None:
    """The run stops at the failing save, so no later commit would take the queue along."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    c0, c1, c2 = _lagging_run(saver)
    c2["channel_values"]["bad"] = object()
    with pytest.raises(Exception, match="object"):
        saver.put(_config(c1["id"]), c2, {"step": 1}, {"bad": 1})
    assert _stored_checkpoints(saver.path) == {c0["id"], c1["id"]}
    saver.close()


def _lagging_run_whose_queued_checkpoint_fails(tmp_path: Path) -> tuple[TrajectorySaver, Any, Any]:
    """:func:`_lagging_run` with checkpoint 1 queued and bound to fail at its commit (a
    trigger stands in for a disk error)."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    _, c1, c2 = _lagging_run(saver)
    with sqlite3.connect(saver.path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON checkpoints WHEN NEW.step = 0 "
            "BEGIN SELECT RAISE(ABORT, 'disk is full'); END"
        )
    return saver, c1, c2


def test_a_queued_checkpoint_that_fails_to_commit_fails_the_save_that_took_it(
    tmp_path: Path,
) -> None:
    saver, c1, c2 = _lagging_run_whose_queued_checkpoint_fails(tmp_path)
    with pytest.raises(RuntimeFailure, match=r"checkpoint.*queued.*disk is full.*resume"):
        saver.put(_config(c1["id"]), c2, {"step": 1}, {})
    assert c1["id"] not in _stored_checkpoints(saver.path)
    saver.close()


def test_a_queued_checkpoint_that_fails_is_reported_to_its_own_thread_only(tmp_path: Path) -> None:
    """Another thread's save may commit the queue: that save does not fail for it; the
    thread the checkpoint belongs to does, at its next save."""
    saver, c1, c2 = _lagging_run_whose_queued_checkpoint_fails(tmp_path)
    other = {"configurable": {"thread_id": "other", "checkpoint_ns": ""}}
    saver.put(other, empty_checkpoint(), {"step": -1}, {})  # commits the queue: t's fails
    assert c1["id"] not in _stored_checkpoints(saver.path)
    with pytest.raises(RuntimeFailure, match=r"queued.*disk is full"):
        saver.put(_config(c1["id"]), c2, {"step": 1}, {})
    saver.close()


def test_a_newer_checkpoint_already_saved_by_another_run_does_not_queue(tmp_path: Path) -> None:
    """Two runs on one thread: writes on the other run's newer checkpoint, whose save has
    already been made, promise no later save to this run. (Only ids count here; the
    parent links are whatever lets this saver work the rows out at once.)"""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    first = saver.put(ROOT, empty_checkpoint(), {"step": -1}, {})
    mine, theirs = empty_checkpoint(), empty_checkpoint()  # theirs is newer
    saver.put_writes(_config(theirs["id"]), [("ch", 1)], "task", "~__pregel_pull, a")
    saved = saver.put(first, theirs, {"step": 0}, {})  # the other run's save
    saver.put(saved, mine, {"step": 1}, {})  # this run's last save
    assert mine["id"] in _stored_checkpoints(saver.path)
    saver.close()
    # the same when the other run's save was not worked out early (its parent is not the
    # checkpoint this saver wrote last)
    saver = TrajectorySaver(tmp_path / "m.db", defer_writes=60.0)
    first, other, mine, theirs = (empty_checkpoint() for _ in range(4))  # ids ascend
    saver.put(ROOT, first, {"step": -1}, {})
    saver.put(_config(first["id"]), other, {"step": 0}, {})
    saver.put_writes(_config(theirs["id"]), [("ch", 1)], "task", "~__pregel_pull, a")
    saver.put(_config(first["id"]), theirs, {"step": 0}, {})
    saver.put(_config(theirs["id"]), mine, {"step": 1}, {})
    assert mine["id"] in _stored_checkpoints(saver.path)
    saver.close()


def test_writes_for_a_checkpoint_an_error_or_interrupt_ended_commit_at_once(
    tmp_path: Path,
) -> None:
    """A slower parallel task's writes arriving after another task's interrupt: the run
    stops at that checkpoint, so no later save would take them along."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    config = saver.put(ROOT, empty_checkpoint(), {"step": -1}, {})
    saver.put_writes(config, [(ERROR, "boom")], "failed", "~__pregel_pull, a")
    saver.put_writes(config, [("ch", 1)], "slow", "~__pregel_pull, b")
    assert _stored_writes(saver.path) == [("failed", ERROR), ("slow", "ch")]
    saver.close()


def test_deleting_a_thread_drops_its_queued_failure(tmp_path: Path) -> None:
    saver, c1, c2 = _lagging_run_whose_queued_checkpoint_fails(tmp_path)
    saver.flush()  # the queued checkpoint fails; kept for thread t's next write
    saver.delete_thread("t")
    saver.put(ROOT, empty_checkpoint(), {"step": -1}, {})  # a new thread t starts clean
    saver.close()


def test_async_saves_store_the_queue_through_the_writer_when_one_fails(tmp_path: Path) -> None:
    """``aput`` never commits on the event loop: a failing save has the writer thread
    store what is queued before the error is raised."""

    async def main() -> None:
        saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
        c0, c1, c2 = _lagging_run(saver)
        c2["channel_values"]["bad"] = object()
        with pytest.raises(Exception, match="object"):
            await saver.aput(_config(c1["id"]), c2, {"step": 1}, {"bad": 1})
        assert _stored_checkpoints(saver.path) == {c0["id"], c1["id"]}
        await saver.__aexit__(None, None, None)

    asyncio.run(main())


def test_after_a_failed_task_write_the_thread_queues_no_older_checkpoint(tmp_path: Path) -> None:
    """LangGraph skips the save a failed task write belongs to, so nothing would commit a
    checkpoint queued behind it."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    c0, c1, c2 = _lagging_run(saver)
    saver.flush()
    c3 = empty_checkpoint()
    saver.put_writes(_config(c3["id"]), [("ch", "c3")], "task-d", "~__pregel_pull, d")
    with pytest.raises(Exception, match="object"):
        saver.put_writes(_config(c3["id"]), [("bad", object())], "task-e", "~__pregel_pull, e")
    saver.put(_config(c1["id"]), c2, {"step": 1}, {})  # superseded by c3, but c3 failed
    assert c2["id"] in _stored_checkpoints(saver.path)
    saver.close()


def test_late_task_writes_commit_at_once_and_name_their_node_on_a_queued_checkpoint(
    tmp_path: Path,
) -> None:
    """A task's writes saved after the checkpoint that follows them (LangGraph saves both
    from background threads): no later save would take them along, so they commit at once,
    naming their node on that checkpoint even while it is only queued."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    c0, c1, c2 = _lagging_run(saver)  # checkpoint 1 queued
    saver.put_writes(_config(c0["id"]), [("ch", "late")], "task-late", "~__pregel_pull, late")
    assert c1["id"] in _stored_checkpoints(saver.path)
    assert [r.nodes for r in saver.transitions("t")] == [[], ["a", "late"]]
    saver.close()


def test_a_node_noted_after_a_checkpoint_was_worked_out_is_named_at_its_commit(
    tmp_path: Path,
) -> None:
    """Another thread's write can be noted after a queued checkpoint's rows were worked
    out but before its write looked for that checkpoint: the commit names the node."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=60.0)
    c0, c1, c2 = _lagging_run(saver)
    saver._store.note_node("t", "", c0["id"], "racing")  # noted, but no naming row made
    saver.put(_config(c1["id"]), c2, {"step": 1}, {})
    assert [r.nodes for r in saver.transitions("t")] == [[], ["a", "racing"], ["b"]]
    saver.close()


@pytest.mark.parametrize("durability", ["normal", "full"])
def test_every_checkpoint_of_a_returned_run_is_in_the_file(tmp_path: Path, durability: Any) -> None:
    """Runs in LangGraph's default durability: once ``invoke`` returns, another connection
    sees every checkpoint, each naming the node that produced it."""
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict):
        n: int

    graph = StateGraph(State).add_sequence(
        [(f"n{i}", lambda s: {"n": s["n"] + 1}) for i in range(30)]
    )
    graph.add_edge(START, "n0").add_edge("n29", END)
    with TrajectorySaver(tmp_path / "n.db", durability=durability) as saver:
        queued: list[Any] = []
        defer = saver._store.defer

        def counting(apply: Any, payload: Any, *rest: Any, **named: Any) -> None:
            queued.append(payload)
            defer(apply, payload, *rest, **named)

        saver._store.defer = counting  # type: ignore[method-assign]
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
    # the saves fell behind the steps, so checkpoints were queued (this test is about them)
    assert any(isinstance(p, PutRecord) for p in queued)


def test_defer_writes_0_commits_every_checkpoint_before_returning(tmp_path: Path) -> None:
    for durability in ("normal", "full"):
        saver = TrajectorySaver(
            tmp_path / f"{durability}.db", durability=durability, defer_writes=0
        )
        c0, c1, _ = _lagging_run(saver)
        assert _stored_checkpoints(saver.path) == {c0["id"], c1["id"]}
        saver.close()


def test_flush_waits_for_a_batch_the_writer_thread_is_committing(tmp_path: Path) -> None:
    """The writer may have taken the queue and be waiting for the file's write lock (another
    process holds it): flush, and so exit, wait for that commit rather than return early."""
    saver = TrajectorySaver(tmp_path / "n.db", defer_writes=0.01)
    c0, c1, _ = _lagging_run(saver)
    holder = sqlite3.connect(saver.path, timeout=60, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.5, holder.commit)
    for _ in range(1000):  # until the writer has taken the queued checkpoint
        if not saver._store._queue:
            break
        time.sleep(0.005)
    release.start()
    saver.flush()
    assert c1["id"] in _stored_checkpoints(saver.path)
    release.join()
    holder.close()
    saver.close()


def test_deleting_runs_keeps_the_failure_of_a_thread_still_in_use(tmp_path: Path) -> None:
    saver, c1, c2 = _lagging_run_whose_queued_checkpoint_fails(tmp_path)
    saver.flush()  # checkpoint 1 fails; kept for thread t's next write
    with sqlite3.connect(saver.path) as conn:  # an earlier run of the thread
        conn.execute("UPDATE checkpoints SET run_id = 'old'")
    saver.delete_for_runs(["old"])
    with pytest.raises(RuntimeFailure, match="disk is full"):
        saver.put(_config(c1["id"]), c2, {"step": 1}, {})
    saver.close()
