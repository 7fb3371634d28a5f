"""A corrupt, foreign or newer database file gives a clear error naming the file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.errors import ConfigError, RuntimeFailure

from .conftest import ask, chat_graph

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


def test_an_application_database_gains_the_checkpoint_tables(tmp_path: Path) -> None:
    """Other tables may share the file (an app's own, LangGraph's SqliteStore); only tables
    named like ours without our marker are refused (next test)."""
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users VALUES (1, 'ada')")
    with TrajectorySaver(path) as saver:
        saver.put_writes(
            {"configurable": {**CONFIG["configurable"], "checkpoint_ns": "", "checkpoint_id": "x"}},
            [("a", 1)],
            "task",
        )
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM users").fetchall() == [("ada",)]
        assert conn.execute("SELECT channel FROM checkpoint_writes").fetchall() == [("a",)]


def test_langgraph_sqlite_saver_database(tmp_path: Path) -> None:
    path = tmp_path / "langgraph.db"
    with SqliteSaver.from_conn_string(str(path)) as peer:
        ask(chat_graph(peer), "t", "hello")
    with pytest.raises(ConfigError, match="checkpoints"):
        list(TrajectorySaver(path).list(None))


async def test_newer_schema_and_async_path(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    TrajectorySaver(path).get_tuple(CONFIG)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE aworld_meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(ConfigError, match="newer aworld-graph"):
        await TrajectorySaver(path).aget_tuple(CONFIG)


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


def _saver_put(path: Path, turns: int) -> None:
    with TrajectorySaver(path) as saver:
        ask(chat_graph(saver), "t", "hi")
        assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 3 * turns


def test_langgraph_sqlite_store_shares_the_file_in_either_order(tmp_path: Path) -> None:
    store_first, saver_first = tmp_path / "store-first.db", tmp_path / "saver-first.db"
    _store_put(store_first)
    _saver_put(store_first, 1)
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
