"""The one loop that drives a compiled graph. ``Runners`` only wraps it.

``drive`` runs a task's graph on its checkpoint thread until it ends, is interrupted, fails,
or – in step mode – finishes one superstep; then it reads the state back through the
checkpointer and builds the :class:`~aworld_graph.task.TaskResponse`.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot, StreamMode

from . import tracing
from ._agent_nodes import TOOL_CALL_TASK
from ._compile import compile_agent, compile_swarm
from .config import DEFAULT_MAX_STEPS, TaskConfig
from .errors import ThreadBusy
from .graph import BuiltGraph, GraphSource, as_source
from .swarm import Swarm
from .task import Task, TaskResponse
from .trajectory import achain, build_trajectory, run_status, usage_of

__all__ = [
    "built",
    "close_graph",
    "drive",
    "open_graph",
    "pending_nodes",
    "respond",
    "resume_hint",
    "run_config",
    "sub_run",
]

EventSink = Callable[[dict[str, Any]], None]


def pending_nodes(snapshot: StateSnapshot) -> list[str]:
    """The nodes of the thread's next step: those still to run, and those whose results are
    saved while the step's checkpoint is not (a process died in between). LangGraph's
    ``snapshot.next`` leaves the second kind out, so it reads such a run as ended; running it
    again applies the saved results and goes on."""
    return [t.name for t in snapshot.tasks] or list(snapshot.next)


_active: dict[int, int] = {}
_built: weakref.WeakKeyDictionary[Any, BuiltGraph] = weakref.WeakKeyDictionary()


def built(source: GraphSource) -> BuiltGraph:
    """The cached :class:`BuiltGraph` of ``source`` (built once per source)."""
    if source not in _built:
        _built[source] = (
            compile_swarm(source, sub_run)
            if isinstance(source, Swarm)
            else compile_agent(source.agent)
        )
    return _built[source]


def open_graph(task: Task) -> BuiltGraph:
    """The built graph for ``task``, counted as in use until :func:`close_graph`."""
    graph = built(task.source)
    _active[id(graph)] = _active.get(id(graph), 0) + 1
    return graph


async def close_graph(graph: BuiltGraph) -> None:
    """Release ``graph``; its tool connections close when no run uses it any more."""
    left = _active.get(id(graph), 1) - 1
    if left <= 0:
        _active.pop(id(graph), None)
        await graph.aclose()
    else:
        _active[id(graph)] = left


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


def resume_hint(task_id: str) -> str:
    """What a failed or cut-short run's message ends with: how to continue it."""
    return f" (resume with Runners.resume({task_id!r}, ...) or `aworld-graph resume {task_id}`)"


def _asked(value: Any, task_id: str) -> str:
    """An interrupted run's message: what it asks, in one short line (a ``Human`` node's
    prompt, not the answer it shows the person), and how to answer."""
    if isinstance(value, dict) and isinstance(value.get("prompt"), str):
        who, text = str(value.get("node") or "a human step"), value["prompt"]
    else:
        who = "the run"
        text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    if len(text) > 200:
        text = text[:200] + "…"
    return (
        f"{who} asks: {text} (answer with Runners.resume({task_id!r}, value=...) or "
        f"`aworld-graph resume {task_id} --value TEXT`)"
    )


async def respond(
    task: Task,
    graph: CompiledStateGraph[Any, Any, Any, Any],
    config: RunnableConfig,
    *,
    started: float,
    error: str | None = None,
    finished: dict[str, Any] | None = None,
    chain: dict[int, str] | None = None,
) -> TaskResponse:
    """Turn the thread's latest state into a :class:`TaskResponse`.

    ``finished`` is the last checkpoint event of a run that just ended normally (then the state
    is not read back); ``chain`` maps the supersteps of this call to their checkpoint ids.
    """
    if finished is not None:
        values: dict[str, Any] = dict(finished["values"] or {})
        head = finished["config"]["configurable"]["checkpoint_id"]
        step = int(finished["metadata"].get("step", 0))
        tasks: list[Any] = []
        pending: list[Any] = []
        next_nodes: list[str] = []
    else:
        snapshot = await graph.aget_state(config)
        values = dict(snapshot.values or {})
        head = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
        step = int((snapshot.metadata or {}).get("step", 0))
        tasks = list(snapshot.tasks)
        pending = list(snapshot.interrupts)
        next_nodes = pending_nodes(snapshot)
    failures = [
        {
            "node": t.name,
            "error": repr(t.error) if not isinstance(t.error, str) else t.error,
            "step": step + 1,
            "checkpoint_id": head,
        }
        for t in tasks
        if t.error is not None
    ]
    if error and not failures:
        failures = [{"node": None, "error": error, "step": step + 1, "checkpoint_id": head}]
    interrupts = [{"id": i.id, "value": i.value} for i in pending]
    status = run_status(
        values.get("status"),
        failed=bool(error or failures),
        interrupted=bool(interrupts),
        pending=bool(next_nodes),
    )
    msg = {
        "error": error or (failures[0]["error"] if failures else None),
        "max_steps": values.get("error"),
        "interrupted": _asked(interrupts[0]["value"], task.id) if interrupts else None,
    }.get(status)
    if msg and status in ("error", "max_steps"):
        msg += resume_hint(task.id)
    steps_needed = {
        int(r.get("step", -1)) for r in values.get("trace") or [] if not r.get("thread_id")
    }
    checkpoints = dict(chain or {})
    if not steps_needed <= set(checkpoints):  # steps of an earlier call: walk the stored chain
        saver = graph.checkpointer if isinstance(graph.checkpointer, BaseCheckpointSaver) else None
        thread = str(config["configurable"]["thread_id"])
        stored = await achain(saver, thread, head) if saver is not None else {}
        checkpoints = {**stored, **checkpoints}
    trajectory = build_trajectory(
        values,
        task_id=task.id,
        task_name=task.name,
        session_id=task.session_id,
        checkpoints=checkpoints,
        carry_context=task.conf.resp_carry_context,
        errors=failures,
    )
    llm_calls, usage = usage_of(values.get("trace") or [])
    return TaskResponse(
        id=task.id,
        answer=values.get("answer"),
        success=status == "finished" and values.get("answer") is not None,
        msg=msg,
        trajectory=trajectory,
        llm_calls=llm_calls,
        usage=usage,
        time_cost=time.perf_counter() - started,
        status=status,
        thread_id=task.id,
        checkpoint_id=head,
        interrupts=interrupts,
        state=values,
    )


async def _session_state(
    compiled: CompiledStateGraph[Any, Any, Any, Any],
    checkpointer: BaseCheckpointSaver[Any] | None,
    task: Task,
) -> dict[str, Any]:
    """What the latest earlier task of the same session leaves for this one: the conversation,
    the active agent and the context (so a handoff swarm keeps talking to the same agent)."""
    if checkpointer is None:
        return {}
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
    checkpointer: BaseCheckpointSaver[Any] | None,
    *,
    one_step: bool = False,
    resume: Any = None,
    events: EventSink | None = None,
    states: bool = False,
    new_turn: bool = False,
) -> tuple[TaskResponse, dict[str, Any]]:
    """Run ``task`` (one superstep if ``one_step``); returns the response and the last updates.

    A thread whose last run finished is read back, unless ``new_turn``: then ``task.input``
    starts a new turn of its conversation (the user message is appended to its messages, the
    rest of the state carries over; the answer, the status and the step count of the turn
    start afresh). A thread waiting for input or stopped mid-run takes no new turn: the
    response says how to go on and nothing is written.

    ``events`` receives the run's events; with ``states`` also ``{"event": "update",
    "updates"}`` (what the nodes of a superstep wrote) and ``{"event": "state", "checkpoint"}``
    (LangGraph's checkpoint event: ``values``, ``next``, ``config``, ``metadata``) per step.

    A saver that can (``TrajectorySaver.ahold``) lets this run alone write its thread; when
    another process or worker runs it now, the response says so (``success=False``) and
    nothing is written."""
    hold = getattr(checkpointer, "ahold", None)
    if hold is None:
        return await _drive(task, graph, checkpointer, one_step, resume, events, states, new_turn)
    try:
        async with hold(task.id):
            return await _drive(
                task, graph, checkpointer, one_step, resume, events, states, new_turn
            )
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
    checkpointer: BaseCheckpointSaver[Any] | None,
    one_step: bool,
    resume: Any,
    events: EventSink | None,
    states: bool = False,
    new_turn: bool = False,
) -> tuple[TaskResponse, dict[str, Any]]:
    started = time.perf_counter()
    compiled = graph.compile(checkpointer)
    config = run_config(task, graph)
    snapshot = (
        None if task._new_thread or checkpointer is None else await compiled.aget_state(config)
    )
    task._new_thread = False  # from now on the thread exists
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
            return _no_new_turn(task, snapshot), {}
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
    if events is not None:
        modes += ["custom", "tasks"]
    updates: dict[str, Any] = {}
    error: str | None = None
    chain: dict[int, str] = {}
    last: dict[str, Any] = {}

    async def loop() -> None:
        # Given a list of stream modes, astream yields (mode, chunk) pairs; LangGraph's
        # annotation types each item as a chunk alone.
        mode: str
        chunk: Any
        async for mode, chunk in compiled.astream(
            payload,
            config,
            stream_mode=modes,
            interrupt_after="*" if one_step else None,
            durability="sync",  # a step's checkpoint is on disk before the next step starts
        ):
            if mode == "updates":  # a node's delta; a tool call's task result is not one
                if isinstance(chunk, dict):
                    delta = {k: v for k, v in chunk.items() if k != TOOL_CALL_TASK}
                    updates.update(delta)
                    if states and events is not None and delta:
                        events({"event": "update", "updates": delta})
            elif mode == "checkpoints":
                last.clear()
                last.update(chunk)
                chain[int(chunk["metadata"].get("step", -1))] = chunk["config"]["configurable"][
                    "checkpoint_id"
                ]
                tracing.checkpoint_saved(chunk)
                if states and events is not None:
                    events({"event": "state", "checkpoint": chunk})
            elif events is not None:
                _forward(mode, chunk, events)

    try:
        if task.conf.timeout:
            await asyncio.wait_for(loop(), task.conf.timeout)
        else:
            await loop()
    except GraphRecursionError:
        budget = config["configurable"]["max_steps"]
        error = f"the run exceeded its step budget (max_steps={budget})"
    except TimeoutError:
        error = f"the run timed out after {task.conf.timeout}s"
    except Exception as exc:  # recorded and reported; the run stays resumable
        error = f"{type(exc).__name__}: {exc}"
    finished = last if (error is None and last and not last.get("next")) else None
    response = await respond(
        task, compiled, config, started=started, error=error, finished=finished, chain=chain
    )
    return response, updates


def _no_new_turn(task: Task, snapshot: StateSnapshot) -> TaskResponse:
    """The response to a new turn on a thread that has not ended its last one."""
    how = (
        f"answer it with Runners.resume({task.id!r}, value=...)"
        if snapshot.interrupts
        else f"continue it with Runners.resume({task.id!r})"
    )
    what = "waits for input" if snapshot.interrupts else "stopped mid-run"
    msg = f"thread {task.id} {what}, so it takes no new input yet; {how}"
    return TaskResponse(id=task.id, success=False, msg=msg, status="error", thread_id=task.id)


def _forward(mode: str, chunk: Any, events: EventSink) -> None:
    if mode == "custom" and isinstance(chunk, dict):
        events(chunk)
    elif mode == "tasks" and isinstance(chunk, dict) and chunk.get("name") != TOOL_CALL_TASK:
        if "result" in chunk or "error" in chunk:
            events(
                {
                    "event": "node_end",
                    "node": chunk.get("name"),
                    "error": str(chunk["error"]) if chunk.get("error") else None,
                }
            )
        else:
            events({"event": "node_start", "node": chunk.get("name")})


async def sub_run(source: Any, request: str, config: RunnableConfig, key: str) -> dict[str, Any]:
    """Run ``source`` (a delegated member or a nested swarm) as its own checkpointed thread.

    The thread id is ``<parent thread>.<key>``, derived from the parent's tool call or turn, so
    when the parent is resumed a finished sub-run is read back instead of run again. The sub-run
    starts in a fresh context so LangGraph treats it as a run of its own, not a subgraph.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    configurable = config.get("configurable") or {}
    saver = configurable.get("__pregel_checkpointer")
    if not isinstance(saver, BaseCheckpointSaver):
        saver = InMemorySaver()
    source = as_source(source)
    task = Task(
        input=request,
        swarm=source,
        id=f"{configurable.get('thread_id', 'run')}.{key}",
        # a nested swarm's own max_steps bounds its sub-run; else the parent's budget does
        conf=TaskConfig(
            max_steps=None
            if built(source).info.get("max_steps")
            else int(configurable.get("max_steps", DEFAULT_MAX_STEPS))
        ),
    )

    async def go() -> TaskResponse:
        graph = open_graph(task)
        try:
            return (await drive(task, graph, saver))[0]
        finally:
            await close_graph(graph)

    response = await asyncio.get_running_loop().create_task(go(), context=tracing.new_context())
    trace = [
        {**r, "thread_id": task.id, "parent_node": key.split(".")[0]}
        for r in response.state.get("trace", [])
    ]
    return {
        "answer": response.answer,
        "success": response.success,
        "msg": response.msg,
        "thread_id": task.id,
        "trace": trace,
    }
