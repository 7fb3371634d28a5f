"""aworld-graph: multi-agent systems as LangGraph state graphs.

AWorld's public names (``Agent``, ``AgentConfig``, ``Runners``, ``Task``, ``TaskConfig``,
``TaskRunMode``, ``TaskResponse``) over a LangGraph engine with SQLite trajectories.
"""

from __future__ import annotations

from .agent import Agent
from .config import AgentConfig, TaskConfig, TaskRunMode
from .errors import (
    AWorldGraphError,
    ConfigError,
    DefinitionError,
    ModelError,
    ModelRetry,
    RuntimeFailure,
)
from .model import ChatModel, ModelResponse, OpenAIModel
from .nodes import Critic, Human, Node
from .runner import Runners
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
from .task import Task, TaskResponse
from .tools import Tool, tool

__all__ = [
    "AWorldGraphError",
    "Agent",
    "AgentConfig",
    "ChatModel",
    "ConfigError",
    "Critic",
    "Edge",
    "GraphBuildType",
    "HandoffSwarm",
    "Human",
    "HybridSwarm",
    "Node",
    "Swarm",
    "TeamSwarm",
    "WorkflowSwarm",
    "edge",
    "DefinitionError",
    "ModelError",
    "ModelResponse",
    "ModelRetry",
    "OpenAIModel",
    "Runners",
    "RuntimeFailure",
    "SwarmState",
    "Task",
    "TaskConfig",
    "TaskResponse",
    "TaskRunMode",
    "Tool",
    "tool",
]
