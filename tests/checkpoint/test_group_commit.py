"""Group commit on SQLite: the writes threads ask for while a transaction runs commit together
in the next one, each in a savepoint, so one that raises is undone alone and raises only to its
own caller; every caller returns only once its write is committed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.checkpoint._db import SqliteDatabase, Tx


class Abort(BaseException):
    """Not an ``Exception``: it ends the whole transaction, as a failed commit would."""


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SqliteDatabase]:
    database = SqliteDatabase(tmp_path / "group.db", "normal")
    database.each(lambda tx: tx.run("CREATE TABLE t (k TEXT PRIMARY KEY)"))
    yield database
    database.close()


def _insert(key: str, then: Callable[[], Any] = lambda: None) -> Callable[[Tx], Any]:
    def job(tx: Tx) -> Any:
        tx.run("INSERT INTO t VALUES (?)", (key,))
        then()
        return key, threading.get_ident()

    return job


def _behind_a_transaction(
    db: SqliteDatabase, jobs: dict[str, Callable[[Tx], Any]]
) -> dict[str, tuple[str, Any]]:
    """Run ``jobs`` in threads of their own while a first write's transaction is open, so they
    all wait for it; what each caller got: ``("ok", result)`` or ``("raised", exception)``."""
    inside, release = threading.Event(), threading.Event()
    got: dict[str, tuple[str, Any]] = {}

    def call(name: str, job: Callable[[Tx], Any]) -> None:
        try:
            got[name] = ("ok", db.each(job))
        except BaseException as exc:  # noqa: BLE001 - the test looks at what each caller got
            got[name] = ("raised", exc)

    first = _insert("first", lambda: (inside.set(), release.wait(30)))
    threads = [threading.Thread(target=call, args=("first", first))]
    threads[0].start()
    assert inside.wait(30)
    for name, job in jobs.items():
        threads.append(threading.Thread(target=call, args=(name, job)))
        threads[-1].start()
    deadline = time.monotonic() + 30
    while len(db._waiting) < len(jobs) and time.monotonic() < deadline:
        time.sleep(0.005)  # until every job waits for the first transaction
    assert len(db._waiting) == len(jobs)
    release.set()
    for thread in threads:
        thread.join(30)
    return got


def _keys(db: SqliteDatabase) -> set[str]:
    with db.read() as tx:
        return {row[0] for row in tx.all("SELECT k FROM t")}


def test_writes_that_wait_commit_together_each_returning_its_own_result(
    db: SqliteDatabase,
) -> None:
    got = _behind_a_transaction(db, {k: _insert(k) for k in ("a", "b", "c")})
    assert {name: (how, value[0]) for name, (how, value) in got.items()} == {
        name: ("ok", name) for name in ("first", "a", "b", "c")
    }
    runners = {got[name][1][1] for name in ("a", "b", "c")}
    assert len(runners) == 1  # one thread ran the three: one transaction
    assert runners != {got["first"][1][1]}
    assert _keys(db) == {"first", "a", "b", "c"}


def test_a_write_that_raises_is_undone_alone_and_raises_to_its_caller(db: SqliteDatabase) -> None:
    def fails() -> None:
        raise ValueError("b went wrong")

    got = _behind_a_transaction(
        db, {"a": _insert("a"), "b": _insert("b", fails), "c": _insert("c")}
    )
    assert got["a"][0] == got["c"][0] == "ok"
    assert got["b"][0] == "raised" and str(got["b"][1]) == "b went wrong"
    assert _keys(db) == {"first", "a", "c"}  # b's row was undone, its neighbours' kept


def test_a_transaction_that_fails_raises_to_every_caller_and_stores_nothing_of_it(
    db: SqliteDatabase,
) -> None:
    def aborts() -> None:
        raise Abort

    got = _behind_a_transaction(
        db, {"a": _insert("a"), "b": _insert("b", aborts), "c": _insert("c")}
    )
    assert all(got[name][0] == "raised" and isinstance(got[name][1], Abort) for name in "abc")
    assert _keys(db) == {"first"}


def test_a_write_raising_an_sqlite_error_says_what_it_is_in_its_own_thread(
    db: SqliteDatabase,
) -> None:
    got = _behind_a_transaction(db, {"a": _insert("a"), "dup": _insert("first")})
    assert got["a"][0] == "ok"
    how, error = got["dup"]
    assert how == "raised" and "UNIQUE constraint failed" in str(error), error
    assert str(db.path) in str(error)  # the project's error, naming the store
    assert _keys(db) == {"first", "a"}


def test_many_threads_putting_at_once_all_commit(tmp_path: Path) -> None:
    """Savers' puts from many threads at once (grouped as they wait) are each stored."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = TrajectorySaver(tmp_path / "many.db")
    errors: list[BaseException] = []

    def put(i: int) -> None:
        try:
            for step in range(5):
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"n": f"{i}-{step}"}
                config = {"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}}
                saver.put(config, checkpoint, {"step": step}, {})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    for i in range(16):
        stored = list(saver.list({"configurable": {"thread_id": f"t{i}"}}))
        assert [t.metadata["step"] for t in stored] == [4, 3, 2, 1, 0]
    saver.close()


def test_the_connection_used_last_is_handed_out_next(db: SqliteDatabase) -> None:
    """SQLite drops a connection's page cache when another connection has written since it
    last read: the pool hands out the connection given back last (one that went through
    every pooled connection in turn found each one's cache stale)."""
    with db.read() as a, db.read() as b:  # two connections in the pool
        first, second = a._cursor, b._cursor
    assert first is not second
    with db.read() as tx:  # given back last, so handed out first
        assert tx._cursor is first
    db.each(_insert("after"))
    with db.read() as tx:  # the write used it, and gave it back
        assert tx._cursor is first
        assert tx.all("SELECT k FROM t") == [("after",)]
