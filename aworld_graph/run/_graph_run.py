""":class:`GraphRun`: a task's graph opened on a store, driven, read back and closed.

A source's graph is built once per process (:func:`built`) and shared by every run of it.
Its tool connections (MCP sessions) stay open while some run uses it: each open
:class:`GraphRun` counts as one use, and the last one to close closes them. That count lives
here and nowhere else.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Durability, StateSnapshot

from .. import tracing
from ..config import DEFAULT_MAX_STEPS, TaskConfig
from ..errors import DefinitionError
from ..swarm import Swarm
from ..swarm.compile import compile_agent, compile_swarm
from ..swarm.graph import BuiltGraph, GraphSource, LangGraphApp, as_source
from ..task import Task, TaskResponse
from ._app import _OWN_METADATA, AppGraph, app_config, respond_app
from ._drive import drive, run_config
from ._response import pending_nodes, respond
from .events import EventSink, RunEvent

__all__ = ["Done", "GraphRun", "built"]


class Done(TypedDict):
    """The run ended: the last item of :meth:`GraphRun.stream`."""

    event: Literal["done"]
    response: TaskResponse
    """Its response."""


_built: weakref.WeakKeyDictionary[GraphSource, BuiltGraph] = weakref.WeakKeyDictionary()
_in_use: dict[int, int] = {}
"""Open runs per built graph (by ``id``); a graph leaves when its last run closes."""


def built(source: GraphSource) -> BuiltGraph:
    """The :class:`BuiltGraph` of ``source``, built once per source. Reading its ``info``,
    drawing it or compiling it to read a thread needs no :class:`GraphRun`; running it does."""
    if source not in _built:
        if isinstance(source, LangGraphApp):
            _built[source] = AppGraph(source)
        elif isinstance(source, Swarm):
            _built[source] = compile_swarm(source, sub_run)
        else:
            _built[source] = compile_agent(source.agent)
    return _built[source]


class GraphRun:
    """The graph of ``task``'s source on ``store``, for the task's thread (``task.id``).

    Open it with ``async with``; inside, drive it (:meth:`drive`, :meth:`step`,
    :meth:`stream`), read it (:meth:`snapshot`, :meth:`response`) or edit it
    (:meth:`update_state`). Leaving the block closes the graph's tool connections once no
    other run uses them::

        async with GraphRun(task, saver) as run:
            response = await run.drive()
    """

    def __init__(self, task: Task, store: BaseCheckpointSaver[Any]) -> None:
        self.task = task
        """What runs: its source, input, thread id (``task.id``) and settings."""
        self.store = store
        """Where the thread's checkpoints are kept (any LangGraph saver; ``InMemorySaver``
        for a run nothing needs to resume)."""
        self._graph: BuiltGraph | None = None

    async def __aenter__(self) -> Self:
        if self._graph is not None:
            raise DefinitionError(f"GraphRun of task {self.task.id} is already open")
        graph = built(self.task.source)
        _in_use[id(graph)] = _in_use.get(id(graph), 0) + 1
        self._graph = graph
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        graph, self._graph = self._graph, None
        if graph is None:
            return
        left = _in_use.get(id(graph), 1) - 1
        if left > 0:
            _in_use[id(graph)] = left
            return
        _in_use.pop(id(graph), None)
        await graph.aclose()

    @property
    def built(self) -> BuiltGraph:
        """The built graph (its entry node, agent runtimes and static ``info``)."""
        if self._graph is None:
            raise DefinitionError(
                f"GraphRun of task {self.task.id} is not open; use `async with GraphRun(...)`"
            )
        return self._graph

    @property
    def graph(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The graph compiled with the store (to read or edit any thread or checkpoint)."""
        return self.built.compile(self.store)

    @property
    def config(self) -> RunnableConfig:
        """The LangGraph config of the task's run: its thread, limits and metadata (a new
        dict each time)."""
        graph = self.built
        if isinstance(graph, AppGraph):
            return app_config(self.task, graph)
        return run_config(self.task, graph)

    async def drive(
        self,
        *,
        resume: Any = None,
        new_turn: bool = False,
        events: EventSink | None = None,
        states: bool = False,
        input: Any = None,
        config: RunnableConfig | None = None,
        context: Any = None,
        interrupt_before: list[str] | str | None = None,
        interrupt_after: list[str] | str | None = None,
        steps: Sequence[str] = (),
        subgraphs: bool = False,
        durability: Durability = "sync",
    ) -> TaskResponse:
        """Run the task on its thread until it ends, is interrupted or fails.

        A fresh thread starts with ``task.input``; a thread stopped mid-run goes on from its
        last checkpoint (work whose writes were saved is not redone); a finished one is read
        back, unless ``new_turn``: then ``task.input`` starts the thread's next turn. A
        thread that waits for input or stopped mid-run takes no new turn (the response says
        how to go on), unless its pending tasks are dropped first (:meth:`drop_pending`).
        ``resume`` answers a pending interrupt. ``events`` receives the run's events as they
        happen (with ``states``, also each superstep's updates and each saved checkpoint).
        A thread another process runs now is not touched: the response has status ``busy``.

        A LangGraph application (:class:`~aworld_graph.swarm.graph.LangGraphApp`) takes
        ``input`` as it is, as LangGraph runs it (a string: a user message), else
        ``task.input`` as a user message; its events are its own stream's
        (:data:`~.events.AppEvent`). ``config`` is the caller's LangGraph config (an app's
        ``configurable``, ``tags``, ``recursion_limit``…; a swarm takes its ``configurable``
        entries under the run's own) and ``context`` LangGraph's runtime context.
        ``interrupt_before`` / ``interrupt_after``: node names (or ``"*"``) the run stops
        before or after, as LangGraph's ``astream`` takes them (continue with no input).
        ``steps``: stream modes (``tasks``, ``debug``, ``events``) whose parts go to
        ``events`` as they are (:class:`~.events.Step`, with ``states``). ``subgraphs``: a
        LangGraph application's subgraphs' parts in the modes of ``steps`` go there too,
        each as a step of mode ``MODE|NAMESPACE`` (a workflow has none: a nested swarm runs as
        a thread of its own). ``durability``: when a LangGraph application's steps are saved,
        as LangGraph's ``astream`` takes it (``"sync"``: each before the next step starts;
        ``"async"``: while the next runs; ``"exit"``: only when the run ends); a workflow
        saves each step before the next (``"sync"``), its trajectory row with it, and takes
        no other.
        """
        response, _ = await drive(
            self.task,
            self.built,
            self.store,
            resume=resume,
            events=events,
            states=states,
            new_turn=new_turn,
            input=input,
            config=config,
            context=context,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            steps=steps,
            subgraphs=subgraphs,
            durability=durability,
        )
        return response

    async def step(self) -> tuple[TaskResponse, dict[str, Any]]:
        """Run one superstep; the response and what each node of the step wrote."""
        return await drive(self.task, self.built, self.store, one_step=True)

    async def stream(
        self,
        *,
        resume: Any = None,
        new_turn: bool = False,
        input: Any = None,
        config: RunnableConfig | None = None,
        context: Any = None,
    ) -> AsyncIterator[RunEvent | Done]:
        """:meth:`drive`, yielding the run's events as they happen and :class:`Done` last.

        Leaving the loop early cancels the run where it is (it stays resumable)."""
        queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        response: TaskResponse | None = None

        def put(event: Any) -> None:  # a RunEvent: drive sends no StepEvent without states
            queue.put_nowait(event)

        async def work() -> None:
            nonlocal response
            try:
                response = await self.drive(
                    resume=resume,
                    new_turn=new_turn,
                    events=put,
                    input=input,
                    config=config,
                    context=context,
                )
            finally:
                queue.put_nowait(None)

        runner = asyncio.create_task(work())
        try:
            while (event := await queue.get()) is not None:
                yield event
            await runner
            assert response is not None, "drive returned"
            yield {"event": "done", "response": response}
        finally:
            if not runner.done():
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)

    async def snapshot(self) -> StateSnapshot:
        """The thread's latest state, as LangGraph reads it."""
        return await self.graph.aget_state(self.config)

    async def update_state(self, values: dict[str, Any], *, as_node: str | None) -> None:
        """Write ``values`` to the thread as an update of node ``as_node`` (one checkpoint)."""
        await self.graph.aupdate_state(self.config, values, as_node=as_node)

    async def drop_pending(self, metadata: Mapping[str, Any] | None = None) -> bool:
        """Clear the tasks the thread has pending (a human step that waits, a node it stopped
        before or after, the work of a run stopped mid-way) with one checkpoint on top,
        LangGraph's ``update_state`` with ``as_node=END``, so that new input
        (``drive(new_turn=True)``) starts the next turn on the state the thread stands in, as
        LangGraph's loop drops pending tasks for a LangGraph application's new input. Every
        checkpoint before stays in the history. The new checkpoint carries the thread's
        metadata with ``metadata`` on top (not LangGraph's own keys, nor a run id: LangGraph
        would read a checkpoint of a run's own id as that run's re-entry). Returns whether
        anything was pending (nothing is written when not)."""
        graph = self.graph
        snapshot = await graph.aget_state({"configurable": {"thread_id": self.task.id}})
        if snapshot.config is None or not pending_nodes(snapshot):
            return False
        own = (*_OWN_METADATA, "run_id")
        kept = {k: v for k, v in (snapshot.metadata or {}).items() if k not in own}
        config: RunnableConfig = {**snapshot.config, "metadata": kept | dict(metadata or {})}
        await graph.aupdate_state(config, None, as_node=END)
        return True

    async def response(
        self, *, error: str | None = None, started: float | None = None
    ) -> TaskResponse:
        """The task's response read from the thread's latest state, nothing run.

        ``error``: why the run failed, when it failed outside the graph (its worker died);
        ``started``: the ``time.perf_counter()`` its ``time_cost`` counts from (default: now).
        """
        since = time.perf_counter() if started is None else started
        if isinstance(self.built, AppGraph):
            return await respond_app(self.task, self.graph, self.config, started=since, error=error)
        return await respond(self.task, self.graph, self.config, started=since, error=error)


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
        async with GraphRun(task, saver) as run:
            return await run.drive()

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
