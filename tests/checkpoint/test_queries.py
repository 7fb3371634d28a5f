"""Metadata filters are validated, and reads use indexes and a bounded number of queries."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.checkpoint.saver import PAGE
from aworld_graph.errors import ConfigError

from .conftest import ask, chat_graph


def _put(saver: TrajectorySaver, thread_id: str, **metadata: Any) -> None:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saver.put(config, empty_checkpoint(), {"source": "loop", "step": 0, **metadata}, {})


@pytest.mark.parametrize(
    "key",
    [
        "source') OR 1=1 --",
        'step" = 1 OR "1',
        "a.b",
        "1st",
        "",
        "$.source",
        "sp ace",
        "x'; DROP TABLE checkpoints; --",
    ],
)
def test_filter_keys_must_be_identifiers(saver: TrajectorySaver, key: str) -> None:
    _put(saver, "t", score=1)
    with pytest.raises(ConfigError, match="filter key"):
        list(saver.list(None, filter={key: 1}))
    assert len(list(saver.list(None))) == 1


def test_filter_values_of_every_type(saver: TrajectorySaver) -> None:
    _put(saver, "t", score=42, ok=True, tag="a'b\"c", extra=None, info={"k": [1, 2]})
    _put(saver, "t", score=7, ok=False, tag="other", info={"k": [3]})
    cases: list[tuple[dict[str, Any], int]] = [
        ({"score": 42}, 1),
        ({"score": 42.0}, 1),
        ({"ok": True}, 1),
        ({"ok": False}, 1),
        ({"tag": "a'b\"c"}, 1),
        ({"tag": "' OR '1'='1"}, 0),
        ({"extra": None}, 2),  # absent and null both match None, as in LangGraph's savers
        ({"info": {"k": [1, 2]}}, 1),
        ({"source": "loop", "score": 7}, 1),
        ({"missing": "x"}, 0),
    ]
    for flt, count in cases:
        assert len(list(saver.list({"configurable": {"thread_id": "t"}}, filter=flt))) == count, flt


def _plan(path: Path, sql: str, params: tuple[Any, ...]) -> str:
    with sqlite3.connect(path) as conn:
        return " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params))


def test_access_paths_use_indexes(saver: TrajectorySaver) -> None:
    ask(chat_graph(saver), "t", "hello")
    latest = _plan(
        saver.path,
        "SELECT checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
        "ORDER BY checkpoint_id DESC LIMIT 1",
        ("t", ""),
    )
    assert (
        "USING INDEX" in latest or "USING PRIMARY KEY" in latest
    ) and "TEMP B-TREE" not in latest
    runs = _plan(saver.path, "SELECT 1 FROM checkpoints WHERE run_id = ?", ("r",))
    assert "checkpoints_run_id" in runs
    writes = _plan(
        saver.path,
        "SELECT * FROM checkpoint_writes WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND checkpoint_id BETWEEN ? AND ? ORDER BY checkpoint_id, task_path, task_id, idx",
        ("t", "", "a", "b"),
    )
    assert "SEARCH checkpoint_writes USING PRIMARY KEY" in writes
    blobs = _plan(
        saver.path,
        "SELECT * FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND channel = ? AND version BETWEEN ? AND ?",
        ("t", "", "messages", "a", "b"),
    )
    assert "SEARCH checkpoint_blobs USING PRIMARY KEY" in blobs


def _count_statements(saver: TrajectorySaver, action: Any) -> int:
    """Statements the saver runs for ``action``, counted with SQLite's trace hook on the
    connections it opens (it opens every connection with ``sqlite3.connect``)."""
    statements: list[str] = []
    saver.close()
    real = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    sqlite3.connect = traced  # type: ignore[assignment]
    try:
        action()
    finally:
        sqlite3.connect = real
    return len(statements)


def test_history_and_latest_do_not_query_per_checkpoint(db_path: Path) -> None:
    saver = TrajectorySaver(db_path)
    app = chat_graph(saver)
    ask(app, "short", "q")
    for turn in range(150):
        ask(app, "long", f"q{turn}")  # 450 checkpoints
    short = _count_statements(
        saver, lambda: list(saver.list({"configurable": {"thread_id": "short"}}))
    )
    long = _count_statements(
        saver, lambda: list(saver.list({"configurable": {"thread_id": "long"}}))
    )
    pages = -(-450 // PAGE)  # each a fixed number of queries, not one per checkpoint
    assert long <= (pages + 1) * short < 450
    one = _count_statements(
        saver, lambda: saver.get_tuple({"configurable": {"thread_id": "short"}})
    )
    many = _count_statements(
        saver, lambda: saver.get_tuple({"configurable": {"thread_id": "long"}})
    )
    assert many == one
