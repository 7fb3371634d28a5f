"""aworld-graph: multi-agent systems as LangGraph state graphs.

AWorld's public names (``Agent``, ``AgentConfig``, ``Runners``, ``Task``, ``TaskConfig``,
``TaskRunMode``, ``TaskResponse``, ``Swarm``, ``Sandbox``) over a LangGraph engine with
SQLite trajectories.

Names are imported on first use (PEP 562), so ``import aworld_graph.environment.server`` or
the CLI's ``--help`` does not pay for LangGraph; ``__all__`` lists every public name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "AWorldGraphError": "errors",
    "Agent": "agent",
    "AgentConfig": "config",
    "ChatModel": "model",
    "ConfigError": "errors",
    "Critic": "swarm.nodes",
    "DefinitionError": "errors",
    "Edge": "swarm",
    "GraphBuildType": "swarm",
    "HandoffSwarm": "swarm",
    "Human": "swarm.nodes",
    "HybridSwarm": "swarm",
    "ModelError": "errors",
    "ModelResponse": "model",
    "ModelRetry": "errors",
    "Node": "swarm.nodes",
    "OpenAIModel": "model",
    "RemoteAgent": "swarm.remote",
    "RunConfig": "config",
    "Runners": "runner",
    "RuntimeFailure": "errors",
    "Sandbox": "environment",
    "Swarm": "swarm",
    "SwarmState": "state",
    "Task": "task",
    "TaskConfig": "config",
    "TaskResponse": "task",
    "TaskRunMode": "config",
    "TeamSwarm": "swarm",
    "Tool": "tools",
    "TrajectorySaver": "checkpoint",
    "WorkflowSwarm": "swarm",
    "edge": "swarm",
    "load_workflow": "spec",
    "tool": "tools",
}

__all__ = [
    "AWorldGraphError",
    "Agent",
    "AgentConfig",
    "ChatModel",
    "ConfigError",
    "Critic",
    "DefinitionError",
    "Edge",
    "GraphBuildType",
    "HandoffSwarm",
    "Human",
    "HybridSwarm",
    "ModelError",
    "ModelResponse",
    "ModelRetry",
    "Node",
    "OpenAIModel",
    "RemoteAgent",
    "RunConfig",
    "Runners",
    "RuntimeFailure",
    "Sandbox",
    "Swarm",
    "SwarmState",
    "Task",
    "TaskConfig",
    "TaskResponse",
    "TaskRunMode",
    "TeamSwarm",
    "Tool",
    "TrajectorySaver",
    "WorkflowSwarm",
    "edge",
    "load_workflow",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'aworld_graph' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .agent import Agent
    from .checkpoint import TrajectorySaver
    from .config import AgentConfig, RunConfig, TaskConfig, TaskRunMode
    from .environment import Sandbox
    from .errors import (
        AWorldGraphError,
        ConfigError,
        DefinitionError,
        ModelError,
        ModelRetry,
        RuntimeFailure,
    )
    from .model import ChatModel, ModelResponse, OpenAIModel
    from .runner import Runners
    from .spec import load_workflow
    from .state import SwarmState
    from .swarm import (
        Edge,
        GraphBuildType,
        HandoffSwarm,
        HybridSwarm,
        Swarm,
        TeamSwarm,
        WorkflowSwarm,
        edge,
    )
    from .swarm.nodes import Critic, Human, Node
    from .swarm.remote import RemoteAgent
    from .task import Task, TaskResponse
    from .tools import Tool, tool
