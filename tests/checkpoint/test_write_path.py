"""The write path through the saver's public API: every ``put`` is one transaction, taken in
turn with every other writer of the file (the saver's lock, then ``<file>-lock``), committed
before it returns; the async API waits for it in a worker thread. Another process's writer is
played here by a second open file of ``<file>-lock`` holding its ``flock`` (docs/checkpoints.md,
*How a write works*)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint

from aworld_graph.checkpoint import TrajectorySaver


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def _checkpoint(value: str) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"v": value, "items": [value] * 3}
    checkpoint["channel_versions"] = {"v": "1", "items": "1"}
    return checkpoint


def _put(saver: TrajectorySaver, thread_id: str, value: str) -> None:
    checkpoint = _checkpoint(value)
    saver.put(_config(thread_id), checkpoint, {"step": 0}, checkpoint["channel_versions"])


async def _aput(saver: TrajectorySaver, thread_id: str, value: str) -> None:
    checkpoint = _checkpoint(value)
    await saver.aput(_config(thread_id), checkpoint, {"step": 0}, checkpoint["channel_versions"])


def _stored(saver: TrajectorySaver, thread_id: str) -> dict[str, Any] | None:
    found = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    return None if found is None else dict(found.checkpoint["channel_values"])


@contextmanager
def _file_lock_taken(path: Path) -> Iterator[Callable[[], None]]:
    """``<file>-lock`` held as another process's writer would; yields what lets it go."""
    fd = os.open(f"{path}-lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield lambda: fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    path = tmp_path / "writes.db"
    with TrajectorySaver(path) as saver:
        saver.migrate()  # the file, its tables and its lock file exist
    return path


def test_sync_writes_start_no_thread(path: Path) -> None:
    before = set(threading.enumerate())
    with TrajectorySaver(path) as saver:
        for i in range(20):
            _put(saver, f"t{i}", f"v{i}")
        saver.vacuum()
        saver.prune_keep_last(1)
        assert set(threading.enumerate()) == before
        assert _stored(saver, "t19") == {"v": "v19", "items": ["v19"] * 3}


def test_many_threads_putting_at_once_all_commit(path: Path) -> None:
    with TrajectorySaver(path) as saver:

        def puts(i: int) -> None:
            for step in range(5):
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"n": f"{i}-{step}"}
                saver.put(_config(f"t{i}"), checkpoint, {"step": step}, {})

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(puts, range(16)))  # re-raises the first error, if any
        for i in range(16):
            stored = list(saver.list({"configurable": {"thread_id": f"t{i}"}}))
            assert [t.metadata["step"] for t in stored] == [4, 3, 2, 1, 0]


def test_sync_and_async_writes_from_threads_and_event_loops_all_commit(path: Path) -> None:
    with TrajectorySaver(path) as saver:

        def loop_writes(name: str) -> None:
            async def main() -> None:
                await asyncio.gather(*(_aput(saver, f"{name}-{i}", name) for i in range(30)))

            asyncio.run(main())

        def sync_writes(name: str) -> None:
            for i in range(30):
                _put(saver, f"{name}-{i}", name)

        with ThreadPoolExecutor(6) as pool:
            jobs = [pool.submit(loop_writes, f"loop{k}") for k in range(3)]
            jobs += [pool.submit(sync_writes, f"sync{k}") for k in range(3)]
            for job in jobs:
                job.result(timeout=120)
        assert len(saver.threads()) == 6 * 30
        assert _stored(saver, "loop2-29") == {"v": "loop2", "items": ["loop2"] * 3}


def test_a_write_waits_for_another_processs_writer_and_then_commits(path: Path) -> None:
    with TrajectorySaver(path) as saver, _file_lock_taken(path) as let_go:
        with ThreadPoolExecutor(1) as pool:
            write = pool.submit(_put, saver, "t", "after")
            with pytest.raises(TimeoutError):
                write.result(timeout=0.3)  # waiting for the file's lock
            assert _stored(saver, "t") is None  # reads go on meanwhile, and see nothing yet
            let_go()
            write.result(timeout=30)
        assert _stored(saver, "t") == {"v": "after", "items": ["after"] * 3}


async def test_an_async_write_cancelled_while_it_waits_is_stored_whole_and_the_saver_goes_on(
    path: Path,
) -> None:
    async with TrajectorySaver(path) as saver:
        with _file_lock_taken(path) as let_go:
            write = asyncio.create_task(_aput(saver, "cancelled", "x"))
            await asyncio.sleep(0.1)  # in its worker thread, waiting for the file's lock
            write.cancel()
            with pytest.raises(asyncio.CancelledError):
                await write
            let_go()
            await _aput(saver, "next", "y")  # after the cancelled one: it had its turn first
        assert _stored(saver, "cancelled") == {"v": "x", "items": ["x"] * 3}
        assert _stored(saver, "next") == {"v": "y", "items": ["y"] * 3}


async def test_a_hold_cancelled_while_its_lease_waits_gives_the_lease_back(path: Path) -> None:
    """The lease's write still commits in its thread after a cancel; the hold then gives it
    back, so the thread is not left busy for other savers until the lease expires."""
    async with TrajectorySaver(path) as saver:
        entered = asyncio.Event()

        async def run() -> None:
            async with saver.ahold("t1"):
                entered.set()

        with _file_lock_taken(path) as let_go:
            task = asyncio.create_task(run())
            await asyncio.sleep(0.1)  # its lease write waits for the file
            task.cancel()
            await asyncio.sleep(0)
            let_go()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert not entered.is_set()
        with TrajectorySaver(path) as other, other.hold("t1"):
            pass  # not ThreadBusy: no lease was left behind
        async with saver.ahold("t1"):  # nor in this saver
            pass


async def test_holds_of_one_thread_on_one_loop_take_turns_in_order(path: Path) -> None:
    async with TrajectorySaver(path) as saver:
        order: list[int] = []

        async def run(i: int) -> None:
            async with saver.ahold("t"):
                order.append(i)
                await asyncio.sleep(0.01)
                order.append(i)

        await asyncio.gather(*(run(i) for i in range(5)))
        assert order == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
        with TrajectorySaver(path) as other, other.hold("t"):
            pass  # every hold gave its lease back


def test_close_waits_for_the_write_in_progress_and_the_saver_reopens(path: Path) -> None:
    saver = TrajectorySaver(path)
    _put(saver, "first", "a")
    with _file_lock_taken(path) as let_go, ThreadPoolExecutor(2) as pool:
        write = pool.submit(_put, saver, "in-flight", "b")
        with pytest.raises(TimeoutError):
            write.result(timeout=0.2)
        closing = pool.submit(saver.close)
        with pytest.raises(TimeoutError):
            closing.result(timeout=0.2)  # it waits for the write's turn to end
        let_go()
        write.result(timeout=30)
        closing.result(timeout=30)
    assert _stored(saver, "in-flight") == {"v": "b", "items": ["b"] * 3}  # reopened
    _put(saver, "after", "c")
    saver.close()
    with TrajectorySaver(path) as fresh:
        assert {t.thread_id for t in fresh.threads()} == {"first", "in-flight", "after"}


async def test_a_write_asked_for_during_a_vacuum_commits_when_it_ends(path: Path) -> None:
    async with TrajectorySaver(path) as saver:
        _put(saver, "before", "a")
        with _file_lock_taken(path) as let_go:
            vacuum = asyncio.create_task(asyncio.to_thread(saver.vacuum))
            await asyncio.sleep(0.1)  # the vacuum has this saver's turn, waits for the file
            write = asyncio.create_task(_aput(saver, "during", "b"))
            await asyncio.sleep(0.1)
            assert not vacuum.done() and not write.done()
            let_go()
            await asyncio.wait_for(asyncio.gather(vacuum, write), 30)
        assert _stored(saver, "during") == {"v": "b", "items": ["b"] * 3}
        assert _stored(saver, "before") == {"v": "a", "items": ["a"] * 3}


def test_a_failed_write_stores_nothing_of_itself(path: Path) -> None:
    """A put that fails after its first statements (a value the serializer refuses is caught
    before; a busy thread is refused inside the transaction) leaves no row behind."""
    from aworld_graph.errors import ThreadBusy

    with TrajectorySaver(path) as holder, TrajectorySaver(path) as other:
        with holder.hold("t"):
            with pytest.raises(ThreadBusy):
                _put(other, "t", "refused")
        assert _stored(other, "t") is None
        assert other.transitions("t") == []
