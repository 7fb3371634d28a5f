"""CLI misuse (issue 22): ``fork --set`` is checked against the state's fields and types (every
problem at once, nothing written), ``fork --new-thread`` will not merge into an existing run
unless asked to replace it, a garbled database is a clear message in every reading command,
and ``run MODULE:ATTR`` names what the user typed."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from aworld_graph import Runners
from aworld_graph.cli import main
from aworld_graph.errors import DefinitionError


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A finished run ``r1`` in a database; its database and its first tool checkpoint."""
    monkeypatch.setenv("STEP_LOG", str(tmp_path / "steps.log"))
    db = str(tmp_path / "cli.db")
    code, out = _run(
        "run", "tests.procs.killable:swarm", "-i", "go", "--task-id", "r1", "--db", db, "--json"
    )
    assert code == 0, out
    return db, json.loads(out)["trajectory"][0]["meta"]["checkpoint_id"]


def _rows(db: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])


@pytest.mark.parametrize(
    ("sets", "says"),
    [
        (["steps=abc"], ["steps: 'abc' is not an integer"]),
        (["context=[1,2]"], ["context: [1, 2] is not a mapping"]),
        (["no_such_field=1"], ["'no_such_field' is not a state field", "context.no_such_field"]),
        (["stepz=1"], ["did you mean 'steps'?"]),
        (["steps=true"], ["steps: True is not an integer"]),
        (["rewards=[1]"], ["rewards: [1] is not a list of mappings"]),
        (
            ["steps=abc", "context=[1,2]", "no_such_field=1", "novalue"],
            ["4 problem(s)", "steps:", "context:", "no_such_field", "'novalue': write KEY=VALUE"],
        ),
    ],
)
def test_fork_set_is_checked_and_nothing_is_written(
    stored: tuple[str, str], sets: list[str], says: list[str]
) -> None:
    db, checkpoint = stored
    before = _rows(db)
    args = [part for item in sets for part in ("--set", item)]
    code, out = _run("fork", checkpoint, *args, "--new-thread", "f1", "--db", db)
    assert code == 1
    for words in says:
        assert words in out, out
    assert "Nothing was forked" in out
    assert _rows(db) == before


def test_fork_set_keeps_text_fields_as_written(stored: tuple[str, str]) -> None:
    db, checkpoint = stored
    code, out = _run(
        "fork", checkpoint, "--set", "answer=42", "--set", "status=running",
        "--set", "context.n=7", "--new-thread", "f2", "--db", db,
    )  # fmt: skip
    assert code == 0, out
    from aworld_graph.checkpoint import TrajectorySaver

    saver = TrajectorySaver(db)
    latest = saver.get_tuple({"configurable": {"thread_id": "f2", "checkpoint_ns": ""}})
    saver.close()
    assert latest is not None
    values = latest.checkpoint["channel_values"]
    assert values["answer"] == "42" and values["status"] == "running"
    assert values["context"]["n"] == 7


def _roots(db: str, thread: str) -> int:
    with sqlite3.connect(db) as conn:
        query = (
            "SELECT count(*) FROM checkpoints WHERE thread_id = ? AND parent_checkpoint_id IS NULL"
        )
        return int(conn.execute(query, (thread,)).fetchone()[0])


def test_fork_into_an_existing_run_is_refused_unless_replaced(
    stored: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, checkpoint = stored
    code, out = _run(
        "run", "tests.procs.killable:swarm", "-i", "go", "--task-id", "other", "--db", db
    )
    assert code == 0, out
    before = _rows(db)
    code, out = _run("fork", checkpoint, "--new-thread", "other", "--db", db)
    assert code == 1 and "thread 'other' already holds a run" in out and "--replace" in out
    assert _rows(db) == before and _roots(db, "other") == 1
    code, out = _run("fork", checkpoint, "--new-thread", "r1", "--db", db)
    assert code == 1 and "is the thread being forked" in out
    code, out = _run("fork", checkpoint, "--new-thread", "other", "--replace", "--db", db)
    assert code == 0 and "into thread other" in out
    assert _roots(db, "other") == 1  # one history, the fork's


def test_runners_fork_checks_the_edit(stored: tuple[str, str]) -> None:
    from aworld_graph.checkpoint import TrajectorySaver
    from tests.procs.killable import swarm

    db, checkpoint = stored
    saver = TrajectorySaver(db)
    try:
        with pytest.raises(DefinitionError, match=r"2 problem\(s\): steps: 'x' is not an integer"):
            asyncio.run(
                Runners.fork("r1", checkpoint, values={"steps": "x", "answr": "y"},
                             swarm=swarm, checkpointer=saver)
            )  # fmt: skip
    finally:
        saver.close()


def _garbled(kind: str, path: Path) -> Path:
    if kind == "random":
        path.write_bytes(bytes(range(256)) * 64)
    elif kind == "text":
        path.write_text("this is not a database\n" * 100)
    else:  # a real SQLite file cut short
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE t (x)")
            conn.executemany("INSERT INTO t VALUES (?)", [("y" * 500,)] * 200)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    return path


@pytest.mark.parametrize("kind", ["random", "text", "truncated"])
@pytest.mark.parametrize(
    "command",
    [
        ("export", "--format", "aworld", "--out", "OUT"),
        ("threads",),
        ("history", "t1"),
        ("run", "tests.procs.killable:swarm", "-i", "go"),
    ],
)
def test_a_garbled_database_is_a_clear_message(
    tmp_path: Path, kind: str, command: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEP_LOG", str(tmp_path / "steps.log"))
    db = _garbled(kind, tmp_path / "bad.db")
    args = [str(tmp_path / "out.jsonl") if a == "OUT" else a for a in command]
    code, out = _run(*args, "--db", str(db))
    assert code == 1, out
    assert str(db) in out and ("not a valid SQLite file" in out or "corrupt" in out), out
    assert len(out.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("target", "kind"),
    [("os:sep", "str"), ("os:path", "module"), ("json:loads", "function"), ("math:pi", "float")],
)
def test_run_names_the_target_that_is_not_runnable(target: str, kind: str) -> None:
    code, out = _run("run", target, "--input", "x")
    assert code == 1
    module, attr = target.split(":")
    assert out.strip() == (
        f"Error: {target}: {attr!r} in module {module!r} is a {kind}, not an Agent or a Swarm; "
        "point at one (e.g. aworld_graph.examples:math_agent) or at a workflow .yaml file"
    )
