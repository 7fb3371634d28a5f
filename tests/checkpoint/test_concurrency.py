"""Many asyncio tasks, threads and processes writing one database file at once."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from aworld_graph.checkpoint import TrajectorySaver

from .conftest import ask, chat_graph

REPO = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from tests.checkpoint.conftest import chat_graph
    from aworld_graph.checkpoint import TrajectorySaver

    path, worker, threads, turns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    async def chat(app, thread_id):
        for turn in range(turns):
            await app.ainvoke(
                {"messages": [{"role": "user", "content": f"{thread_id} q{turn}"}], "turn": 0},
                {"configurable": {"thread_id": thread_id}},
            )

    async def main():
        async with TrajectorySaver(path) as saver:
            app = chat_graph(saver)
            await asyncio.gather(*(chat(app, f"w{worker}-t{i}") for i in range(threads)))
            # and every worker also appends to one shared thread, one turn at a time
            for turn in range(turns):
                saver.put_writes(
                    {"configurable": {"thread_id": "shared", "checkpoint_ns": "",
                                      "checkpoint_id": "root"}},
                    [("log", f"{worker}-{turn}")], f"task-{worker}-{turn}",
                )

    asyncio.run(main())
    """
)


@pytest.mark.slow
def test_four_processes_and_many_tasks_write_one_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    TrajectorySaver(db).get_tuple({"configurable": {"thread_id": "warm"}})
    workers, threads, turns = 4, 8, 4
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), str(w), str(threads), str(turns)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in range(workers)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err.decode()[-3000:]
        assert b"locked" not in err

    with TrajectorySaver(db) as saver:
        for w in range(workers):
            for i in range(threads):
                config = {"configurable": {"thread_id": f"w{w}-t{i}"}}
                state = saver.get_tuple(config)
                assert state is not None
                messages = state.checkpoint["channel_values"]["messages"]
                assert [m["content"] for m in messages[::2]] == [
                    f"w{w}-t{i} q{turn}" for turn in range(turns)
                ]
                assert len(messages) == 2 * turns
                assert len(list(saver.list(config))) == 3 * turns  # input, start, reply
        shared = saver.get_tuple({"configurable": {"thread_id": "shared", "checkpoint_id": "root"}})
        assert shared is None  # writes without a checkpoint are kept but not a checkpoint
        with sqlite3.connect(db) as conn:
            count = conn.execute(
                "SELECT count(*) FROM checkpoint_writes WHERE thread_id = 'shared'"
            ).fetchone()[0]
        assert count == workers * turns


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


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from tests.checkpoint.conftest import ask, chat_graph
    from aworld_graph.checkpoint import TrajectorySaver

    app = chat_graph(TrajectorySaver(sys.argv[1]))
    for turn in range(1000):
        ask(app, "victim", f"q{turn}")
        if turn == 20:
            print("ready", flush=True)
    """
)


@pytest.mark.slow
def test_a_killed_writer_leaves_a_readable_database(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(db)], cwd=REPO, env=env, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    with proc.stdout:
        assert proc.stdout.readline().strip() == b"ready"
        proc.kill()  # SIGKILL, mid-write
        proc.wait(timeout=30)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with TrajectorySaver(db) as saver:
        history = list(saver.list({"configurable": {"thread_id": "victim"}}))
        assert len(history) >= 3 * 21
        for tup in history:  # every committed checkpoint reads back whole
            messages = tup.checkpoint["channel_values"].get("messages", [])
            assert all(m["content"] for m in messages)
        app = chat_graph(saver)
        before = len(history[0].checkpoint["channel_values"]["messages"])
        state = ask(app, "victim", "after the crash")  # and the thread goes on
        assert len(state["messages"]) >= before + 2
