"""Threads: the store's checkpoint threads as the API's ``Thread`` objects, their state and
history read through LangGraph, state edits through :meth:`Runners.fork`, copies and deletes
through the saver. A run made by the CLI or the library is a thread here like any other.

A thread created over the API before its first run lives in this process's memory only; its
metadata is written into the checkpoints of its runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from .._run_impl import built
from ..errors import AWorldGraphError
from ..runner import Runners
from ..trajectory import run_status
from ._assistants import Assistant, Assistants
from ._runs import RunManager
from ._wire import ApiError, checkpoint_ref, clean, now, snapshot_json, to_messages

__all__ = ["Threads"]

_STORED_ONLY = ("source", "step", "parents", "writes", "run_id", "forked_from")


def _config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


class Threads:
    """Thread operations over one ``TrajectorySaver``."""

    def __init__(self, saver: Any, assistants: Assistants, runs: RunManager) -> None:
        self.saver = saver
        self.assistants = assistants
        self.runs = runs
        self.fresh: dict[str, dict[str, Any]] = {}
        """Threads created over the API that have no checkpoint yet."""

    # -- lookup ----------------------------------------------------------------------------

    async def _latest(self, thread_id: str) -> Any:
        return await self.saver.aget_tuple(_config(thread_id))

    async def exists(self, thread_id: str) -> bool:
        if thread_id in self.fresh or self.runs.busy(thread_id):
            return True
        return await self._latest(thread_id) is not None

    async def assistant_of(self, thread_id: str) -> Assistant | None:
        """The assistant whose runs the thread holds, or ``None`` (no run yet, or a run of a
        workflow this server does not serve)."""
        latest = await self._latest(thread_id)
        if latest is not None:
            return self.assistants.of_metadata(latest.metadata or {})
        graph = self.fresh.get(thread_id, {}).get("metadata", {}).get("graph_id")
        return self.assistants.get(graph) if isinstance(graph, str) else None

    async def _graph(self, thread_id: str) -> Any:
        assistant = await self.assistant_of(thread_id)
        if assistant is None:
            if not await self.exists(thread_id):
                raise self.not_found(thread_id)
            raise ApiError(
                409,
                "unknown_workflow",
                f"thread {thread_id} holds a run of a workflow this server does not serve; "
                "serve it too (aworld-graph serve WORKFLOW ...)",
            )
        return built(assistant.source).compile(self.saver)

    @staticmethod
    def not_found(thread_id: str) -> ApiError:
        return ApiError(
            404,
            "thread_not_found",
            f"no thread {thread_id!r}; create it with POST /threads or list them with "
            "POST /threads/search",
        )

    # -- Thread objects --------------------------------------------------------------------

    async def create(self, body: Mapping[str, Any]) -> str:
        """A new thread (in memory until its first run); its id."""
        import uuid

        thread_id = str(body.get("thread_id") or uuid.uuid4())
        if body.get("thread_id") and await self.exists(thread_id):
            if body.get("if_exists") == "do_nothing":
                return thread_id
            raise ApiError(
                409,
                "thread_exists",
                f"thread {thread_id} exists; use another id or if_exists='do_nothing'",
            )
        metadata = dict(body.get("metadata") or {})
        if not isinstance(body.get("metadata") or {}, Mapping):
            raise ApiError(422, "invalid_metadata", "metadata must be an object")
        stamp = now()
        self.fresh[thread_id] = {"metadata": metadata, "created_at": stamp, "updated_at": stamp}
        return thread_id

    async def get(self, thread_id: str, summary: Any = None) -> dict[str, Any]:
        latest = await self._latest(thread_id)
        fresh = self.fresh.get(thread_id)
        running = self.runs.busy(thread_id)
        if latest is None and fresh is None and running:  # before its first checkpoint
            fresh = {"metadata": {}, "created_at": running[0].created_at}
            fresh["updated_at"] = fresh["created_at"]
        if latest is None and fresh is None:
            raise self.not_found(thread_id)
        if latest is not None:  # its runs keep the metadata now
            self.fresh.pop(thread_id, None)
        if latest is None:
            assert fresh is not None
            status = "busy" if running else "idle"
            return {
                "thread_id": thread_id,
                "created_at": fresh["created_at"],
                "updated_at": fresh["updated_at"],
                "metadata": clean(fresh["metadata"]),
                "status": status,
                "values": {},
                "interrupts": {},
            }
        metadata = {k: v for k, v in (latest.metadata or {}).items() if k not in _STORED_ONLY}
        assistant = self.assistants.of_metadata(latest.metadata or {})
        if assistant is not None:
            metadata |= {"graph_id": assistant.graph_id, "assistant_id": assistant.assistant_id}
        state = None
        if assistant is not None:
            compiled = built(assistant.source).compile(self.saver)
            state = await compiled.aget_state(_config(thread_id))
        values = state.values if state is not None else latest.checkpoint["channel_values"]
        interrupts = {
            t.id: [clean(i) for i in t.interrupts]
            for t in (state.tasks if state else ())
            if t.interrupts
        }
        run = "finished"  # the run's status by the one rule, then as LangGraph's API says it
        if state is not None:
            run = run_status(
                (state.values or {}).get("status"),
                failed=any(_failed(t.error) for t in state.tasks),
                interrupted=bool(interrupts),
                pending=bool(state.next or state.tasks),
            )
        if self.runs.busy(thread_id):
            status = "busy"
        else:  # "interrupted" also for a run stopped (killed, cancelled) mid-run
            status = _THREAD_STATUS.get(run, "idle")
        stamp = latest.checkpoint.get("ts")
        first = summary.first_at if summary else (fresh or {}).get("created_at", stamp)
        return {
            "thread_id": thread_id,
            "created_at": first,
            "updated_at": summary.last_at if summary else stamp,
            "metadata": clean(metadata),
            "status": status,
            "values": clean(values or {}),
            "interrupts": interrupts,
        }

    async def _summaries(self) -> list[Any]:
        return list(await asyncio.to_thread(self.saver.threads))

    async def search(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``POST /threads/search``: by ``ids``, ``metadata`` (exact), ``status``; newest first."""
        wanted_ids = set(body.get("ids") or [])
        wanted_meta = dict(body.get("metadata") or {})
        wanted_status = body.get("status")
        offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
        summaries = {s.thread_id: s for s in await self._summaries()}
        stamped = [(s.last_at, t) for t, s in summaries.items()]
        stamped += [(f["updated_at"], t) for t, f in self.fresh.items() if t not in summaries]
        order = [t for _, t in sorted(stamped, reverse=True)]
        out: list[dict[str, Any]] = []
        for thread_id in order:
            if wanted_ids and thread_id not in wanted_ids:
                continue
            thread = await self.get(thread_id, summaries.get(thread_id))
            if any(thread["metadata"].get(k) != v for k, v in wanted_meta.items()):
                continue
            if wanted_status and thread["status"] != wanted_status:
                continue
            out.append(thread)
            if len(out) >= offset + limit:
                break
        return out[offset:]

    async def patch(self, thread_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``metadata`` into a thread that has no run yet (a stored run's metadata is
        part of its checkpoints and stays as it was written)."""
        if thread_id not in self.fresh:
            if await self._latest(thread_id) is None:
                raise self.not_found(thread_id)
            raise ApiError(
                409,
                "thread_has_runs",
                f"thread {thread_id} has stored runs, whose metadata is kept as written",
            )
        self.fresh[thread_id]["metadata"].update(dict(body.get("metadata") or {}))
        self.fresh[thread_id]["updated_at"] = now()
        return await self.get(thread_id)

    def _idle(self, thread_id: str, what: str) -> None:
        running = self.runs.busy(thread_id)
        if running:
            raise ApiError(
                409,
                "thread_busy",
                f"cannot {what} thread {thread_id} while run {running[0].run_id} is going; "
                "cancel or join it first",
            )

    async def delete(self, thread_id: str) -> None:
        self._idle(thread_id, "delete")
        if not await self.exists(thread_id):
            raise self.not_found(thread_id)
        self.fresh.pop(thread_id, None)
        await asyncio.to_thread(self.saver.delete_thread, thread_id)

    async def copy(self, thread_id: str) -> dict[str, Any]:
        """A new thread with the whole history of ``thread_id`` (a fork to go on from)."""
        import uuid

        if not await self.exists(thread_id):
            raise self.not_found(thread_id)
        new = str(uuid.uuid4())
        if await self._latest(thread_id) is not None:
            await asyncio.to_thread(self.saver.copy_thread, thread_id, new)
        else:
            record = self.fresh[thread_id]
            self.fresh[new] = {**record, "metadata": dict(record["metadata"])}
        return await self.get(new)

    # -- state -----------------------------------------------------------------------------

    async def state(self, thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
        if thread_id in self.fresh and await self._latest(thread_id) is None:
            return snapshot_json(_Empty(), thread_id)
        compiled = await self._graph(thread_id)
        snapshot = await compiled.aget_state(_config(thread_id, checkpoint_id))
        if checkpoint_id and snapshot.config is None:
            raise ApiError(
                404, "checkpoint_not_found", f"no checkpoint {checkpoint_id} in thread {thread_id}"
            )
        return snapshot_json(snapshot, thread_id)

    async def history(self, thread_id: str, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        if thread_id in self.fresh and await self._latest(thread_id) is None:
            return []
        compiled = await self._graph(thread_id)
        before = body.get("before")
        if isinstance(before, str):
            before = {"checkpoint_id": before}
        checkpoint = body.get("checkpoint") or {}
        out = []
        async for snapshot in compiled.aget_state_history(
            _config(thread_id, checkpoint.get("checkpoint_id")),
            filter=dict(body.get("metadata") or {}) or None,
            before=_config(thread_id, before["checkpoint_id"]) if before else None,
            limit=int(body.get("limit") or 10),
        ):
            out.append(snapshot_json(snapshot, thread_id))
        return out

    async def update_state(self, thread_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Edit the state at a checkpoint (the latest by default): a new branch of the thread
        that the next run continues from."""
        self._idle(thread_id, "edit the state of")
        values = body.get("values")
        if values is not None and not isinstance(values, Mapping):
            raise ApiError(422, "invalid_values", "values must be an object of state fields")
        values = dict(values or {})
        if "messages" in values:
            values["messages"] = to_messages(values["messages"], "values.messages")
        checkpoint_id = body.get("checkpoint_id") or (body.get("checkpoint") or {}).get(
            "checkpoint_id"
        )
        compiled = await self._graph(thread_id)
        assistant = await self.assistant_of(thread_id)
        assert assistant is not None
        try:
            if body.get("as_node"):
                base = await compiled.aget_state(_config(thread_id, checkpoint_id))
                config = await compiled.aupdate_state(base.config, values, as_node=body["as_node"])
            else:
                agent = getattr(assistant.source, "agent", None)
                await Runners.fork(
                    thread_id,
                    checkpoint_id,
                    values=values,
                    agent=agent,
                    swarm=None if agent is not None else assistant.source,
                    checkpointer=self.saver,
                )
                config = (await compiled.aget_state(_config(thread_id))).config
        except AWorldGraphError as exc:
            raise ApiError(409, "cannot_update", str(exc)) from None
        except (ValueError, KeyError) as exc:  # LangGraph: unknown node or channel
            raise ApiError(422, "invalid_update", f"{type(exc).__name__}: {exc}") from None
        return {"checkpoint": checkpoint_ref(config)}


_THREAD_STATUS = {"error": "error", "interrupted": "interrupted", "running": "interrupted"}
"""A run's status (:func:`~aworld_graph.trajectory.run_status`) as a thread's in LangGraph's
API; ``finished`` and the rest are ``idle``."""


def _failed(error: Any) -> bool:
    """A task error that is a failure (a cancelled run stopped; it did not fail)."""
    if error is None or isinstance(error, asyncio.CancelledError):
        return False
    return not str(error).startswith("CancelledError")


class _Empty:
    """The state of a thread with no checkpoint."""

    values: dict[str, Any] = {}
    next: tuple[str, ...] = ()
    config = None
    metadata: dict[str, Any] = {}
    created_at = None
    parent_config = None
    tasks: tuple[Any, ...] = ()
    interrupts: tuple[Any, ...] = ()
