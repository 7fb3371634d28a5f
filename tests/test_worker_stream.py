"""The Ray worker's chunk loop (``Worker.stream``), run in this process without Ray."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aworld_graph import Agent, Task, TrajectorySaver
from aworld_graph.engine import _worker
from aworld_graph.engine._ray import _store
from aworld_graph.engine._specs import source_spec, task_spec
from aworld_graph.testing import FunctionModel

agent = Agent(name="quick", model=FunctionModel(lambda messages, tools: "done", name="quick"))
"""A module attribute, so the worker rebuilds it from its spec as a Ray worker would."""


async def _drain(stream: Any) -> list[list[dict[str, Any]]]:
    return [batch async for batch in stream]


async def test_each_run_of_a_chunk_is_sent_as_it_ends(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "w.db")
    store = _store(saver)
    source = source_spec(agent)
    specs = [task_spec(Task(input=f"x {i}", agent=agent, id=f"w-{i}"), source) for i in range(3)]
    worker = _worker.Worker([], max_concurrency=3)
    try:
        batches = await asyncio.wait_for(_drain(worker.stream(specs, store)), timeout=60)
    finally:
        saver.close()
        for own in worker.savers.values():
            own.close()
    assert [len(batch) for batch in batches] == [1, 1, 1]  # nothing held back to travel together
    summaries = [s for batch in batches for s in batch]
    assert sorted(s["id"] for s in summaries) == ["w-0", "w-1", "w-2"]
    assert {s["status"] for s in summaries} == {"finished"}
    assert [s["response"].answer for s in summaries] == ["done"] * 3
