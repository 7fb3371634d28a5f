"""The Ray worker actor: a long-lived process with its own event loop, its own model clients
and MCP sessions (built with the tasks' sources) and its own connection to the shared store.

The driver sends it a chunk of the batch as one streaming call (:meth:`Worker.stream`). It
rebuilds each task from its spec, runs it as the local engine does (a
:class:`~aworld_graph.run.GraphRun`), at most ``max_concurrency`` at a time, and yields a
summary of each finished run: how it went and the :class:`~aworld_graph.task.TaskResponse`
that loop built, so the driver has the local engine's very response without reading the run
back from the store.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import traceback
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from ..checkpoint import TrajectorySaver

__all__ = ["Worker"]


class Worker:
    """One worker process (made a Ray actor by :mod:`._ray`)."""

    def __init__(self, sys_path: list[str], max_concurrency: int) -> None:
        for entry in reversed(sys_path):  # the driver's project directory, when it is here too
            if entry not in sys.path and os.path.isdir(entry):
                sys.path.insert(0, entry)
        self.savers: dict[str, TrajectorySaver] = {}
        """One saver (one connection pool) per store this worker has written to."""
        self.gate = asyncio.Semaphore(max_concurrency)
        """At most ``max_concurrency`` runs at a time, over every chunk this worker holds."""

    def _saver(self, store: dict[str, Any]) -> TrajectorySaver:
        from ..checkpoint import open_store

        key = f"{store['target']}|{store['durability']}"
        if key not in self.savers:
            self.savers[key] = open_store(store["target"], durability=store["durability"])
        return self.savers[key]

    def pid(self) -> int:
        """This worker's process id."""
        return os.getpid()

    async def stream(
        self, specs: list[dict[str, Any]], store: dict[str, Any]
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Run a chunk of tasks; yields each run's summary (in a list of one) as the run ends.
        Cancelling the call cancels the runs still going (each stays resumable from its last
        checkpoint)."""

        async def one(spec: dict[str, Any]) -> dict[str, Any]:
            async with self.gate:  # FIFO: the chunk's tasks start in the order they came
                return await self.run(spec, store)

        # each run lands in `ended` when it ends and is let go once sent
        ended: asyncio.Queue[asyncio.Future[dict[str, Any]]] = asyncio.Queue()
        pending: set[asyncio.Future[dict[str, Any]]] = {
            asyncio.ensure_future(one(spec)) for spec in specs
        }
        for job in pending:
            job.add_done_callback(ended.put_nowait)
        try:
            while pending:
                done = await ended.get()
                pending.discard(done)
                yield [done.result()]
        finally:
            for job in pending:
                job.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def run(self, spec: dict[str, Any], store: dict[str, Any]) -> dict[str, Any]:
        """Run (or read back, or resume) one task in ``store``; a summary of how it went, with
        the run's response under ``response`` when it ran."""
        from ..errors import AWorldGraphError
        from ..model import sampling_temperature
        from ._specs import task_of

        summary: dict[str, Any] = {
            "id": spec["id"],
            "pid": os.getpid(),
            "host": socket.gethostname(),
        }
        try:
            task = task_of(spec)
            saver = self._saver(store)
        except AWorldGraphError as exc:
            return {**summary, "status": "rejected", "error": str(exc)}
        except Exception as exc:  # importing the task's module failed
            error = "".join(traceback.format_exception_only(exc)).strip()
            return {**summary, "status": "rejected", "error": error}
        if spec.get("retry"):
            config: RunnableConfig = {"configurable": {"thread_id": task.id, "checkpoint_ns": ""}}
            latest = await saver.aget_tuple(config)
            summary["resumed_from"] = (
                latest.config["configurable"]["checkpoint_id"] if latest else None
            )
        from .. import tracing
        from ..run import GraphRun

        if spec.get("trace") and not tracing.enabled():
            tracing.configure()  # the driver traces: so does this worker (its OTEL_* environment)
        try:
            with (
                tracing.attached(tracing.extract(spec.get("trace"))),
                sampling_temperature(spec.get("temperature")),
            ):
                async with GraphRun(task, saver) as run:
                    response = await run.drive()
        except Exception as exc:  # a bug, not a run's failure (those are in the response)
            error = "".join(traceback.format_exception_only(exc)).strip()
            return {**summary, "status": "crashed", "error": error}
        return {**summary, "status": response.status, "response": response}
