"""Group commit on SQLite: the writes threads ask for while a transaction runs commit together
in the next one, each in a savepoint, so one that raises is undone alone and raises only to its
own caller; every caller returns only once its write is committed."""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


# Async writes (``aeach``): they wait on a future, not in a thread. The file's lock free, their
# group commits in the event loop's own thread; taken (another process's writer, here another
# open file of ``<file>-lock``), a thread waits for it and hands the group back to the loop.


@contextmanager
def _file_lock_taken(db: SqliteDatabase) -> Iterator[Callable[[], None]]:
    """``<file>-lock`` held as another process's writer would; yields what lets it go."""
    fd = os.open(f"{db.path}-lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield lambda: fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _until(condition: Callable[[], bool]) -> None:
    """Wait (blocking, the loop has nothing to do meanwhile) until ``condition()``, 30 s at most."""
    deadline = time.monotonic() + 30
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.001)


def _noting(key: str, seen: dict[str, Any]) -> Callable[[Tx], Any]:
    def job(tx: Tx) -> str:
        tx.run("INSERT INTO t VALUES (?)", (key,))
        seen[key] = (threading.get_ident(), tx)
        return key

    return job


async def test_async_writes_commit_in_the_loops_thread_and_wait_for_the_file_without_blocking_it(
    db: SqliteDatabase,
) -> None:
    seen: dict[str, Any] = {}
    assert await db.aeach(_noting("free", seen)) == "free"  # the file free: committed at once
    assert seen["free"][0] == threading.get_ident()
    with _file_lock_taken(db) as let_go:
        pending = [asyncio.create_task(db.aeach(_noting(k, seen))) for k in "abc"]
        for _ in range(20):  # the loop runs on while they wait for the file
            await asyncio.sleep(0)
        assert not any(task.done() for task in pending) and set(seen) == {"free"}
        threading.Timer(0.05, let_go).start()
        assert await asyncio.gather(*pending) == ["a", "b", "c"]
    # the thread that waited for the file handed the group back: one transaction, this thread
    assert {seen[k][0] for k in "abc"} == {threading.get_ident()}
    assert len({id(seen[k][1]) for k in "abc"}) == 1
    assert _keys(db) == {"free", "a", "b", "c"}


async def test_an_async_write_that_raises_raises_to_its_caller_alone(db: SqliteDatabase) -> None:
    def fails(tx: Tx) -> None:
        tx.run("INSERT INTO t VALUES ('b')")
        raise ValueError("b went wrong")

    with _file_lock_taken(db) as let_go:
        a, b = (asyncio.create_task(db.aeach(job)) for job in (_insert("a"), fails))
        await asyncio.sleep(0)
        let_go()
        assert (await a)[0] == "a"
        with pytest.raises(ValueError, match="b went wrong"):
            await b
    assert _keys(db) == {"a"}


async def test_a_cancelled_async_write_still_commits_and_the_others_return(
    db: SqliteDatabase,
) -> None:
    with _file_lock_taken(db) as let_go:
        a, b = (asyncio.create_task(db.aeach(_insert(k))) for k in "ab")
        await asyncio.sleep(0)
        a.cancel()
        with pytest.raises(asyncio.CancelledError):
            await a
        let_go()
        assert (await b)[0] == "b"
    assert _keys(db) == {"a", "b"}  # as a write already in a thread would have


def test_sync_and_async_writes_from_several_threads_and_event_loops_all_commit(
    db: SqliteDatabase,
) -> None:
    def loop_writes(name: str) -> None:
        async def main() -> None:
            await asyncio.gather(*(db.aeach(_insert(f"{name}-{i}")) for i in range(40)))

        asyncio.run(main())

    def sync_writes(name: str) -> None:
        for i in range(40):
            db.each(_insert(f"{name}-{i}"))

    threads = [threading.Thread(target=loop_writes, args=(f"loop{k}",)) for k in range(3)]
    threads += [threading.Thread(target=sync_writes, args=(f"sync{k}",)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert len(_keys(db)) == 6 * 40


async def test_a_loop_blocked_in_a_sync_write_leaves_the_waiting_group_to_the_thread(
    db: SqliteDatabase,
) -> None:
    """The thread that got the file's lock cannot hand the group to a loop that is blocked,
    here in a sync write waiting for that very group: after ``HANDOVER_S`` it commits it."""
    seen: dict[str, Any] = {}
    with _file_lock_taken(db) as let_go:
        pending = asyncio.create_task(db.aeach(_noting("async", seen)))
        await asyncio.sleep(0)
        threading.Timer(0.05, let_go).start()
        db.each(_insert("sync"))  # blocks this loop until the group before has committed
    assert await pending == "async"
    assert seen["async"][0] != threading.get_ident()
    assert _keys(db) == {"async", "sync"}


def test_a_write_whose_loop_closed_while_it_waited_for_the_file_commits_all_the_same(
    db: SqliteDatabase,
) -> None:
    with _file_lock_taken(db) as let_go:

        async def main() -> None:  # ends, and its loop closes, while the write waits
            asyncio.get_running_loop().create_task(db.aeach(_insert("orphan")))
            await asyncio.sleep(0)

        asyncio.run(main())
        let_go()
        deadline = time.monotonic() + 30
        while "orphan" not in _keys(db) and time.monotonic() < deadline:
            time.sleep(0.01)
    assert _keys(db) == {"orphan"}
    db.each(_insert("after"))  # neither lock was left held
    assert _keys(db) == {"orphan", "after"}


async def test_a_new_databases_first_async_write_opens_its_connection_in_a_thread(
    tmp_path: Path,
) -> None:
    fresh = SqliteDatabase(tmp_path / "fresh.db", "normal")  # no connection open yet
    seen: dict[str, Any] = {}

    def first(tx: Tx) -> None:
        tx.run("CREATE TABLE t (k TEXT PRIMARY KEY)")
        seen["first"] = threading.get_ident()

    await fresh.aeach(first)  # opening a connection may wait (WAL mode): not on the loop
    _until(lambda: not fresh._lock.locked())  # that thread lets go of the saver's turn
    await fresh.aeach(_noting("next", seen))  # one is open now: committed in the loop
    assert seen["first"] != threading.get_ident() == seen["next"][0]
    fresh.close()


async def test_an_async_write_asked_for_during_a_vacuum_commits_when_it_ends(
    db: SqliteDatabase,
) -> None:
    with _file_lock_taken(db) as let_go:
        vacuum = threading.Thread(target=db.vacuum)  # holds the saver's turn, waits for the file
        vacuum.start()
        _until(db._lock.locked)
        pending = asyncio.create_task(db.aeach(_insert("during")))
        await asyncio.sleep(0.05)
        assert not pending.done()
        let_go()
        assert (await asyncio.wait_for(pending, 30))[0] == "during"
        vacuum.join(30)
    assert _keys(db) == {"during"}


async def test_with_no_thread_to_wait_for_the_file_the_loop_commits_itself(
    db: SqliteDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _file_lock_taken(db) as let_go:
        releaser = threading.Thread(target=lambda: (time.sleep(0.1), let_go()))
        releaser.start()

        def no_thread(self: threading.Thread) -> None:
            raise RuntimeError("can't create new thread at interpreter shutdown")

        monkeypatch.setattr(threading.Thread, "start", no_thread)
        assert (await db.aeach(_insert("x")))[0] == "x"  # waited for the file in the loop
        monkeypatch.undo()
        releaser.join(30)
    assert not db._lock.locked() and _keys(db) == {"x"}


async def test_a_hold_cancelled_while_its_lease_waits_gives_the_lease_back(tmp_path: Path) -> None:
    """The lease's write still commits after a cancel; the hold then gives it back, so the
    thread is not left busy for other savers until the lease expires."""
    saver = TrajectorySaver(tmp_path / "lease.db")
    saver.migrate()
    db = saver._database()
    entered = asyncio.Event()

    async def run() -> None:
        async with saver.ahold("t1"):
            entered.set()

    with _file_lock_taken(db) as let_go:
        task = asyncio.create_task(run())
        await asyncio.sleep(0.05)  # its lease write waits for the file
        task.cancel()
        await asyncio.sleep(0)
        let_go()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not entered.is_set()
    with TrajectorySaver(tmp_path / "lease.db") as other, other.hold("t1"):
        pass  # not ThreadBusy: no lease was left behind
    saver.close()
