"""The run seam: a graph for a source and a store – open, drive, read the response, close.

:class:`GraphRun` is the one way to run a graph: ``Runners``, rollouts and batches, the
server, the Ray workers, meta-learning and the CLI all go through it::

    async with GraphRun(task, saver) as run:
        response = await run.drive()                # or run.step(), run.stream(), drive(resume=…)

A :data:`GraphSource` is what runs (a swarm, a lone agent as :func:`as_source` wraps it, or
a LangGraph application, :class:`LangGraphApp`: a compiled graph, a ``StateGraph`` or a
factory, run with its own state and input); :func:`built` is its graph, built once per
process. A run reports what happens as typed
events (:mod:`aworld_graph.run.events`, re-exported here).

(The class is ``GraphRun``, not ``Run``: ``Run`` already names a stored run read back from a
store, :class:`aworld_graph.trajectory.Run`.)
"""

from __future__ import annotations

from ..swarm.graph import BuiltGraph, GraphSource, LangGraphApp, SingleAgent, as_source
from ._app import AppGraph
from ._graph_run import Done, GraphRun, built
from ._response import pending_nodes
from .events import (
    AgentEvent,
    Answer,
    AppEvent,
    CriticScore,
    Custom,
    EventSink,
    Handoff,
    LlmCall,
    LlmStart,
    Message,
    NodeEnd,
    NodeStart,
    RunEvent,
    ServerUnavailable,
    State,
    StepEvent,
    Token,
    ToolCall,
    ToolStart,
    Update,
)

__all__ = [
    "AgentEvent",
    "Answer",
    "AppEvent",
    "AppGraph",
    "BuiltGraph",
    "CriticScore",
    "Custom",
    "Done",
    "EventSink",
    "GraphRun",
    "GraphSource",
    "Handoff",
    "LangGraphApp",
    "LlmCall",
    "LlmStart",
    "Message",
    "NodeEnd",
    "NodeStart",
    "RunEvent",
    "ServerUnavailable",
    "SingleAgent",
    "State",
    "StepEvent",
    "Token",
    "ToolCall",
    "ToolStart",
    "Update",
    "as_source",
    "built",
    "pending_nodes",
]
