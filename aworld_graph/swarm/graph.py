"""What the runner runs and what it turns into.

A :class:`GraphSource` (a single :class:`~aworld_graph.agent.Agent`, a swarm, or a LangGraph
application as :class:`LangGraphApp` holds it) is a pure definition; :mod:`aworld_graph.swarm.compile`
builds an agent's or a swarm's ``StateGraph`` over :class:`~aworld_graph.state.SwarmState`
(once per source: :func:`aworld_graph.run.built`), and a LangGraph application keeps its own
graph and state schema. :class:`BuiltGraph` compiles it per checkpointer and owns the agent
runtimes (models, tool connections) so the runner can close them when a run ends.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel import Pregel

from ..agent import Agent
from ..agent.runtime import AgentRuntime
from ..errors import DefinitionError
from . import Swarm

__all__ = [
    "BuiltGraph",
    "GraphSource",
    "LangGraphApp",
    "SingleAgent",
    "as_source",
    "build_agent_nodes",
]


@dataclass(eq=False)
class BuiltGraph:
    """A built (not yet compiled) graph with the runtimes its nodes use."""

    graph: StateGraph[Any] | None
    """The LangGraph builder (``None`` for a LangGraph application, which comes compiled or
    as a factory: its :meth:`compile` does not use one)."""
    entry: str
    """The node a fresh run starts at (the root agent)."""
    runtimes: dict[str, AgentRuntime] = field(default_factory=dict)
    """Agent runtimes by agent name."""
    info: dict[str, Any] = field(default_factory=dict)
    """Static facts about the graph, kept in run metadata (name, kind, version, source file)."""
    _compiled: dict[int, CompiledStateGraph[Any, Any, Any, Any]] = field(default_factory=dict)

    def compile(
        self, checkpointer: BaseCheckpointSaver[Any] | None, config: RunnableConfig | None = None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The compiled graph for ``checkpointer`` (cached per checkpointer). ``config``: the
        run's config, for a graph made per run (a LangGraph application's factory)."""
        key = id(checkpointer)
        if key not in self._compiled:
            if self.graph is None:
                raise DefinitionError(f"{self.info.get('name')!r} has no graph builder")
            self._compiled[key] = self.graph.compile(
                checkpointer=checkpointer, name=self.info.get("name")
            )
        return self._compiled[key]

    async def aclose(self) -> None:
        """Close the tool sessions (MCP servers) opened by this graph's agents.

        Model clients stay open for reuse; they close when their event loop shuts down."""
        for runtime in self.runtimes.values():
            close = getattr(runtime.provider, "aclose", None)
            if close is not None:
                await close()


def build_agent_nodes(
    graph: StateGraph[Any], agent: Agent, runtime: AgentRuntime, after_answer: Any = END
) -> None:
    """Add ``agent``'s LLM node and tools node to ``graph`` and wire the loop between them."""
    graph.add_node(agent.name, runtime.llm_node, metadata={"kind": "agent"})
    graph.add_node(
        runtime.tools_node, runtime.tools_node_fn, metadata={"kind": "tools", "agent": agent.name}
    )
    targets = [runtime.tools_node, END] + (
        [after_answer] if isinstance(after_answer, str) and after_answer != END else []
    )
    graph.add_conditional_edges(agent.name, runtime.route_after_llm(after_answer), targets)
    graph.add_edge(runtime.tools_node, agent.name)


@dataclass(eq=False)
class SingleAgent:
    """A lone agent as a graph: ``START → agent ⇄ agent__tools → END``."""

    agent: Agent
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.agent.name


_DEFAULT_NAME = "LangGraph"
"""The name LangGraph gives a graph compiled without one."""


Access = Literal["threads.create_run", "threads.update", "threads.read", "assistants.read"]
"""Why a factory is called (LangGraph's ``AccessContext``): to run the graph, or to read it."""

_Call = Callable[[RunnableConfig, Any], dict[str, Any]]
"""A factory's keyword arguments, from the run's config and its ``ServerRuntime``."""


def _is_runtime(annotation: Any) -> bool:
    """Whether a factory parameter's annotation is LangGraph's ``ServerRuntime`` (or one of
    its variants, or ``ServerRuntime[Context]``, or either inside ``Annotated``)."""
    from langgraph_sdk import runtime

    if annotation is inspect.Parameter.empty:
        return False
    if isinstance(annotation, str):  # an annotation that could not be resolved
        return annotation.split("[", 1)[0].rsplit(".", 1)[-1] == "ServerRuntime"
    if annotation is runtime.ServerRuntime or get_origin(annotation) is runtime.ServerRuntime:
        return True
    if isinstance(annotation, type):
        return issubclass(annotation, (runtime._ExecutionRuntime, runtime._ReadRuntime))
    args = get_args(annotation)
    return get_origin(annotation) is Annotated and bool(args) and _is_runtime(args[0])


def _factory_call(fn: Any) -> _Call:
    """How a graph factory is called, as LangGraph's server calls one: with no argument; with
    one, the run's config, or the ``ServerRuntime`` when it is annotated so; or with both
    (each by keyword, the runtime the one annotated ``ServerRuntime``). A DefinitionError
    for any other signature."""
    from langgraph_sdk.runtime import ServerRuntime

    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: call it with none
        return lambda config, runtime: {}
    try:
        names = {"ServerRuntime": ServerRuntime, "RunnableConfig": RunnableConfig}
        hints = get_type_hints(fn, localns=names, include_extras=True)
    except Exception:  # unresolvable annotations: read them as written
        hints = {}
    rest = [p for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if rest or len(params) > 2:
        raise DefinitionError(
            f"graph factory {name!r} takes ({', '.join(str(p) for p in params)}); a factory "
            "takes no argument, the run's config, a ServerRuntime, or both (config, runtime: "
            "ServerRuntime)"
        )
    runtime = [p.name for p in params if _is_runtime(hints.get(p.name, p.annotation))]
    other = [p.name for p in params if p.name not in runtime]
    if len(params) == 2 and len(runtime) != 1:
        raise DefinitionError(
            f"graph factory {name!r} takes two arguments ({', '.join(p.name for p in params)}); "
            "annotate exactly one of them ServerRuntime (from langgraph_sdk.runtime): the "
            "other is the run's config"
        )
    return lambda config, rt: {
        **{n: rt for n in runtime},
        **{n: config for n in other},
    }


@dataclass(eq=False)
class LangGraphApp:
    """A LangGraph application, run as it is: its own nodes, state schema, input and stream.

    ``graph`` is a compiled graph (a ``CompiledStateGraph`` or any ``Pregel``), an uncompiled
    ``StateGraph`` (compiled here), or a factory, as LangGraph's server takes one: a function,
    plain or ``async``, that takes nothing, the run's config, a ``ServerRuntime``
    (``langgraph_sdk.runtime``, by annotation) or both, and returns a graph (compiled or not)
    or a context manager (sync or async) that yields one. Its runs use the store's
    checkpointer: one the graph was compiled with is replaced, as LangGraph's server does."""

    graph: Any
    name: str = ""
    """The graph's name (default: its own, else ``graph``)."""

    def __post_init__(self) -> None:
        graph = self.graph
        if isinstance(graph, (Agent, Swarm, SingleAgent, type)) or not (
            isinstance(graph, (Pregel, StateGraph)) or callable(graph)
        ):
            raise DefinitionError(
                f"cannot serve {type(graph).__name__} as a LangGraph application: give a "
                "compiled graph, a StateGraph, or a function returning one"
            )
        self._call = None if isinstance(graph, (Pregel, StateGraph)) else _factory_call(graph)
        self._made: Pregel[Any, Any, Any, Any] | None = None
        if not self.name:
            own = getattr(graph, "name", None) if isinstance(graph, Pregel) else None
            self.name = own if isinstance(own, str) and own != _DEFAULT_NAME else "graph"

    @property
    def factory(self) -> bool:
        """Whether :attr:`graph` is a factory (a graph made per run)."""
        return self._call is not None

    def _graph_of(self, made: Any) -> Pregel[Any, Any, Any, Any]:
        if isinstance(made, StateGraph):
            made = made.compile()
        if not isinstance(made, Pregel):
            raise DefinitionError(
                f"graph factory {getattr(self.graph, '__name__', self.graph)!r} returned "
                f"{type(made).__name__}, not a graph; return (or yield) a StateGraph or a "
                "compiled graph"
            )
        return made

    def _called(
        self, config: RunnableConfig | None, access: Access, store: Any, context: Any
    ) -> Any:
        """What the factory returns for a run's ``config`` (a graph, a coroutine, or a
        context manager), given a ``ServerRuntime`` with ``store`` (and ``context`` when the
        graph is made to run) where it asks for one."""
        from langgraph_sdk import runtime

        assert self._call is not None
        made: Any
        if access == "threads.create_run":
            made = runtime._ExecutionRuntime(
                access_context=access, store=store, context=copy.copy(context)
            )
        else:
            made = runtime._ReadRuntime(access_context=access, store=store)
        return self.graph(**self._call(_factory_config(config), made))

    @asynccontextmanager
    async def open(
        self,
        config: RunnableConfig | None = None,
        *,
        access: Access = "threads.create_run",
        store: Any = None,
        context: Any = None,
    ) -> AsyncIterator[Pregel[Any, Any, Any, Any]]:
        """The compiled graph for a run with ``config``: :attr:`graph` itself, or what the
        factory returns (awaited), or yields (held open until the block ends), compiled if
        a ``StateGraph``. ``store`` and ``context``: the ``ServerRuntime``'s."""
        if self._call is None:
            yield self.make()
            return
        async with self._opened(self._called(config, access, store, context)) as graph:
            yield graph

    @asynccontextmanager
    async def _opened(self, value: Any) -> AsyncIterator[Pregel[Any, Any, Any, Any]]:
        """The graph in what a factory returned: awaited, or entered for the block."""
        if hasattr(value, "__aenter__") and hasattr(value, "__aexit__"):
            async with value as graph:
                yield self._graph_of(graph)
        elif hasattr(value, "__enter__") and hasattr(value, "__exit__"):
            with value as graph:
                yield self._graph_of(graph)
        else:
            yield self._graph_of(await value if inspect.isawaitable(value) else value)

    def make(
        self,
        config: RunnableConfig | None = None,
        *,
        access: Access = "assistants.read",
        store: Any = None,
    ) -> Pregel[Any, Any, Any, Any]:
        """The compiled graph, outside a run (to read threads, schemas, drawings):
        :attr:`graph` itself (compiled, if a ``StateGraph``), or what the factory makes for
        ``config``. An ``async`` factory, or one that returns a context manager, is run to
        its graph on an event loop of its own (the context is left again at once)."""
        if self._call is None:
            if self._made is None:
                graph = self.graph
                self._made = graph.compile() if isinstance(graph, StateGraph) else graph
            return self._made
        value = self._called(config, access, store, None)
        if not (
            inspect.isawaitable(value)
            or hasattr(value, "__enter__")
            or hasattr(value, "__aenter__")
        ):
            return self._graph_of(value)  # a plain factory: no event loop needed

        async def opened() -> Pregel[Any, Any, Any, Any]:
            async with self._opened(value) as graph:
                return graph

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(opened())
        # called from async code (a server's route): a loop of its own, in a worker thread,
        # as the caller's loop cannot be blocked on
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, opened()).result()


def _factory_config(config: RunnableConfig | None) -> RunnableConfig:
    """The config a factory is called with: the run's (a copy, with ``configurable``)."""
    given: dict[str, Any] = dict(config or {})
    given["configurable"] = dict(given.get("configurable") or {})
    given.setdefault("metadata", {})
    return given  # type: ignore[return-value]


GraphSource = Swarm | SingleAgent | LangGraphApp
"""Anything the runner can run: a swarm, a lone agent wrapped by :func:`as_source`, or a
LangGraph application (:class:`LangGraphApp`)."""


_sources: weakref.WeakKeyDictionary[Any, GraphSource] = weakref.WeakKeyDictionary()


def as_source(obj: Any) -> GraphSource:
    """``obj`` as a :class:`GraphSource`: an agent is wrapped, a LangGraph graph (compiled or
    a ``StateGraph``) becomes a :class:`LangGraphApp`, a swarm or an app is itself. A graph
    factory is a :class:`LangGraphApp` only when wrapped in one (any function is callable)."""
    if isinstance(obj, (Agent, Pregel, StateGraph)):
        if obj not in _sources:
            _sources[obj] = SingleAgent(obj) if isinstance(obj, Agent) else LangGraphApp(obj)
        return _sources[obj]
    if isinstance(obj, GraphSource):
        return obj
    raise DefinitionError(
        f"cannot run {obj!r}: pass an Agent as agent=, a Swarm or a LangGraph graph as swarm= "
        "(or a module attribute holding one, for the CLI)"
    )
