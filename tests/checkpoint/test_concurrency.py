"""Many asyncio tasks and threads sharing one saver (processes and a killed writer: on both
back ends in test_backends.py)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aworld_graph.checkpoint import TrajectorySaver

from .conftest import ask, chat_graph


async def test_many_asyncio_tasks_and_threads_share_one_saver(db_path: Path) -> None:
    async with TrajectorySaver(db_path) as saver:
        app = chat_graph(saver)

        async def chat(thread_id: str) -> None:
            for turn in range(3):
                await app.ainvoke(
                    {"messages": [{"role": "user", "content": f"q{turn}"}], "turn": 0},
                    {"configurable": {"thread_id": thread_id}},
                )

        def sync_chat(thread_id: str) -> None:
            for turn in range(3):
                ask(app, thread_id, f"q{turn}")

        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(4) as pool:
            threaded = [loop.run_in_executor(pool, sync_chat, f"sync-{i}") for i in range(4)]
            await asyncio.gather(*(chat(f"async-{i}") for i in range(60)), *threaded)

        for name in [f"async-{i}" for i in range(60)] + [f"sync-{i}" for i in range(4)]:
            tup = await saver.aget_tuple({"configurable": {"thread_id": name}})
            assert tup is not None
            values = tup.checkpoint["channel_values"]
            assert [m["role"] for m in values["messages"]] == ["user", "assistant"] * 3
            history = [t async for t in saver.alist({"configurable": {"thread_id": name}})]
            assert len(history) == 9


def test_sqlite_writers_of_other_processes_wait_for_the_write_lock(tmp_path: Path) -> None:
    """Writers take an exclusive flock on ``<file>-lock`` (another process's open file here):
    while someone else holds it a write waits (it does not poll SQLite's busy handler), and
    it goes through as soon as the lock is let go."""
    path = tmp_path / "runs.db"
    with TrajectorySaver(path) as saver:
        ask(chat_graph(saver), "first", "hello")
        other = os.open(f"{path}-lock", os.O_RDWR)  # a second open file: as another process
        fcntl.flock(other, fcntl.LOCK_EX)
        try:
            with ThreadPoolExecutor(1) as pool:
                write = pool.submit(ask, chat_graph(saver), "second", "hello")
                time.sleep(0.5)
                assert not write.done()  # waiting for the lock
                fcntl.flock(other, fcntl.LOCK_UN)
                assert write.result(timeout=30)["turn"] == 1
        finally:
            os.close(other)
        assert saver.get_tuple({"configurable": {"thread_id": "second"}}) is not None
