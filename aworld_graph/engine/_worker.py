"""The Ray worker actor: a long-lived process with its own event loop, its own model clients
and MCP sessions (built with the tasks' sources) and its own connection to the shared store.

It rebuilds each task from its spec, runs it with the same loop as the local engine
(:func:`~aworld_graph._run_impl.drive`) and returns a small summary; the driver reads the
response itself back from the store.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from ..checkpoint import TrajectorySaver

__all__ = ["Worker"]


class Worker:
    """One worker process (made a Ray actor by :mod:`._ray`)."""

    def __init__(self, sys_path: list[str]) -> None:
        for entry in reversed(sys_path):  # the driver's project directory, when it is here too
            if entry not in sys.path and os.path.isdir(entry):
                sys.path.insert(0, entry)
        self.savers: dict[str, TrajectorySaver] = {}
        """One saver (one connection pool) per store this worker has written to."""

    def _saver(self, store: dict[str, Any]) -> TrajectorySaver:
        from ..checkpoint import TrajectorySaver

        key = f"{store['target']}|{store['durability']}"
        if key not in self.savers:
            self.savers[key] = TrajectorySaver(store["target"], durability=store["durability"])
        return self.savers[key]

    def pid(self) -> int:
        """This worker's process id."""
        return os.getpid()

    async def run(self, spec: dict[str, Any], store: dict[str, Any]) -> dict[str, Any]:
        """Run (or read back, or resume) one task in ``store``; a summary of how it went."""
        from .._run_impl import (
            _checkpoint_chain,
            close_graph,
            drive,
            open_graph,
            resume_hint,
            run_config,
        )
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
            error: str | None = "".join(traceback.format_exception_only(exc)).strip()
            return {**summary, "status": "rejected", "error": error}
        if spec.get("retry"):
            config: RunnableConfig = {"configurable": {"thread_id": task.id, "checkpoint_ns": ""}}
            latest = await saver.aget_tuple(config)
            summary["resumed_from"] = (
                latest.config["configurable"]["checkpoint_id"] if latest else None
            )
        from .. import tracing

        if spec.get("trace") and not tracing.enabled():
            tracing.configure()  # the driver traces: so does this worker (its OTEL_* environment)
        try:
            with (
                tracing.attached(tracing.extract(spec.get("trace"))),
                sampling_temperature(spec.get("temperature")),
            ):
                graph = open_graph(task)
                try:
                    response, _ = await drive(task, graph, saver)
                    chain = (
                        await _checkpoint_chain(
                            saver, run_config(task, graph), response.checkpoint_id
                        )
                        if response.checkpoint_id
                        else {}
                    )
                finally:
                    await close_graph(graph)
        except Exception as exc:  # a bug, not a run's failure (those are in the response)
            error = "".join(traceback.format_exception_only(exc)).strip()
            return {**summary, "status": "crashed", "error": error}
        error = None
        if response.status == "error" and response.msg:
            hint = resume_hint(task.id)
            error = response.msg[: -len(hint)] if response.msg.endswith(hint) else response.msg
        return {
            **summary,
            "status": response.status,
            "error": error,
            "msg": response.msg,
            "head": response.checkpoint_id,
            "chain": {str(step): checkpoint for step, checkpoint in chain.items()},
        }
