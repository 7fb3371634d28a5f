"""The one loop that drives a compiled graph; :class:`~aworld_graph.run.GraphRun` calls it.

:func:`drive` runs a task's graph on its checkpoint thread until it ends, is interrupted,
fails, or – in step mode – finishes one superstep, hands the run's events to a sink as it
goes, and then builds the :class:`~aworld_graph.task.TaskResponse`
(:func:`~._response.respond`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import CheckpointPayload, Command, Durability, StreamMode

from .. import tracing
from ..agent.runtime import TOOL_CALL_TASK
from ..config import DEFAULT_MAX_STEPS
from ..errors import ThreadBusy
from ..swarm.graph import BuiltGraph
from ..task import Task, TaskResponse
from ._app import AppGraph, drive_app
from ._langchain_events import WorkflowEvents, root_run_id
from ._response import no_new_turn, pending_nodes, respond, run_loop, step_modes
from .events import AgentEvent, EventSink

__all__ = ["drive", "run_config"]


def run_config(task: Task, graph: BuiltGraph) -> RunnableConfig:
    """The LangGraph config of a task's run: its thread, limits and metadata."""
    meta: dict[str, Any] = {
        k: v for k, v in graph.info.items() if isinstance(v, (str, int, float, bool))
    }
    max_steps = int(task.conf.max_steps or graph.info.get("max_steps") or DEFAULT_MAX_STEPS)
    meta.update({"task_id": task.id, "task_name": task.name, "session_id": task.session_id})
    meta.update({k: v for k, v in task.metadata.items() if isinstance(v, (str, int, float, bool))})
    return {
        "configurable": {
            "thread_id": task.id,
            "max_steps": max_steps,
            "stream_tokens": task.conf.stream,
        },
        "recursion_limit": max_steps * 3 + 10,
        "metadata": meta,
    }


async def _session_state(
    compiled: CompiledStateGraph[Any, Any, Any, Any],
    checkpointer: BaseCheckpointSaver[Any],
    task: Task,
) -> dict[str, Any]:
    """What the latest earlier task of the same session leaves for this one: the conversation,
    the active agent and the context (so a handoff swarm keeps talking to the same agent)."""
    latest: tuple[str, str] | None = None
    async for tup in checkpointer.alist(None, filter={"session_id": task.session_id}):
        thread = tup.config["configurable"]["thread_id"]
        if thread != task.id and tup.config["configurable"].get("checkpoint_ns", "") == "":
            if latest is None or tup.checkpoint["ts"] > latest[1]:
                latest = (thread, tup.checkpoint["ts"])
    if latest is None:
        return {}
    snapshot = await compiled.aget_state({"configurable": {"thread_id": latest[0]}})
    values = snapshot.values or {}
    return {
        "messages": [
            m
            for m in values.get("messages", [])
            if not m.get("_turn") or m.get("role") == "assistant" and not m.get("tool_calls")
        ],
        "active_agent": values.get("active_agent"),
        "context": values.get("context") or {},
    }


async def drive(
    task: Task,
    graph: BuiltGraph,
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
    interrupt_before: list[str] | str | None = None,
    interrupt_after: list[str] | str | None = None,
    steps: Sequence[str] = (),
    subgraphs: bool = False,
    durability: Durability = "sync",
) -> tuple[TaskResponse, dict[str, Any]]:
    """Run ``task`` (one superstep if ``one_step``); returns the response and the last updates.
    ``interrupt_before`` / ``interrupt_after`` stop it before or after those nodes (``"*"``:
    any), as LangGraph's ``astream`` does. ``durability`` is a LangGraph application's, as
    its ``astream`` takes it; a workflow saves each step before the next (``"sync"``), its
    trajectory row with it, and refuses another (a :class:`ValueError`).

    A LangGraph application (:class:`~aworld_graph.swarm.graph.LangGraphApp`) is driven by
    :func:`~._app.drive_app`: ``input`` is its input as the client gave it, ``config`` and
    ``context`` the caller's. A swarm or an agent starts from ``task.input``; ``config``'s
    ``configurable`` entries are added under the run's own and ``context`` is LangGraph's
    runtime context.

    A thread whose last run finished is read back, unless ``new_turn``: then ``task.input``
    starts a new turn of its conversation (the user message is appended to its messages, the
    rest of the state carries over; the answer, the status and the step count of the turn
    start afresh). A thread waiting for input or stopped mid-run takes no new turn: the
    response says how to go on and nothing is written.

    ``events`` receives the run's events (:data:`~.events.RunEvent`); with ``states`` also
    what the nodes of each superstep wrote (:class:`~.events.Update`) and each saved
    checkpoint (:class:`~.events.State`), and the parts of LangGraph's stream modes named in
    ``steps`` (``tasks``, ``debug``, ``events``) as they are (:class:`~.events.Step`; a
    workflow's ``events`` are made by :class:`~._langchain_events.WorkflowEvents`).

    A saver that can (``TrajectorySaver.ahold``) lets this run alone write its thread; when
    another process or worker runs it now, the response says so (``success=False``) and
    nothing is written."""

    async def run() -> tuple[TaskResponse, dict[str, Any]]:
        if isinstance(graph, AppGraph):
            return await drive_app(
                task,
                graph,
                checkpointer,
                one_step=one_step,
                resume=resume,
                events=events,
                states=states,
                new_turn=new_turn,
                input=input,
                config=config,
                context=context,
                stops=(interrupt_before, interrupt_after),
                steps=steps,
                subgraphs=subgraphs,
                durability=durability,
            )
        if durability != "sync":
            raise ValueError(
                f"durability={durability!r}: a workflow saves each step before the next (its "
                "trajectory row with it); leave durability out"
            )
        return await _drive(
            task,
            graph,
            checkpointer,
            one_step,
            resume,
            events,
            states,
            new_turn,
            config,
            context,
            (interrupt_before, interrupt_after),
            steps,
        )

    hold = getattr(checkpointer, "ahold", None)
    if hold is None:
        return await run()
    try:
        async with hold(task.id):
            return await run()
    except ThreadBusy as exc:
        if exc.thread_id != task.id:
            raise
        busy = TaskResponse(
            id=task.id, success=False, msg=str(exc), status="busy", thread_id=task.id
        )
        return busy, {}


@tracing.traced_run
async def _drive(
    task: Task,
    graph: BuiltGraph,
    checkpointer: BaseCheckpointSaver[Any],
    one_step: bool,
    resume: Any,
    events: EventSink | None,
    states: bool = False,
    new_turn: bool = False,
    overlay: RunnableConfig | None = None,
    context: Any = None,
    stops: tuple[Any, Any] = (None, None),
    steps: Sequence[str] = (),
) -> tuple[TaskResponse, dict[str, Any]]:
    started = time.perf_counter()
    compiled = graph.compile(checkpointer)
    config = run_config(task, graph)
    if overlay and overlay.get("configurable"):  # the caller's entries, under the run's own
        config["configurable"] = {**overlay["configurable"], **config["configurable"]}
    snapshot = None if task.new_thread else await compiled.aget_state(config)
    task.new_thread = False  # from now on the thread exists
    if (
        snapshot is not None and snapshot.metadata
    ):  # a continued run keeps what it recorded (target, workflow…)
        kept = {
            k: v
            for k, v in snapshot.metadata.items()
            if k not in ("source", "step", "parents", "writes")
        }
        config["metadata"] = {
            **kept,
            **{k: v for k, v in config["metadata"].items() if v is not None},
        }
    fresh = snapshot is None or (not snapshot.values and not pending_nodes(snapshot))
    payload: Any
    if resume is not None:
        payload = Command(resume=resume)
    elif fresh:
        previous = await _session_state(compiled, checkpointer, task) if task.session_id else {}
        payload = {
            "messages": [*previous.get("messages", []), {"role": "user", "content": task.input}],
            "input": task.input,
            "status": "running",
            "active_agent": previous.get("active_agent") or graph.entry,
            "context": previous.get("context", {}),
            "steps": 0,
        }
    elif new_turn and snapshot is not None:
        if pending_nodes(snapshot):
            return no_new_turn(task, snapshot), {}
        payload = {
            "messages": [{"role": "user", "content": task.input}],
            "input": task.input,
            "status": "running",
            "answer": None,
            "error": None,
            "steps": -int(snapshot.values.get("steps") or 0),  # a counter: back to 0
        }
    else:
        if snapshot is not None and not pending_nodes(snapshot):
            return await respond(task, compiled, config, started=started), {}
        payload = None
    modes: list[StreamMode] = ["updates", "checkpoints"]
    passed = step_modes(steps, events, states)
    if events is not None:
        modes += ["custom", "tasks", *(m for m in passed if m == "debug")]
    updates: dict[str, Any] = {}
    error: str | None = None
    chain: dict[int, str] = {}
    last: CheckpointPayload[dict[str, Any]] | None = None

    def take(mode: str, chunk: Any) -> None:
        nonlocal last
        if mode == "updates":  # a node's delta; a tool call's task result is not one
            if isinstance(chunk, dict):
                delta = {k: v for k, v in chunk.items() if k != TOOL_CALL_TASK}
                updates.update(delta)
                if states and events is not None and delta:
                    events({"event": "update", "updates": delta})
        elif mode == "checkpoints":
            last = cast(CheckpointPayload[dict[str, Any]], chunk)
            chain[int(last["metadata"].get("step", -1))] = chunk["config"]["configurable"][
                "checkpoint_id"
            ]
            tracing.checkpoint_saved(last)
            if states and events is not None:
                events({"event": "state", "checkpoint": last})
        elif events is not None:
            if mode in passed:
                events({"event": "step", "mode": cast(Any, mode), "data": chunk})
            if mode != "debug":
                _forward(mode, chunk, events)

    options: dict[str, Any] = {
        "stream_mode": modes,
        "context": context,
        "interrupt_before": stops[0],
        "interrupt_after": "*" if one_step else stops[1],
        "durability": "sync",  # a step's checkpoint is on disk before the next step starts
    }

    async def loop() -> None:
        # Given a list of stream modes, astream yields (mode, chunk) pairs; LangGraph's
        # annotation types each item as a chunk alone.
        mode: str
        chunk: Any
        if "events" not in passed or events is None:
            async for mode, chunk in compiled.astream(payload, config, **options):
                take(mode, chunk)
            return
        # LangChain's event stream of the run, as LangGraph's server streams a graph's: the
        # graph's own stream parts are the root's on_chain_stream events
        sink = events
        root = root_run_id(config.get("metadata") or {})
        models = {name: runtime.model.name for name, runtime in graph.runtimes.items()}
        translate = WorkflowEvents(
            str(root), models, lambda e: sink({"event": "step", "mode": "events", "data": e})
        )
        conf = cast(RunnableConfig, {**config, "run_id": root})
        try:
            async for event in compiled.astream_events(payload, conf, version="v2", **options):
                if event["event"] == "on_chain_stream" and event["run_id"] == str(root):
                    mode, chunk = event["data"]["chunk"]
                    take(mode, chunk)
                    translate.part(mode, chunk)
                else:
                    translate.event(event)
        finally:
            translate.flush()  # the ends of the nodes that ended before the run stopped

    budget = config["configurable"]["max_steps"]
    over = f"the run exceeded its step budget (max_steps={budget})"
    error = await run_loop(loop, task.conf.timeout, over)
    finished = last if (error is None and last is not None and not last["next"]) else None
    response = await respond(
        task, compiled, config, started=started, error=error, finished=finished, chain=chain
    )
    return response, updates


def _forward(mode: str, chunk: Any, events: EventSink) -> None:
    """A ``custom`` or ``tasks`` stream part as a run event: what a node wrote to the stream
    (the agent runtime writes :data:`~.events.AgentEvent` items; a function node's own
    ``{"event": KIND, ...}`` dicts pass through as they are), a node's start or end."""
    if mode == "custom" and isinstance(chunk, dict) and isinstance(chunk.get("event"), str):
        events(cast(AgentEvent, chunk))
    elif mode == "tasks" and isinstance(chunk, dict) and chunk.get("name") != TOOL_CALL_TASK:
        node = str(chunk.get("name"))
        if "result" in chunk or "error" in chunk:
            error = str(chunk["error"]) if chunk.get("error") else None
            events({"event": "node_end", "node": node, "error": error})
        else:
            events({"event": "node_start", "node": node})
