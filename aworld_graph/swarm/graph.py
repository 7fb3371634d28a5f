"""What the runner runs and what it turns into.

A :class:`GraphSource` (a single :class:`~aworld_graph.agent.Agent`, or a swarm) is a pure
definition; :mod:`aworld_graph.swarm.compile` builds its ``StateGraph`` over
:class:`~aworld_graph.state.SwarmState` (once per source: :func:`aworld_graph.run.built`).
:class:`BuiltGraph` compiles it per checkpointer and owns the agent runtimes (models, tool
connections) so the runner can close them when a run ends.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, StateGraph
from langgraph.graph.state import CompiledStateGraph

from ..agent import Agent
from ..agent.runtime import AgentRuntime
from ..errors import DefinitionError
from . import Swarm

__all__ = ["BuiltGraph", "GraphSource", "SingleAgent", "as_source", "build_agent_nodes"]


@dataclass(eq=False)
class BuiltGraph:
    """A built (not yet compiled) graph with the runtimes its nodes use."""

    graph: StateGraph[Any]
    """The LangGraph builder."""
    entry: str
    """The node a fresh run starts at (the root agent)."""
    runtimes: dict[str, AgentRuntime] = field(default_factory=dict)
    """Agent runtimes by agent name."""
    info: dict[str, Any] = field(default_factory=dict)
    """Static facts about the graph, kept in run metadata (name, kind, version, source file)."""
    _compiled: dict[int, CompiledStateGraph[Any, Any, Any, Any]] = field(default_factory=dict)

    def compile(
        self, checkpointer: BaseCheckpointSaver[Any] | None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The compiled graph for ``checkpointer`` (cached per checkpointer)."""
        key = id(checkpointer)
        if key not in self._compiled:
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


GraphSource = Swarm | SingleAgent
"""Anything the runner can run: a swarm, or a lone agent wrapped by :func:`as_source`."""


_sources: weakref.WeakKeyDictionary[Any, GraphSource] = weakref.WeakKeyDictionary()


def as_source(obj: Any) -> GraphSource:
    """``obj`` as a :class:`GraphSource`: an agent is wrapped, a swarm is itself."""
    if isinstance(obj, Agent):
        if obj not in _sources:
            _sources[obj] = SingleAgent(obj)
        return _sources[obj]
    if isinstance(obj, GraphSource):
        return obj
    raise DefinitionError(
        f"cannot run {obj!r}: pass an Agent as agent= or a Swarm as swarm= "
        "(or a module attribute holding one, for the CLI)"
    )
