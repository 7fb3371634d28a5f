"""``--db`` is a value the CLI passes to the store it opens, never an environment variable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.cli import main


def test_db_goes_to_the_store_not_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = tmp_path / "default.db"
    monkeypatch.setenv("AWORLD_GRAPH_DB", str(default))
    db = tmp_path / "chosen.db"
    args = ["run", "tests.procs.killable:swarm", "--input", "go", "--task-id", "d1", "--db", str(db)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert f"stored: {db} (thread d1" in result.output
    assert os.environ["AWORLD_GRAPH_DB"] == str(default)
    assert not default.exists()
    with TrajectorySaver(db) as saver:
        assert [t.thread_id for t in saver.threads()] == ["d1"]
    threads = CliRunner().invoke(main, ["threads", "--db", str(db)])
    assert threads.exit_code == 0 and "d1" in threads.output


def test_a_missing_store_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["threads", "--db", str(tmp_path / "none.db")])
    assert result.exit_code != 0
    assert f"no checkpoint database at {tmp_path / 'none.db'}" in result.output
