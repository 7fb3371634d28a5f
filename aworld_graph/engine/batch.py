"""Many tasks at once: the loop of :meth:`Runners.run_task <aworld_graph.runner.Runners.run_task>`,
:func:`~aworld_graph.rollout.rollout` and the optimizer's evaluation – in this process (at most
``concurrency`` runs in flight) or on Ray workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..checkpoint import open_store
from ..config import RunConfig
from ..errors import DefinitionError
from ..run import GraphRun
from ..task import Task, TaskResponse
from . import progress
from ._ray import run_on_ray

__all__ = ["run_tasks"]


async def run_tasks(
    task: Task | Sequence[Task],
    *,
    concurrency: int = 8,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    run_conf: RunConfig | None = None,
) -> dict[str, TaskResponse]:
    """Run one task or many; ``{task.id: response}`` (see ``Runners.run_task``)."""
    tasks = [task] if isinstance(task, Task) else list(task)
    if len({t.id for t in tasks}) != len(tasks):
        raise DefinitionError(
            "run_task: two tasks share an id; task ids name checkpoint threads and must be unique"
        )
    saver = checkpointer if checkpointer is not None else open_store(shared=True)
    with progress(len(tasks), run_conf.progress if run_conf is not None else False) as tick:
        if run_conf is not None and run_conf.engine_name == "ray":
            return await run_on_ray(tasks, run_conf, saver, tick)
        if run_conf is not None:
            concurrency = run_conf.max_concurrency
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(t: Task) -> TaskResponse:
            async with gate, GraphRun(t, saver) as run:
                response = await run.drive()
            tick(response)
            return response

        responses = await asyncio.gather(*(one(t) for t in tasks))
    return {r.id: r for r in responses}
