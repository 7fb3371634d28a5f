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
