"""What the runner runs and what it turns into.

A :class:`GraphSource` (a single :class:`~aworld_graph.agent.Agent`, a swarm, or a LangGraph
application as :class:`LangGraphApp` holds it) is a pure definition; :mod:`aworld_graph.swarm.compile`
builds an agent's or a swarm's ``StateGraph`` over :class:`~aworld_graph.state.SwarmState`
(once per source: :func:`aworld_graph.run.built`), and a LangGraph application keeps its own
graph and state schema. :class:`BuiltGraph` compiles it per checkpointer and owns the agent
runtimes (models, tool connections) so the runner can close them when a run ends.
"""

from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass, field
from typing import Any

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


def _factory_arity(fn: Any) -> int:
    """How many arguments a graph factory takes: none, or one (the run's config), as
    LangGraph's server calls a factory; a DefinitionError for anything else."""
    name = getattr(fn, "__name__", repr(fn))
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise DefinitionError(
            f"{name!r} is an async graph factory; make it a plain function that returns the "
            "graph (compiled or not)"
        )
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: call it with none
        return 0
    named = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(named) > 1:
        raise DefinitionError(
            f"graph factory {name!r} takes {len(named)} arguments "
            f"({', '.join(p.name for p in named)}); a factory takes none, or one: the run's "
            "config"
        )
    return len(named)


@dataclass(eq=False)
class LangGraphApp:
    """A LangGraph application, run as it is: its own nodes, state schema, input and stream.

    ``graph`` is a compiled graph (a ``CompiledStateGraph`` or any ``Pregel``), an uncompiled
    ``StateGraph`` (compiled here), or a factory: a plain function returning one, called with
    the run's config when it takes an argument (as LangGraph's server calls a factory), else
    with none. Its runs use the store's checkpointer: one the graph was compiled with is
    replaced, as LangGraph's server does."""

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
        self._arity = None if isinstance(graph, (Pregel, StateGraph)) else _factory_arity(graph)
        self._made: Pregel[Any, Any, Any, Any] | None = None
        if not self.name:
            own = getattr(graph, "name", None) if isinstance(graph, Pregel) else None
            self.name = own if isinstance(own, str) and own != _DEFAULT_NAME else "graph"

    @property
    def factory(self) -> bool:
        """Whether :attr:`graph` is a factory (a graph made per run)."""
        return self._arity is not None

    def make(self, config: RunnableConfig | None = None) -> Pregel[Any, Any, Any, Any]:
        """The compiled graph: :attr:`graph` itself (compiled, if it was a ``StateGraph``), or
        what the factory returns for ``config`` (compiled, if a ``StateGraph``)."""
        if self._arity is None:
            if self._made is None:
                graph = self.graph
                self._made = graph.compile() if isinstance(graph, StateGraph) else graph
            return self._made
        made = self.graph(_factory_config(config)) if self._arity else self.graph()
        if isinstance(made, StateGraph):
            made = made.compile()
        if not isinstance(made, Pregel):
            raise DefinitionError(
                f"graph factory {getattr(self.graph, '__name__', self.graph)!r} returned "
                f"{type(made).__name__}, not a graph; return a StateGraph or a compiled graph"
            )
        return made


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
