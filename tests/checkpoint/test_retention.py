"""Deleting, pruning by count or age, compacting; and where the default database lives."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.errors import ConfigError

from .conftest import ask, chat_graph


def _rows(path: Path, thread_id: str) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return {
            table: conn.execute(
                f"SELECT count(*) FROM {table} WHERE thread_id = ?", (thread_id,)
            ).fetchone()[0]
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "trajectory")
        }


def test_delete_thread_removes_every_row(saver: TrajectorySaver) -> None:
    app = chat_graph(saver)
    for thread_id in ("gone", "kept"):
        ask(app, thread_id, "hello")
        ask(app, thread_id, "again")
    saver.delete_thread("gone")
    assert set(_rows(saver.path, "gone").values()) == {0}
    assert all(_rows(saver.path, "kept").values())


def test_prune_older_than(saver: TrajectorySaver) -> None:
    app = chat_graph(saver)
    for turn in range(3):
        ask(app, "old", f"q{turn}")
    with sqlite3.connect(saver.path) as conn:  # age the thread by a week
        conn.execute(
            "UPDATE checkpoints SET created_at = '2000-01-01T00:00:00+00:00' "
            "WHERE thread_id = 'old'"
        )
    ask(app, "new", "fresh")
    assert saver.prune_older_than(timedelta(days=1)) == 8  # all but old's latest
    assert len(list(saver.list({"configurable": {"thread_id": "old"}}))) == 1
    assert len(list(saver.list({"configurable": {"thread_id": "new"}}))) == 3
    latest = saver.get_tuple({"configurable": {"thread_id": "old"}})
    assert latest is not None and len(latest.checkpoint["channel_values"]["messages"]) == 6
    assert saver.prune_older_than(1.0, ["old"], keep_latest=False) == 1
    assert saver.get_tuple({"configurable": {"thread_id": "old"}}) is None
    assert saver.prune_older_than(0.5) == 0  # nothing is that old any more


def test_prune_keep_last_across_threads(saver: TrajectorySaver) -> None:
    app = chat_graph(saver)
    for thread_id in ("a", "b"):
        for turn in range(4):
            ask(app, thread_id, f"q{turn}")
    assert saver.prune_keep_last(5) == 2 * (12 - 5)
    for thread_id in ("a", "b"):
        history = list(saver.list({"configurable": {"thread_id": thread_id}}))
        assert len(history) == 5
        assert len(history[0].checkpoint["channel_values"]["messages"]) == 8
    with pytest.raises(ConfigError, match="at least 1"):
        saver.prune_keep_last(0)


def test_vacuum_gives_space_back(saver: TrajectorySaver) -> None:
    app = chat_graph(saver)
    for turn in range(40):
        ask(app, "big", "x" * 5_000 + str(turn))
    saver.vacuum()
    full = saver.path.stat().st_size
    saver.delete_thread("big")
    saver.vacuum()
    assert saver.path.stat().st_size < full / 4
    wal = saver.path.with_name(saver.path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
