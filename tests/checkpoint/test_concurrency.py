"""Many asyncio tasks and threads sharing one saver (processes and a killed writer: on both
back ends in test_backends.py)."""

from __future__ import annotations

import asyncio
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
