"""A LangGraph application on the run seam: its graph on a store (:class:`AppGraph`), the loop
that drives it (:func:`drive_app`) and its response (:func:`respond_app`).

An application keeps its own state schema, input and stream: the loop passes the client's
input to the graph as it is (a bare string becomes a user message: ``{"messages": [...]}``),
answers an interrupt with ``Command(resume=...)``, continues a stopped thread with ``None``,
and hands the sink LangGraph's own stream parts (updates, checkpoints, chat-model messages,
custom writes). It runs on the store's checkpointer, as LangGraph's server runs a graph on its
own: a checkpointer the graph was compiled with is replaced, and so is its ``BaseStore`` where
one goes with that checkpointer (:meth:`AppGraph.use_store`; the server's item store).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import DEFAULT_RECURSION_LIMIT
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore
from langgraph.types import CheckpointPayload, Command, Durability, StreamMode

from ..swarm.graph import BuiltGraph, LangGraphApp
from ..task import Task, TaskResponse
from ._langchain_events import root_run_id
from ._response import _asked, pending_nodes, run_loop, step_modes
from .events import EventSink

__all__ = ["NESTED_MODES", "AppGraph", "app_config", "drive_app", "nested_mode", "respond_app"]

_OWN_METADATA = ("source", "step", "parents", "writes")


class AppGraph(BuiltGraph):
    """A :class:`LangGraphApp`'s graph: compiled as its author made it, bound per store.

    A factory is called once here with an empty config (the graph that threads are read and
    drawn with), and again for each run with the run's config (:meth:`compile` with
    ``config``)."""

    def __init__(self, app: LangGraphApp) -> None:
        self.app = app
        self.default = app.make(None)
        """The graph as made without a run (a factory's, called with an empty config)."""
        super().__init__(
            graph=None,
            entry="",
            info={"name": app.name, "kind": "langgraph"},
        )
        self._stores: weakref.WeakKeyDictionary[BaseCheckpointSaver[Any], BaseStore] = (
            weakref.WeakKeyDictionary()
        )

    def use_store(self, checkpointer: BaseCheckpointSaver[Any], store: BaseStore | None) -> None:
        """Give the graph's runs on ``checkpointer`` ``store`` as their ``BaseStore`` (a
        node's ``store`` argument, ``runtime.store``, ``get_store()``), in place of any it was
        compiled with, as LangGraph's server gives a graph its store; ``None`` takes it back
        (the graph's own store again). Kept per checkpointer: one source can be served by two
        servers, each with its own store."""
        if store is None:
            self._stores.pop(checkpointer, None)
        else:
            self._stores[checkpointer] = store
        self._compiled.pop(id(checkpointer), None)  # bound again, with this store

    def _store(self, checkpointer: BaseCheckpointSaver[Any] | None) -> BaseStore | None:
        """The store given for runs on ``checkpointer`` (:meth:`use_store`), if any."""
        # looked up only where a store was given: an unhashable checkpointer binds as before
        if self._stores and checkpointer is not None and checkpointer in self._stores:
            return self._stores[checkpointer]
        return None

    def _bind(
        self, graph: Pregel[Any, Any, Any, Any], checkpointer: BaseCheckpointSaver[Any] | None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        update: dict[str, Any] = {"checkpointer": checkpointer}
        store = self._store(checkpointer)
        if store is not None:
            update["store"] = store
        if graph.name == "LangGraph":
            update["name"] = self.app.name
        # a Pregel of the functional API is not a CompiledStateGraph; both run alike here
        return cast(CompiledStateGraph[Any, Any, Any, Any], graph.copy(update=update))

    def compile(
        self, checkpointer: BaseCheckpointSaver[Any] | None, config: RunnableConfig | None = None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The graph on ``checkpointer``, to read (a thread, its schemas, its drawing); a
        factory's made for ``config`` when given (not cached), else the one made without a
        run (cached per checkpointer). A run uses :meth:`open`."""
        if config is not None and self.app.factory:
            made = self.app.make(config, store=self._store(checkpointer))
            return self._bind(made, checkpointer)
        key = id(checkpointer)
        if key not in self._compiled:
            self._compiled[key] = self._bind(self.default, checkpointer)
        return self._compiled[key]

    @asynccontextmanager
    async def read(
        self, config: RunnableConfig | None = None
    ) -> AsyncIterator[CompiledStateGraph[Any, Any, Any, Any]]:
        """The graph to read (draw it, its schemas and subgraphs) for ``config``, on no store:
        a factory's made for it as LangGraph's server makes one to read (``ServerRuntime``
        access ``assistants.read``; awaited when ``async``, a context manager it returns
        held open for the block, on the caller's event loop), else the one made without a
        run."""
        if config is None or not self.app.factory:
            yield self.compile(None)
            return
        async with self.app.open(config, access="assistants.read") as made:
            yield self._bind(made, None)

    @asynccontextmanager
    async def open(
        self, checkpointer: BaseCheckpointSaver[Any], config: RunnableConfig, context: Any = None
    ) -> AsyncIterator[CompiledStateGraph[Any, Any, Any, Any]]:
        """The graph a run with ``config`` runs, on ``checkpointer``: a factory's made for it
        (awaited when ``async``; a context manager it returns held open for the block), as
        LangGraph's server makes a graph for each run; ``context``: the run's, for the
        factory's ``ServerRuntime``."""
        if not self.app.factory:
            yield self.compile(checkpointer)
            return
        store = self._store(checkpointer)
        async with self.app.open(config, store=store, context=context) as made:
            yield self._bind(made, checkpointer)


def app_config(
    task: Task, graph: AppGraph, overlay: RunnableConfig | None = None
) -> RunnableConfig:
    """The LangGraph config of a run of an application: ``overlay`` (the caller's config:
    its ``configurable``, ``tags``, ``recursion_limit``…) with the task's thread and metadata
    on top. The recursion limit is the overlay's, else ``task.conf.max_steps``, else
    LangGraph's default."""
    given: dict[str, Any] = dict(overlay or {})
    meta: dict[str, Any] = {
        k: v for k, v in graph.info.items() if isinstance(v, (str, int, float, bool))
    }
    meta.update({"task_id": task.id, "task_name": task.name})
    if task.session_id:
        meta["session_id"] = task.session_id
    meta.update({k: v for k, v in task.metadata.items() if isinstance(v, (str, int, float, bool))})
    configurable = {**dict(given.get("configurable") or {}), "thread_id": task.id}
    for key in ("checkpoint_id", "checkpoint_ns", "checkpoint_map"):
        configurable.pop(key, None)  # a run goes on from the thread's latest checkpoint
    limit = given.get("recursion_limit") or task.conf.max_steps or DEFAULT_RECURSION_LIMIT
    config = {
        **given,
        "configurable": configurable,
        "metadata": {**dict(given.get("metadata") or {}), **meta},
        "recursion_limit": int(limit),
    }
    return cast(RunnableConfig, config)


def _in_schema(graph: Pregel[Any, Any, Any, Any], context: dict[str, Any]) -> dict[str, Any]:
    """``context`` kept to the fields of the graph's context schema, as LangGraph's server
    keeps it (the caller's ``configurable`` is also its context, so it may hold more)."""
    try:
        fields = (graph.get_context_jsonschema() or {}).get("properties") or {}
    except Exception:  # a schema pydantic cannot describe: nothing to keep it to
        return context
    return {k: v for k, v in context.items() if k in fields} if fields else context


def _payload(task: Task, input: Any, resume: Any, fresh: bool, new_turn: bool) -> Any:
    if isinstance(input, Command):  # the client's command (update, goto, resume) as it is
        return input
    if resume is not None:
        return Command(resume=resume)
    if isinstance(input, str):
        input = {"messages": [{"role": "user", "content": input}]}
    if input is not None:
        return input
    if (fresh or new_turn) and task.input:
        return {"messages": [{"role": "user", "content": task.input}]}
    return None  # go on from the thread's last checkpoint


async def drive_app(
    task: Task,
    graph: AppGraph,
    checkpointer: BaseCheckpointSaver[Any],
    *,
    one_step: bool = False,
    resume: Any = None,
    events: EventSink | None = None,
    states: bool = False,
    new_turn: bool = False,
    input: Any = None,
    config: RunnableConfig | None = None,
    context: Any = None,
    stops: tuple[Any, Any] = (None, None),
    steps: Sequence[str] = (),
    subgraphs: bool = False,
    durability: Durability = "sync",
) -> tuple[TaskResponse, dict[str, Any]]:
    """Run ``task``'s application on its thread (one superstep if ``one_step``); the
    response and the last updates. ``input`` is the graph's input as the client gave it
    (else ``task.input`` as a user message on a fresh thread or a new turn; else the thread
    goes on); ``config`` and ``context`` are the caller's (a factory is called with the
    run's config). ``events`` receives :class:`~.events.Message` and :class:`~.events.Custom`
    events, and with ``states`` each superstep's updates and each saved checkpoint, and the
    parts of the stream modes named in ``steps`` (:class:`~.events.Step`). ``subgraphs``
    (with ``states``): the parts its subgraphs stream in the modes of ``steps`` too, each a
    step of mode ``MODE|NAMESPACE`` (:func:`nested_mode`), as LangGraph's server streams a
    run with ``stream_subgraphs``. ``durability``: when its steps are saved, as LangGraph's
    ``astream`` takes it (``"sync"``: each step's checkpoint is saved before the next step
    starts)."""
    run_conf = app_config(task, graph, config)
    async with graph.open(checkpointer, run_conf, context) as compiled:
        return await _drive_app(
            task,
            compiled,
            run_conf,
            one_step,
            resume,
            events,
            states,
            new_turn,
            input,
            context,
            stops,
            steps,
            subgraphs,
            durability,
        )


async def _drive_app(
    task: Task,
    compiled: CompiledStateGraph[Any, Any, Any, Any],
    run_conf: RunnableConfig,
    one_step: bool,
    resume: Any,
    events: EventSink | None,
    states: bool,
    new_turn: bool,
    input: Any,
    context: Any,
    stops: tuple[Any, Any],
    steps: Sequence[str],
    subgraphs: bool,
    durability: Durability,
) -> tuple[TaskResponse, dict[str, Any]]:
    started = time.perf_counter()
    snapshot = None if task.new_thread else await compiled.aget_state(run_conf)
    task.new_thread = False
    if snapshot is not None and snapshot.metadata:  # a continued run keeps what it recorded
        kept = {k: v for k, v in snapshot.metadata.items() if k not in _OWN_METADATA}
        run_conf["metadata"] = {**kept, **(run_conf.get("metadata") or {})}
    fresh = snapshot is None or (not snapshot.values and not pending_nodes(snapshot))
    payload = _payload(task, input, resume, fresh, new_turn)
    if isinstance(context, dict):
        context = _in_schema(compiled, context)
    modes: list[StreamMode] = ["updates", "checkpoints"]
    passed = step_modes(steps, events, states)
    if events is not None:
        modes += ["custom", "messages", *(m for m in passed if m != "events")]
    subgraphs = subgraphs and states and events is not None
    nested = [m for m in NESTED_MODES if m in steps] if subgraphs else []
    if "values" in nested:  # a subgraph's values (the run's own are its checkpoints)
        modes.append("values")
    updates: dict[str, Any] = {}
    error: str | None = None
    last: CheckpointPayload[dict[str, Any]] | None = None

    def take(mode: str, chunk: Any) -> None:
        nonlocal last
        if mode == "updates":
            if isinstance(chunk, dict):
                updates.update(chunk)
                if states and events is not None and chunk:
                    events({"event": "update", "updates": chunk})
        elif mode == "checkpoints":
            last = cast(CheckpointPayload[dict[str, Any]], chunk)
            if states and events is not None:
                events({"event": "state", "checkpoint": last})
        elif events is None:
            return
        elif mode in passed:
            events({"event": "step", "mode": cast(Any, mode), "data": chunk})
        elif mode == "messages":
            message, metadata = chunk
            events({"event": "message", "message": message, "metadata": dict(metadata)})
        elif mode == "custom":
            events({"event": "custom", "data": chunk})

    def route(part: Any) -> None:
        """A part of the graph's stream: the run's own, or a subgraph's (with ``subgraphs``:
        passed on in the modes of ``nested``; its chat-model messages otherwise as the run's
        own, for the ``messages`` mode's parts)."""
        if not subgraphs:
            take(*part)
            return
        namespace, mode, chunk = part
        if not namespace:  # the run's own graph
            if mode != "values":
                take(mode, chunk)
        elif mode == "messages" and "messages-tuple" not in nested:
            take(mode, chunk)  # as LangGraph's server: a subgraph's messages/partial, unnamed
        elif events is not None:
            named = "messages-tuple" if mode == "messages" else mode
            if named in nested:
                data = list(chunk) if mode == "messages" else chunk
                mode = cast(Any, nested_mode(named, namespace))  # a Step of a subgraph
                events({"event": "step", "mode": mode, "data": data})

    options: dict[str, Any] = {
        "stream_mode": modes,
        "subgraphs": subgraphs,
        "context": context,
        "interrupt_before": stops[0],  # (interrupt_before, interrupt_after) of the run
        "interrupt_after": "*" if one_step else stops[1],
        "durability": durability,  # sync: a step's checkpoint is on disk before the next starts
    }

    async def loop() -> None:
        if "events" not in passed:
            async for part in compiled.astream(payload, run_conf, **options):
                route(part)
            return
        # LangChain's event stream of the run: the graph's own stream parts are the root
        # run's on_chain_stream events; every other event is passed on as it is. The root's
        # run id is the server's run id, as LangGraph's server streams it
        root = root_run_id(run_conf.get("metadata") or {})
        conf = cast(RunnableConfig, {**run_conf, "run_id": root})
        async for event in compiled.astream_events(payload, conf, version="v2", **options):
            if event["event"] == "on_chain_stream" and event["run_id"] == str(root):
                route(event["data"]["chunk"])
            elif events is not None:
                events({"event": "step", "mode": "events", "data": event})

    over = (
        "GraphRecursionError: the run reached its recursion limit "
        f"(recursion_limit={run_conf.get('recursion_limit')}) without ending; raise it in "
        "the run's config"
    )
    error = await run_loop(loop, task.conf.timeout, over)
    finished = last if (error is None and last is not None and not last["next"]) else None
    response = await respond_app(
        task, compiled, run_conf, started=started, error=error, finished=finished
    )
    return response, updates


NESTED_MODES = (
    *("values", "updates", "custom", "checkpoints", "tasks", "debug", "messages-tuple", "tools"),
)
"""The stream modes whose parts a run with ``subgraphs`` sends from its subgraphs too."""


def nested_mode(mode: str, namespace: Sequence[str]) -> str:
    """The mode of a subgraph's part: ``MODE|NAMESPACE``, the namespace's parts (``node:task
    id``, outermost first) joined by ``|``, as LangGraph's server names its event."""
    return "|".join((mode, *namespace))


def _answer(values: dict[str, Any]) -> str | None:
    """The text of the last message, when the state has messages and the last is the AI's."""
    messages = values.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    last = messages[-1]
    if isinstance(last, dict):
        kind, content = last.get("type") or last.get("role"), last.get("content")
    else:
        kind, content = getattr(last, "type", None), getattr(last, "content", None)
    if kind not in ("ai", "assistant", "AIMessageChunk"):
        return None
    if isinstance(content, list):  # content blocks
        content = "".join(
            str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content
        )
    return content if isinstance(content, str) else None


async def respond_app(
    task: Task,
    graph: CompiledStateGraph[Any, Any, Any, Any],
    config: RunnableConfig,
    *,
    started: float,
    error: str | None = None,
    finished: CheckpointPayload[dict[str, Any]] | None = None,
) -> TaskResponse:
    """An application's thread read back as a :class:`TaskResponse`: its status (``error``,
    ``interrupted``, ``running`` while nodes are due, else ``finished``), its interrupts,
    its values as the state, and as the answer the last AI message's text when it has
    messages. It has no AWorld trajectory."""
    if finished is not None:
        values: dict[str, Any] = dict(finished["values"] or {})
        head = (finished["config"] or {}).get("configurable", {}).get("checkpoint_id")
        tasks: list[Any] = []
        pending: list[Any] = []
        due = False
    else:
        snapshot = await graph.aget_state(config)
        values = dict(snapshot.values or {})
        head = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
        tasks, pending = list(snapshot.tasks), list(snapshot.interrupts)
        due = bool(pending_nodes(snapshot))
    failed = [t for t in tasks if t.error is not None]
    interrupts = [{"id": i.id, "value": i.value} for i in pending]
    if error or failed:
        status = "error"
        msg: str | None = error or (
            failed[0].error if isinstance(failed[0].error, str) else repr(failed[0].error)
        )
    elif interrupts:
        status, msg = "interrupted", _asked(interrupts[0]["value"], task.id)
    else:
        status, msg = ("running" if due else "finished"), None
    return TaskResponse(
        id=task.id,
        answer=_answer(values),
        success=status == "finished",
        msg=msg,
        time_cost=time.perf_counter() - started,
        status=status,
        thread_id=task.id,
        checkpoint_id=head,
        interrupts=interrupts,
        state=values,
    )
