"""A corrupt, foreign or newer database gives a clear error naming it, and is left as it is."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from aworld_graph.checkpoint import SCHEMA_VERSION, TrajectorySaver
from aworld_graph.errors import ConfigError, RuntimeFailure

from .conftest import ask, chat_graph, execute

CONFIG = {"configurable": {"thread_id": "t"}}


def test_garbage_file(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database at all\n" * 200)
    saver = TrajectorySaver(path)
    with pytest.raises(ConfigError) as info:
        saver.get_tuple(CONFIG)
    message = str(info.value)
    assert str(path) in message and "AWORLD_GRAPH_DB" in message
    assert path.read_bytes().startswith(b"this is not")  # left untouched


def _app_file(path: Path) -> Path:
    """A SQLite file of another application: a table of its own, none of the saver's."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.close()
    return path


def _tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        names = sorted(r[0] for r in rows)
    conn.close()
    return names


WRITE_CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "x"}}


def test_an_application_database_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    """A file holding another application's tables is not made a checkpoint store by a read
    or a write: the error names the file, the tables found and both ways on."""
    path = _app_file(tmp_path / "app.db")
    before = _tables(path)
    saver = TrajectorySaver(path)
    for attempt in (
        lambda: saver.threads(),
        lambda: saver.get_tuple(CONFIG),
        lambda: saver.put_writes(WRITE_CONFIG, [("a", 1)], "task"),
        lambda: saver.migrate(),
    ):
        with pytest.raises(ConfigError) as info:
            attempt()
        message = str(info.value)
        assert str(path) in message and "(users)" in message
        assert "share_file=True" in message and "AWORLD_GRAPH_DB / --db" in message
    saver.close()
    assert _tables(path) == before == ["sqlite_sequence", "users"]
    with sqlite3.connect(path) as conn:  # not switched to WAL either
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


def test_share_file_keeps_the_checkpoints_beside_an_applications_tables(tmp_path: Path) -> None:
    path = _app_file(tmp_path / "app.db")
    with TrajectorySaver(path, share_file=True) as saver:
        saver.put_writes(WRITE_CONFIG, [("a", 1)], "task")
    with TrajectorySaver(path) as saver:  # the file holds a store now: opened as any other
        saver.put_writes(WRITE_CONFIG, [("b", 2)], "another-task")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM users").fetchall() == [("ada",)]
        assert sorted(conn.execute("SELECT channel FROM checkpoint_writes")) == [("a",), ("b",)]
    conn.close()


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    """Empty: no bytes (``touch``), or a SQLite database without tables."""
    untouched, bare = tmp_path / "touched.db", tmp_path / "bare.db"
    untouched.touch()
    sqlite3.connect(bare).execute("PRAGMA user_version = 1").connection.close()
    for path in (untouched, bare):
        with TrajectorySaver(path) as saver:
            ask(chat_graph(saver), "t", "hi")
            assert saver.threads()[0].thread_id == "t"


def test_the_cli_names_an_application_database_in_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from aworld_graph.cli import main

    path = _app_file(tmp_path / "foreign.db")
    result = CliRunner().invoke(main, ["threads", "--db", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "(users)" in lines[0]
    assert _tables(path) == ["sqlite_sequence", "users"]


def test_langgraph_sqlite_saver_database(tmp_path: Path) -> None:
    path = tmp_path / "langgraph.db"
    with SqliteSaver.from_conn_string(str(path)) as peer:
        ask(chat_graph(peer), "t", "hello")
    with pytest.raises(ConfigError, match="checkpoints"):
        list(TrajectorySaver(path).list(None))


async def test_newer_schema_and_async_path(target: str) -> None:
    TrajectorySaver(target).get_tuple(CONFIG)
    execute(target, "UPDATE aworld_meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(ConfigError) as info:
        await TrajectorySaver(target).aget_tuple(CONFIG)
    message = str(info.value)
    assert "newer aworld-graph" in message and "schema is 999" in message
    assert f"knows schema {SCHEMA_VERSION} and older" in message
    assert "Upgrade aworld-graph" in message


def test_a_store_a_newer_version_moved_on_is_refused_by_a_saver_already_open(
    target: str,
) -> None:
    """A saver that opened the store before a newer aworld-graph elsewhere migrated it
    writes nothing more to it, and its reads say why."""
    saver = TrajectorySaver(target)
    app = chat_graph(saver)
    ask(app, "t", "hello")
    stored = execute(target, "SELECT count(*) FROM checkpoints")
    execute(target, "UPDATE aworld_meta SET value = ? WHERE key = 'schema_version'",
            (str(SCHEMA_VERSION + 1),))  # fmt: skip
    for attempt in (
        lambda: ask(app, "t", "again"),  # a run resumed
        lambda: ask(app, "new", "hi"),  # a new run
        lambda: saver.put_writes(WRITE_CONFIG, [("a", 1)], "task"),
        lambda: saver.delete_thread("t"),
        lambda: saver.hold("t").__enter__(),
        lambda: saver.threads(),  # listed
        lambda: list(saver.list(None)),  # exported
        lambda: saver.transitions("t"),
    ):
        with pytest.raises(ConfigError) as info:
            attempt()
        message = str(info.value)
        assert saver.label in message and f"schema is {SCHEMA_VERSION + 1}" in message
        assert f"knows schema {SCHEMA_VERSION} and older" in message
    saver.close()
    assert execute(target, "SELECT count(*) FROM checkpoints") == stored
    assert execute(target, "SELECT count(*) FROM checkpoint_leases") == [(0,)]


def test_damaged_pages(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    with TrajectorySaver(path) as saver:
        app = chat_graph(saver)
        for i in range(30):
            ask(app, f"t{i % 3}", "x" * 2000)
        saver.vacuum()
    data = bytearray(path.read_bytes())
    page = 4096
    for start in range(2 * page, len(data), 3 * page):  # scribble over many pages
        data[start + 8 : start + 600] = b"\xff" * 592
    path.write_bytes(bytes(data))
    saver = TrajectorySaver(path)
    with pytest.raises((ConfigError, RuntimeFailure)) as info:
        for i in range(3):
            list(saver.list({"configurable": {"thread_id": f"t{i}"}}))
    assert str(path) in str(info.value)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises((ConfigError, RuntimeFailure), match=str(tmp_path)):
        TrajectorySaver(tmp_path).get_tuple(CONFIG)


def _store_put(path: Path) -> None:
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    store.put(("users",), "ada", {"name": "Ada"})
    assert store.get(("users",), "ada").value == {"name": "Ada"}  # type: ignore[union-attr]
    conn.close()


def _saver_put(path: Path, turns: int, share_file: bool = False) -> None:
    with TrajectorySaver(path, share_file=share_file) as saver:
        ask(chat_graph(saver), "t", "hi")
        assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 3 * turns


def test_langgraph_sqlite_store_shares_the_file_in_either_order(tmp_path: Path) -> None:
    store_first, saver_first = tmp_path / "store-first.db", tmp_path / "saver-first.db"
    _store_put(store_first)
    with pytest.raises(ConfigError, match=r"\(store, store_migrations\)"):
        _saver_put(store_first, 1)  # a file of the store's tables only is another's
    _saver_put(store_first, 1, share_file=True)
    _saver_put(saver_first, 1)
    _store_put(saver_first)
    for path in (store_first, saver_first):  # each goes on using what the other wrote
        _store_put(path)
        _saver_put(path, 2)


def test_a_postgres_url_without_the_extra_names_the_extra(tmp_path: Path) -> None:
    """psycopg missing (blocked in a child process): one clear error, never a SQLite file
    named like the URL."""
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "from aworld_graph.checkpoint import TrajectorySaver\n"
        "from aworld_graph.errors import ConfigError\n"
        "try:\n"
        "    TrajectorySaver('postgresql://me@127.0.0.1:1/db')\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert "pip install 'aworld-graph[postgres]'" in done.stdout, done.stderr
    assert not any(tmp_path.iterdir())
