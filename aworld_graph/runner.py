"""``Runners``: AWorld's runner API over the run seam, :class:`aworld_graph.run.GraphRun`.

Every entry point opens a ``GraphRun`` and drives or reads it; the sync one is a one-line
wrapper. Runs are checkpointed under the task id, by default in ``checkpoints/aworld.db``
(or the file named by ``AWORLD_GRAPH_DB``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from .agent import Agent
from .checkpoint import open_store
from .config import RunConfig, TaskConfig, TaskRunMode
from .engine.batch import run_tasks
from .errors import DefinitionError
from .records import Reward, TraceRecord
from .rollout import rollout as _rollout
from .run import Done, GraphRun, GraphSource, RunEvent
from .state import update_problems
from .task import Task, TaskResponse

__all__ = ["Runners"]


def _with_outputs(values: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """``values``, where it edits ``answer`` alone, with the outputs that held the old answer
    edited too: the answer is the output of the node that gave it."""
    if "answer" not in values or "outputs" in values or current.get("answer") is None:
        return values
    gave = [k for k, v in (current.get("outputs") or {}).items() if v == current["answer"]]
    return {**values, "outputs": dict.fromkeys(gave, values["answer"])} if gave else values


async def _free_thread(
    saver: BaseCheckpointSaver[Any], source: str, target: str, replace: bool
) -> None:
    """Make sure fork target ``target`` holds no run (deleting one only when ``replace``)."""
    if target == source:
        raise DefinitionError(
            f"Runners.fork: new_task_id {target!r} is the thread being forked; leave it out to "
            "branch in place, or name another thread"
        )
    existing = await saver.aget_tuple({"configurable": {"thread_id": target, "checkpoint_ns": ""}})
    if existing is None:
        return
    if not replace:
        raise DefinitionError(
            f"Runners.fork: thread {target!r} already holds a run; forking into it would merge "
            "two runs' histories. Name a new thread, or pass replace=True (CLI: --replace) to "
            "delete that run first"
        )
    await saver.adelete_thread(target)


def _task(
    input: str,
    agent: Agent | None,
    swarm: GraphSource | None,
    *,
    task_id: str | None,
    session_id: str | None,
    conf: TaskConfig | None,
) -> Task:
    kwargs: dict[str, Any] = {
        "input": input,
        "agent": agent,
        "swarm": swarm,
        "session_id": session_id,
    }
    if task_id is not None:
        kwargs["id"] = task_id
    if conf is not None:
        kwargs["conf"] = conf
    return Task(**kwargs)


def _store(checkpointer: BaseCheckpointSaver[Any] | None) -> BaseCheckpointSaver[Any]:
    """``checkpointer``, or the default store's process-wide saver when it is ``None``."""
    return checkpointer if checkpointer is not None else open_store(shared=True)


class Runners:
    """Run agents and swarms (AWorld's ``Runners``)."""

    rollout = staticmethod(_rollout)
    """k runs per task, scored and grouped with reward statistics (see :mod:`aworld_graph.rollout`)."""

    @staticmethod
    async def run(
        input: str,
        agent: Agent | None = None,
        swarm: GraphSource | None = None,
        *,
        session_id: str | None = None,
        task_id: str | None = None,
        conf: TaskConfig | None = None,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
    ) -> TaskResponse:
        """Run ``agent`` or ``swarm`` on ``input`` to the end."""
        task = _task(input, agent, swarm, task_id=task_id, session_id=session_id, conf=conf)
        return (await Runners.run_task(task, checkpointer=checkpointer))[task.id]

    @staticmethod
    def sync_run(
        input: str, agent: Agent | None = None, swarm: GraphSource | None = None, **kwargs: Any
    ) -> TaskResponse:
        """Blocking :meth:`run` (for scripts; not inside a running event loop)."""
        return asyncio.run(Runners.run(input, agent, swarm, **kwargs))

    @staticmethod
    async def run_task(
        task: Task | Sequence[Task],
        *,
        concurrency: int = 8,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
        run_conf: RunConfig | None = None,
    ) -> dict[str, TaskResponse]:
        """Run one task or many (at most ``concurrency`` at once); ``{task.id: response}``.

        ``run_conf`` chooses the engine: ``RunConfig(engine_name="ray", worker_num=N)`` runs
        the batch on N Ray worker actors sharing ``checkpointer`` (its ``max_concurrency``
        per worker replaces ``concurrency``), and the responses are read back from it."""
        return await run_tasks(
            task, concurrency=concurrency, checkpointer=checkpointer, run_conf=run_conf
        )

    @staticmethod
    async def step(
        task: Task, *, checkpointer: BaseCheckpointSaver[Any] | None = None
    ) -> tuple[bool, dict[str, Any], TaskResponse]:
        """Run one superstep of ``task``: ``(is_finished, observation, response)``.

        The state lives in the checkpointer between calls, so stepping can go on in another
        process. ``observation`` holds what each node of the step wrote.
        """
        if task.conf.run_mode != TaskRunMode.INTERACTIVE:
            task.conf.run_mode = TaskRunMode.INTERACTIVE
        async with GraphRun(task, _store(checkpointer)) as run:
            response, updates = await run.step()
        return response.status != "running", updates, response

    @staticmethod
    async def reward(
        task: Task,
        score: float,
        *,
        status: str | None = None,
        feedback: str | None = None,
        source: str = "user",
        checkpointer: BaseCheckpointSaver[Any] | None = None,
    ) -> TaskResponse:
        """Attach a reward to the step just taken; it lands in the trajectory.

        Returns the task's response read back with the reward in it (the response of the
        step itself was made before the reward was given)."""
        started = time.perf_counter()
        async with GraphRun(task, _store(checkpointer)) as run:
            snapshot = await run.snapshot()
            trace: list[TraceRecord] = (snapshot.values or {}).get("trace") or []
            if not trace:
                raise DefinitionError(
                    f"task {task.id}: no step has run yet, so there is nothing to reward"
                )
            last = trace[-1]
            item: Reward = {
                "step": last.get("step"),
                "score": float(score),
                "status": status or "scored",
                "source": source,
                "feedback": feedback,
                "node": last.get("node"),
            }
            await run.update_state({"rewards": [item]}, as_node=last.get("node"))
            return await run.response(started=started)

    @staticmethod
    async def resume(
        task_id: str,
        agent: Agent | None = None,
        swarm: GraphSource | None = None,
        *,
        value: Any = None,
        conf: TaskConfig | None = None,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
    ) -> TaskResponse:
        """Continue the run of ``task_id`` from its last checkpoint.

        Work whose writes were saved is not redone. ``value`` answers a pending human
        interrupt. A task id with no run in the checkpointer is an error (as in LangGraph,
        where continuing a thread that has no checkpoint has nothing to continue from): it is
        never started afresh with an empty input.
        """
        saver = _store(checkpointer)
        task = _task("", agent, swarm, task_id=task_id, session_id=None, conf=conf)
        async with GraphRun(task, saver) as run:
            snapshot = await run.snapshot()
            if snapshot.metadata is None and not snapshot.values and not snapshot.next:
                raise DefinitionError(
                    f"Runners.resume: task {task_id!r} never ran in this checkpointer "
                    f"({type(saver).__name__}), so there is nothing to resume; start it with "
                    f"Runners.run(input=..., task_id={task_id!r}, ...), or check the id "
                    "(`aworld-graph threads` lists the stored runs)"
                )
            return await run.drive(resume=value)

    @staticmethod
    async def fork(
        task_id: str,
        checkpoint_id: str | None = None,
        *,
        values: dict[str, Any] | None = None,
        new_task_id: str | None = None,
        agent: Agent | None = None,
        swarm: GraphSource | None = None,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
        replace: bool = False,
    ) -> str:
        """Branch run ``task_id`` at ``checkpoint_id`` (default: its latest) with edited state.

        The fork is written into ``new_task_id`` (a copy of the thread) or, without it, in place
        as a new branch of the same thread; either way the history keeps its parent links. A
        ``new_task_id`` that already holds a run is refused (its history would be merged with
        this one's) unless ``replace`` deletes it first. ``values`` are state updates (list
        channels such as ``messages`` append; ``context`` merges; single values are replaced);
        unknown fields and values of the wrong type are a DefinitionError listing every one.
        A new ``answer`` is also the new output of the node that gave the old one (the
        ``outputs`` entries equal to it, unless ``values`` sets ``outputs``), so a critic
        judging that node judges the edit. Continue with :meth:`resume` on the returned id.
        """
        problems = update_problems(dict(values or {}))
        if problems:
            raise DefinitionError(
                f"Runners.fork: the state edit has {len(problems)} problem(s): "
                + "; ".join(problems)
            )
        saver = _store(checkpointer)
        task = _task("", agent, swarm, task_id=task_id, session_id=None, conf=None)
        async with GraphRun(task, saver) as run:
            compiled = run.graph
            thread = task_id
            if new_task_id is not None:
                await _free_thread(saver, task_id, new_task_id, replace)
                await saver.acopy_thread(task_id, new_task_id)
                thread = new_task_id
            config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            if checkpoint_id is not None:
                config["configurable"]["checkpoint_id"] = checkpoint_id
            snapshot = await compiled.aget_state(config)
            if not snapshot.values and snapshot.config is None:
                raise DefinitionError(
                    f"no checkpoint {checkpoint_id or '(latest)'} in thread {task_id!r}"
                )
            carried = {
                k: v
                for k, v in (snapshot.metadata or {}).items()
                if k not in ("source", "step", "parents", "writes")
            }
            fork_config: RunnableConfig = {
                **snapshot.config,
                "metadata": {**carried, "forked_from": f"{task_id}@{checkpoint_id or 'latest'}"},
            }
            await compiled.aupdate_state(
                fork_config, _with_outputs(dict(values or {}), snapshot.values), as_node=None
            )
            return thread

    @staticmethod
    async def streaming_run(
        input: str,
        agent: Agent | None = None,
        swarm: GraphSource | None = None,
        *,
        task_id: str | None = None,
        session_id: str | None = None,
        conf: TaskConfig | None = None,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
    ) -> AsyncIterator[RunEvent | Done]:
        """Run and yield events as they happen; the last one is ``{"event": "done", "response"}``.

        Events (typed in :mod:`aworld_graph.run.events`): ``node_start``, ``node_end``,
        ``llm_call``, ``token`` (with ``TaskConfig(stream=True)``), ``tool_call``, ``handoff``,
        ``answer``, ``server_unavailable``.
        """
        task = _task(input, agent, swarm, task_id=task_id, session_id=session_id, conf=conf)
        async with GraphRun(task, _store(checkpointer)) as run:
            async for event in run.stream():
                yield event
