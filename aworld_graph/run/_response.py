"""A run's response: the thread's latest state read back as a :class:`~aworld_graph.task.TaskResponse`
(its status, message, trajectory and usage), and what a stopped run's message says.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import CheckpointPayload, StateSnapshot

from ..task import Task, TaskResponse
from ..trajectory import achain, build_trajectory, run_status, usage_of

__all__ = [
    "STEP_MODES",
    "no_new_turn",
    "pending_nodes",
    "respond",
    "resume_hint",
    "run_loop",
    "step_modes",
]


def pending_nodes(snapshot: StateSnapshot) -> list[str]:
    """The nodes of the thread's next step: those still to run, and those whose results are
    saved while the step's checkpoint is not (a process died in between). LangGraph's
    ``snapshot.next`` leaves the second kind out, so it reads such a run as ended; running it
    again applies the saved results and goes on."""
    return [t.name for t in snapshot.tasks] or list(snapshot.next)


async def run_loop(
    loop: Callable[[], Awaitable[None]], seconds: float | None, over_budget: str
) -> str | None:
    """Run a run's ``loop`` (within ``seconds``, if any); why it stopped short, as the
    run's error (``over_budget`` when it hit LangGraph's recursion limit), or ``None``. A
    failed run is recorded and reported, never raised: its thread stays resumable."""
    try:
        if seconds:
            await asyncio.wait_for(loop(), seconds)
        else:
            await loop()
    except GraphRecursionError:
        return over_budget
    except TimeoutError:
        return f"the run timed out after {seconds}s"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


STEP_MODES = ("tasks", "debug", "events", "tools")
"""LangGraph stream modes a run can pass on to its sink as they are (:class:`~.events.Step`);
``events`` is LangChain's ``astream_events`` (v2) of the run (a workflow's with its model and
tool calls as LangChain's chat model and tool events); ``tools`` is a LangGraph
application's tool calls as LangGraph streams them (``tool-started``, ``tool-finished``,
``tool-error``)."""


def step_modes(steps: Sequence[str], events: Any, states: bool) -> list[Any]:
    """The stream modes of ``steps`` a run passes on: those of :data:`STEP_MODES`, when its
    sink takes step events (``events`` given, with ``states``)."""
    if events is None or not states:
        return []
    return [m for m in STEP_MODES if m in steps]


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
    finished: CheckpointPayload[dict[str, Any]] | None = None,
    chain: dict[int, str] | None = None,
) -> TaskResponse:
    """Turn the thread's latest state into a :class:`TaskResponse`.

    ``finished`` is the last checkpoint event of a run that just ended normally (then the state
    is not read back); ``chain`` maps the supersteps of this call to their checkpoint ids.
    """
    if finished is not None:
        values: dict[str, Any] = dict(finished["values"] or {})
        head = (finished["config"] or {}).get("configurable", {}).get("checkpoint_id")
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


def no_new_turn(task: Task, snapshot: StateSnapshot) -> TaskResponse:
    """The response to a new turn on a thread that has not ended its last one."""
    how = (
        f"answer it with Runners.resume({task.id!r}, value=...)"
        if snapshot.interrupts
        else f"continue it with Runners.resume({task.id!r})"
    )
    what = "waits for input" if snapshot.interrupts else "stopped mid-run"
    msg = (
        f"thread {task.id} {what}, so it takes no new input yet; {how}, or drop what it has "
        "pending (GraphRun.drop_pending) to start a new turn on top"
    )
    return TaskResponse(id=task.id, success=False, msg=msg, status="error", thread_id=task.id)
