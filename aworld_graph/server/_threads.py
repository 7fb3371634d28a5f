"""Threads: the store's checkpoint threads as the API's ``Thread`` objects, their state and
history read through LangGraph, state edits through :meth:`Runners.fork`, copies and deletes
through the saver. A run made by the CLI or the library is a thread here like any other.

A thread created over the API is stored before the server answers: a *thread record*, an
empty checkpoint with the thread's metadata (``source`` ``"create"``, step -2, so its first
run's steps count as on a new thread). Its runs carry the metadata on; a record is never shown
as state or history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.errors import InvalidUpdateError
from langgraph.types import StateSnapshot, StateUpdate

from ..errors import AWorldGraphError
from ..run import built
from ..runner import Runners
from ..trajectory import run_status
from ._assistants import Assistant, Assistants, contains
from ._chat import chat_values
from ._input import before_id
from ._runs import RunManager, stamp
from ._thread_table import ThreadTable
from ._wire import ApiError, checkpoint_ref, clean, snapshot_json, to_messages

__all__ = ["StateWatch", "Threads"]

_STORED_ONLY = ("source", "step", "parents", "writes", "run_id", "forked_from")

CREATED = "create"
"""The ``source`` of a thread record."""


def is_record(checkpoint: Any) -> bool:
    """Whether a ``CheckpointTuple`` is a thread record (a thread with no run yet)."""
    return checkpoint is not None and (checkpoint.metadata or {}).get("source") == CREATED


def _config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


class StateWatch:
    """The state updates of one thread that a thread stream (``GET /threads/{id}/stream``
    with ``state_update``) has still to send, as LangGraph's server streams them: each edit of
    the state (``POST /threads/{id}/state``) as ``{"state": ThreadState, "thread_id"}``."""

    def __init__(self) -> None:
        self.updates: list[tuple[frozenset[str], dict[str, Any]]] = []
        """Each update not yet sent, with the ids of the thread's runs the server held when
        it was made (the runs that came before it)."""
        self.changed = asyncio.Event()
        """Set when an update comes; cleared when they are taken."""

    def put(self, runs: frozenset[str], update: dict[str, Any]) -> None:
        self.updates.append((runs, update))
        self.changed.set()

    def take(self, before: str | None = None) -> list[dict[str, Any]]:
        """The updates to send now, in order: all of them, or (``before``: a run's id) those
        made before that run was started."""
        out = [u for runs, u in self.updates if before is None or before not in runs]
        self.updates = [(r, u) for r, u in self.updates if before is not None and before in r]
        if not self.updates:
            self.changed.clear()
        return out

    async def wait(self, other: asyncio.Event) -> None:
        """Return when an update comes or ``other`` is set."""
        waits = [asyncio.ensure_future(e.wait()) for e in (self.changed, other)]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()


class Threads:
    """Thread operations over one ``TrajectorySaver``."""

    def __init__(self, saver: Any, assistants: Assistants, runs: RunManager) -> None:
        self.saver = saver
        self.assistants = assistants
        self.runs = runs
        self.metadata = ThreadTable(saver)
        """The metadata set on threads that have runs (laid over their checkpoints')."""
        self.watches: dict[str, list[StateWatch]] = {}
        """The open thread streams that send state updates, per thread."""

    def watch(self, thread_id: str) -> StateWatch:
        """The state updates of ``thread_id`` from now on, until :meth:`unwatch`."""
        watch = StateWatch()
        self.watches.setdefault(thread_id, []).append(watch)
        return watch

    def unwatch(self, thread_id: str, watch: StateWatch) -> None:
        """Stop handing ``watch`` the updates of ``thread_id``."""
        left = [w for w in self.watches.get(thread_id, ()) if w is not watch]
        if left:
            self.watches[thread_id] = left
        else:
            self.watches.pop(thread_id, None)

    async def _publish(self, thread_id: str, compiled: Any) -> None:
        """Hand the thread's state, as it stands after an edit, to its watches."""
        if not self.watches.get(thread_id):
            return
        snapshot = await compiled.aget_state(_config(thread_id))
        update = {"state": self._state_json(snapshot, thread_id), "thread_id": thread_id}
        runs = frozenset(r.run_id for r in self.runs.of(thread_id))
        for watch in self.watches.get(thread_id, ()):
            watch.put(runs, update)

    # -- lookup ----------------------------------------------------------------------------

    async def _latest(self, thread_id: str) -> Any:
        return await self.saver.aget_tuple(_config(thread_id))

    async def exists(self, thread_id: str) -> bool:
        if self.runs.busy(thread_id):
            return True
        return await self._latest(thread_id) is not None

    async def assistant_of(self, thread_id: str) -> Assistant | None:
        """The assistant whose runs the thread holds, or ``None`` (no run yet, or a run of a
        workflow this server does not serve)."""
        latest = await self._latest(thread_id)
        if latest is None:
            return None
        found = self.assistants.of_metadata(latest.metadata or {})
        graph = (latest.metadata or {}).get("graph_id")
        if found is None and is_record(latest) and isinstance(graph, str):
            return self.assistants.get(graph)
        return found

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
        """A new thread, stored (a thread record) before this returns; its id."""
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
        supersteps = _supersteps(body.get("supersteps"), metadata)
        if not supersteps:
            await self._record(thread_id, metadata)
            return thread_id
        assistant = self.assistants.get(str(metadata["graph_id"]))  # a 404 before a write
        try:
            await self._write_supersteps(thread_id, metadata, assistant, supersteps)
        except ApiError:
            if await self.exists(thread_id):  # nothing stays of a refused request
                await self.delete(thread_id)
            raise
        return thread_id

    async def _write_supersteps(
        self,
        thread_id: str,
        metadata: dict[str, Any],
        assistant: Assistant,
        supersteps: list[list[tuple[dict[str, Any], str]]],
    ) -> None:
        """A new thread's checkpoints written from ``supersteps``, as LangGraph's server
        writes ``POST /threads`` ``supersteps``: each ``[(values, as_node), ...]`` one step
        of its graph (from step 0, with no thread record before it), through LangGraph's
        ``abulk_update_state``; each carries the thread's ``metadata`` and its assistant."""
        compiled = built(assistant.source).compile(self.saver)
        kept = {k: v for k, v in metadata.items() if k not in _STORED_ONLY}
        edit: RunnableConfig = {**_config(thread_id), "metadata": kept | stamp(assistant)}
        try:
            for n, updates in enumerate(supersteps):
                step = []
                for m, (values, as_node) in enumerate(updates):
                    if "messages" in values and not assistant.is_app:  # a workflow's own
                        field = f"supersteps[{n}].updates[{m}].values.messages"
                        values = {**values, "messages": to_messages(values["messages"], field)}
                    step.append(StateUpdate(values, as_node))
                if n:  # one step at a time: each keeps the thread's metadata
                    edit = await self._edit_config(compiled, thread_id, None, assistant)
                await compiled.abulk_update_state(edit, [step])
        except (ValueError, KeyError, InvalidUpdateError) as exc:  # an unknown node, channel
            raise ApiError(
                422, "invalid_update", f"supersteps: {type(exc).__name__}: {exc}"
            ) from None

    async def _edit_config(
        self, compiled: Any, thread_id: str, checkpoint_id: str | None, assistant: Assistant
    ) -> RunnableConfig:
        """The config an edit of the thread's state (at ``checkpoint_id``) is written with:
        it keeps the thread's metadata and its assistant, as a run's steps do."""
        base = await compiled.aget_state(_config(thread_id, checkpoint_id))
        kept = {k: v for k, v in (base.metadata or {}).items() if k not in _STORED_ONLY}
        return cast(RunnableConfig, {**base.config, "metadata": kept | stamp(assistant)})

    async def _record(
        self, thread_id: str, metadata: dict[str, Any], after: str | None = None
    ) -> None:
        """Store a thread record holding ``metadata`` (after record ``after``, a new one's)."""
        kept = {k: v for k, v in metadata.items() if k not in _STORED_ONLY}
        record = {**kept, "source": CREATED, "step": -2, "parents": {}}
        await self.saver.aput(_config(thread_id, after), empty_checkpoint(), record, {})

    async def get(self, thread_id: str, summary: Any = None) -> dict[str, Any]:
        latest = await self._latest(thread_id)
        running = self.runs.busy(thread_id)
        if latest is None and not running:
            raise self.not_found(thread_id)
        patched = await asyncio.to_thread(self.metadata.get, thread_id)
        if latest is None or is_record(latest):  # no run stored yet
            at = latest.checkpoint["ts"] if latest is not None else running[0].created_at
            metadata = {} if latest is None else latest.metadata or {}
            kept = {k: v for k, v in metadata.items() if k not in _STORED_ONLY}
            return {
                "thread_id": thread_id,
                "created_at": await self._created_at(thread_id, summary) or at,
                "updated_at": at,
                "metadata": clean(kept | patched),
                "status": "busy" if running else "idle",
                "values": None,  # as LangGraph's API: a thread with no state has no values
                "interrupts": {},
            }
        metadata = {k: v for k, v in (latest.metadata or {}).items() if k not in _STORED_ONLY}
        assistant = self.assistants.of_metadata(latest.metadata or {})
        if assistant is not None:
            metadata |= {"graph_id": assistant.graph_id, "assistant_id": assistant.assistant_id}
        metadata |= patched
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
            own = None if assistant is None or assistant.is_app else state.values or {}
            run = run_status(
                (own or {}).get("status"),  # an app's "status" is its own, not the run's
                failed=any(_failed(t.error) for t in state.tasks),
                interrupted=bool(interrupts),
                pending=bool(state.next or state.tasks),
            )
        if self.runs.busy(thread_id):
            status = "busy"
        else:  # "interrupted" also for a run stopped (killed, cancelled) mid-run
            status = _THREAD_STATUS.get(run, "idle")
        at = latest.checkpoint.get("ts")
        first = await self._created_at(thread_id, summary) or at
        return {
            "thread_id": thread_id,
            "created_at": first,
            "updated_at": summary.last_at if summary else at,
            "metadata": clean(metadata),
            "status": status,
            "values": chat_values(clean(values or {}), assistant is not None and assistant.is_app),
            "interrupts": interrupts,
        }

    async def _created_at(self, thread_id: str, summary: Any) -> str | None:
        """When the thread was created: its oldest checkpoint's time (the thread record's, for
        one created over the API), not its latest run's."""
        if summary is not None:
            return cast(str, summary.first_at)
        return await asyncio.to_thread(self.metadata.created_at, thread_id)

    async def _summaries(self) -> list[Any]:
        return list(await asyncio.to_thread(self.saver.threads))

    async def search(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``POST /threads/search``: by ``ids``, ``metadata`` (exact), ``values`` (contained,
        as PostgreSQL's ``@>``), ``status``; ordered by ``sort_by`` (``updated_at``, newest
        first, by default) in ``sort_order``."""
        wanted_ids = set(body.get("ids") or [])
        wanted_meta = dict(body.get("metadata") or {})
        wanted_values = body.get("values") or {}
        wanted_status = body.get("status")
        offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
        key = str(body.get("sort_by") or "updated_at")
        by_time = key in ("updated_at", "state_updated_at")  # the store's own order
        descending = body.get("sort_order", "desc") != "asc"
        summaries = {s.thread_id: s for s in await self._summaries()}
        stamped = [(s.last_at, t) for t, s in summaries.items()]
        order = [t for _, t in sorted(stamped, reverse=descending)]
        out: list[dict[str, Any]] = []
        for thread_id in order:
            if wanted_ids and thread_id not in wanted_ids:
                continue
            thread = await self.get(thread_id, summaries.get(thread_id))
            if any(thread["metadata"].get(k) != v for k, v in wanted_meta.items()):
                continue
            if wanted_values and not contains(thread["values"] or {}, wanted_values):
                continue
            if wanted_status and thread["status"] != wanted_status:
                continue
            out.append(thread)
            if by_time and len(out) >= offset + limit:
                break
        if not by_time:
            out.sort(key=lambda t: (t[key] is None, str(t[key] or "")), reverse=descending)
        return out[offset : offset + limit]

    async def prune(self, thread_ids: list[str]) -> int:
        """Delete each of ``thread_ids`` that is there (``POST /threads/prune``, strategy
        ``delete``, as LangGraph's server: one not found is passed over); how many were."""
        pruned = 0
        for thread_id in dict.fromkeys(thread_ids):
            self._idle(thread_id, "prune")
        for thread_id in dict.fromkeys(thread_ids):
            if await self.exists(thread_id):
                await self.delete(thread_id)
                pruned += 1
        return pruned

    async def patch(self, thread_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``metadata`` into a thread's, as LangGraph's ``PATCH /threads/{id}`` does: on
        a thread with no run yet, a new thread record (its runs carry it on); on one that has
        runs, the ``thread_metadata`` table (its checkpoints stay as they were written)."""
        latest = await self._latest(thread_id)
        if latest is None:
            if not self.runs.busy(thread_id):
                raise self.not_found(thread_id)
        given = dict(body.get("metadata") or {})
        if latest is not None and is_record(latest):
            metadata = {**(latest.metadata or {}), **given}
            await self._record(
                thread_id, metadata, after=latest.config["configurable"]["checkpoint_id"]
            )
        else:
            merged = await asyncio.to_thread(self.metadata.get, thread_id) | given
            await self.metadata.put(thread_id, merged)
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
        await asyncio.to_thread(self.saver.delete_thread, thread_id)
        await self.runs.forget(thread_id=thread_id)
        await self.metadata.delete(thread_id)

    async def copy(self, thread_id: str) -> dict[str, Any]:
        """A new thread with the whole history of ``thread_id`` (a fork to go on from)."""
        import uuid

        if await self._latest(thread_id) is None:
            if self.runs.busy(thread_id):
                self._idle(thread_id, "copy")
            raise self.not_found(thread_id)
        new = str(uuid.uuid4())
        await asyncio.to_thread(self.saver.copy_thread, thread_id, new)
        patched = await asyncio.to_thread(self.metadata.get, thread_id)
        if patched:
            await self.metadata.put(new, patched)
        return await self.get(new)

    # -- state -----------------------------------------------------------------------------

    async def state(
        self, thread_id: str, checkpoint_id: str | None = None, *, subgraphs: bool = False
    ) -> dict[str, Any]:
        """The thread's ``ThreadState`` (at ``checkpoint_id``); with ``subgraphs``, each task
        of a subgraph holds the subgraph's own state, as LangGraph's ``get_state``."""
        found = await self.saver.aget_tuple(_config(thread_id, checkpoint_id))
        if found is None and checkpoint_id:
            if not await self.exists(thread_id):
                raise self.not_found(thread_id)
            raise ApiError(
                404,
                "checkpoint_not_found",
                f"no checkpoint {checkpoint_id} in thread {thread_id}; GET "
                f"/threads/{thread_id}/history lists them",
            )
        if is_record(found) or (found is None and self.runs.busy(thread_id)):
            return snapshot_json(_Empty(), thread_id)
        compiled = await self._graph(thread_id)
        snapshot = await compiled.aget_state(_config(thread_id, checkpoint_id), subgraphs=subgraphs)
        return self._state_json(snapshot, thread_id)

    async def history(self, thread_id: str, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        latest = await self._latest(thread_id)
        if is_record(latest) or (latest is None and self.runs.busy(thread_id)):
            return []
        compiled = await self._graph(thread_id)
        before = before_id(body.get("before"))
        checkpoint = body.get("checkpoint") or {}
        out = []
        async for snapshot in compiled.aget_state_history(
            _config(thread_id, checkpoint.get("checkpoint_id")),
            filter=dict(body.get("metadata") or {}) or None,
            before=_config(thread_id, before) if before else None,
            limit=int(body.get("limit") or 10),
        ):
            if (snapshot.metadata or {}).get("source") != CREATED:
                out.append(self._state_json(snapshot, thread_id))
        return out

    async def update_state(self, thread_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Edit the state at a checkpoint (the latest by default): a new branch of the thread
        that the next run continues from."""
        self._idle(thread_id, "edit the state of")
        values = body.get("values")
        if values is not None and not isinstance(values, Mapping):
            raise ApiError(422, "invalid_values", "values must be an object of state fields")
        values = dict(values or {})
        checkpoint_id = body.get("checkpoint_id") or (body.get("checkpoint") or {}).get(
            "checkpoint_id"
        )
        compiled = await self._graph(thread_id)
        assistant = await self.assistant_of(thread_id)
        assert assistant is not None
        if "messages" in values and not assistant.is_app:  # an app takes its own messages
            values["messages"] = to_messages(values["messages"], "values.messages")
        try:
            if body.get("as_node") or assistant.is_app:  # an app's edit is LangGraph's own
                edit = await self._edit_config(compiled, thread_id, checkpoint_id, assistant)
                config = await compiled.aupdate_state(edit, values, as_node=body.get("as_node"))
            else:
                await Runners.fork(
                    thread_id,
                    checkpoint_id,
                    values=values,
                    swarm=assistant.source,
                    checkpointer=self.saver,
                )
                config = (await compiled.aget_state(_config(thread_id))).config
        except AWorldGraphError as exc:
            raise ApiError(409, "cannot_update", str(exc)) from None
        except (ValueError, KeyError, InvalidUpdateError) as exc:  # an unknown node, channel
            raise ApiError(422, "invalid_update", f"{type(exc).__name__}: {exc}") from None
        await self._publish(thread_id, compiled)
        return {"checkpoint": checkpoint_ref(config)}

    def _state_json(self, snapshot: Any, thread_id: str, app: bool | None = None) -> dict[str, Any]:
        """A snapshot as the API's ``ThreadState``, its messages as chat UIs read them. The
        first run's input checkpoint (step -1) shows no parent: at most a thread record comes
        before it, and that is not state."""
        data = snapshot_json(snapshot, thread_id)
        if app is None:
            assistant = self.assistants.of_metadata(snapshot.metadata or {})
            app = assistant is not None and assistant.is_app
        for task, shown in zip(snapshot.tasks or (), data["tasks"], strict=True):
            if isinstance(getattr(task, "state", None), StateSnapshot):  # a subgraph's state
                shown["state"] = self._state_json(task.state, thread_id, app)
        data["values"] = chat_values(data["values"], app)
        if (snapshot.metadata or {}).get("step") == -1:
            data["parent_checkpoint"] = None
        return data


def _supersteps(given: Any, metadata: Mapping[str, Any]) -> list[list[tuple[dict[str, Any], str]]]:
    """``supersteps`` of ``POST /threads`` as ``[[(values, as_node), ...], ...]``, checked
    before the thread is stored: a 422 naming the field that is wrong."""
    if not given:
        return []
    rule = (
        'supersteps must be a list of {"updates": [{"values": {...}, "as_node": NODE}, ...]}, '
        "with the thread's graph_id in its metadata"
    )
    if not isinstance(metadata.get("graph_id"), str) or not isinstance(given, list):
        raise ApiError(422, "invalid_field", f"{rule}; got no graph_id or no list")
    out = []
    for n, step in enumerate(given):
        updates = step.get("updates") if isinstance(step, Mapping) else None
        if not isinstance(updates, list) or not updates:
            raise ApiError(422, "invalid_field", f"supersteps[{n}].updates: {rule}")
        for m, update in enumerate(updates):
            where = f"supersteps[{n}].updates[{m}]"
            if not isinstance(update, Mapping) or not isinstance(update.get("as_node"), str):
                raise ApiError(422, "invalid_field", f"{where}.as_node: {rule}")
            if update.get("command") is not None:
                raise ApiError(
                    422,
                    "unsupported_option",
                    f"{where}.command is not served here: send the update as values",
                )
            if not isinstance(update.get("values"), Mapping):
                raise ApiError(422, "invalid_field", f"{where}.values: {rule}")
        out.append([(dict(u["values"]), str(u["as_node"])) for u in updates])
    return out


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
