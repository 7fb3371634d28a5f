"""A store written by schema 2 (skeleton and list deltas) reads the same before and after
it is migrated, and is migrated by its first write or by ``aworld-graph migrate``."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.cli import main

from .conftest import ask, chat_graph

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = json.loads((FIXTURES / "schema2.json").read_text())
THREADS = ("chain", "chat", "forked")


class _N(TypedDict):
    n: int


def _failing_graph(saver: TrajectorySaver) -> Any:
    def step(state: _N) -> dict[str, int]:
        raise RuntimeError("the node broke")

    graph = StateGraph(_N)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile(checkpointer=saver)


def _plain(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        if isinstance(value, dict):
            return {str(k): _plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_plain(v) for v in value]
        return repr(value)


def _tuples(saver: TrajectorySaver) -> dict[str, list[dict[str, Any]]]:
    return {
        thread: [
            {
                "config": t.config,
                "parent_config": t.parent_config,
                "checkpoint": _plain(t.checkpoint),
                "metadata": _plain(t.metadata),
                "pending_writes": _plain([list(w) for w in t.pending_writes or []]),
            }
            for t in saver.list({"configurable": {"thread_id": thread}})
        ]
        for thread in THREADS
    }


def _trajectory(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as conn:
        cols = [d[1] for d in conn.execute("PRAGMA table_info(trajectory)")]
        rows = conn.execute(
            "SELECT * FROM trajectory WHERE source IS NOT 'error' ORDER BY thread_id, checkpoint_id"
        )
        return [{k: v for k, v in zip(cols, row, strict=True) if k != "error"} for row in rows]


def _copy(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema2.db", path)
    return path


def _schema(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(
            conn.execute("SELECT value FROM aworld_meta WHERE key = 'schema_version'").fetchone()[0]
        )


def test_schema_2_reads_the_same_before_and_after_migration(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    assert EXPECTED["counts"]["skeleton_deltas"] > 0 and EXPECTED["counts"]["list_deltas"] > 0
    with TrajectorySaver(path) as saver:
        before = _tuples(saver)  # read as it is: nothing written yet
        assert _schema(path) == "2"
        assert before == EXPECTED["tuples"]
        assert _trajectory(path) == EXPECTED["trajectory"]
        assert saver.migrate() is True
        assert _schema(path) == "4"
        assert _tuples(saver) == EXPECTED["tuples"]
        assert saver.migrate() is False
    assert _trajectory(path) == EXPECTED["trajectory"]
    with sqlite3.connect(path) as conn:
        left = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE substr(checkpoint, 1, 1) = x'c1'"
        ).fetchone()[0]
        errors = conn.execute(
            "SELECT nodes, error FROM trajectory WHERE source = 'error'"
        ).fetchall()
    assert left == 0
    assert errors == [('["reply"]', "ValueError('the reply node failed on purpose')")]


def test_the_first_write_migrates_and_the_thread_goes_on(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    with TrajectorySaver(path) as saver:
        state = ask(chat_graph(saver), "chat", "one more")
        assert _schema(path) == "4"
        assert (
            len(state["messages"])
            == len(EXPECTED["tuples"]["chat"][0]["checkpoint"]["channel_values"]["messages"]) + 2
        )
        assert _tuples(saver)["chain"] == EXPECTED["tuples"]["chain"]


def test_migrate_command(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    result = CliRunner().invoke(main, ["migrate", str(path)])
    assert result.exit_code == 0, result.output
    assert "schema 4" in result.output and _schema(path) == "4"
    again = CliRunner().invoke(main, ["migrate", str(path)])
    assert again.exit_code == 0 and "already" in again.output
    missing = CliRunner().invoke(main, ["migrate", str(tmp_path / "nope.db")])
    assert missing.exit_code != 0 and "nope.db" in missing.output
    assert "Traceback" not in missing.output


def test_a_schema_3_store_gains_the_texts_table(target: str) -> None:
    """Schema 3 (this release's first PostgreSQL one) differed only by lacking
    ``checkpoint_texts``: such a store reads as it was and gains the table on migration."""
    from .conftest import execute

    with TrajectorySaver(target) as saver:
        ask(chat_graph(saver), "old", "hello")
        with pytest.raises(RuntimeError, match="broke"):
            _failing_graph(saver).invoke({"n": 0}, {"configurable": {"thread_id": "failed"}})
    execute(target, "DROP TABLE checkpoint_texts")
    execute(target, "UPDATE aworld_meta SET value = '3' WHERE key = 'schema_version'")
    with TrajectorySaver(target) as saver:
        before = _plain(list(saver.list({"configurable": {"thread_id": "old"}})))
        failed = [(r.source, r.error) for r in saver.transitions("failed")]
        assert failed[-1][0] == "error" and "broke" in str(failed[-1][1])  # schema 3 has them
        assert saver.migrate() is True
        assert [(r.source, r.error) for r in saver.transitions("failed")] == failed
        assert _plain(list(saver.list({"configurable": {"thread_id": "old"}}))) == before
        assert ask(chat_graph(saver), "old", "again")["turn"] == 1
    version = execute(target, "SELECT value FROM aworld_meta WHERE key = 'schema_version'")
    assert version == [("4",)] and execute(target, "SELECT count(*) FROM checkpoint_texts")
