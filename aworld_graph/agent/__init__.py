"""``Agent``: a model with tools, compiled into two graph nodes.

An agent's LLM call is one superstep (node ``<name>``) and executing the tool calls it asked
for is another (node ``<name>__tools``), so each is its own checkpoint and trajectory step.

An agent given no ``model=`` runs on :func:`resolve_model` of its ``conf``: the
``AgentConfig``, else the ``LLM_*`` environment, else the embedded local model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..config import AgentConfig
from ..errors import DefinitionError
from ..model import ChatModel
from ..tools import Tool
from ._messages import STOPPED_CALL
from ._resolve import resolve_model

if TYPE_CHECKING:
    from ..tools import ToolProvider

__all__ = ["STOPPED_CALL", "Agent", "resolve_model", "tools_node_name"]

_RESERVED = re.compile(r"[|:]|^__|__tools$")


def tools_node_name(agent_name: str) -> str:
    """Name of the graph node that runs ``agent_name``'s tool calls."""
    return f"{agent_name}__tools"


@dataclass(kw_only=True, eq=False)
class Agent:
    """An LLM agent: a model, a system prompt and tools (AWorld's ``Agent``)."""

    name: str
    """Unique name in its swarm; also the graph node's name."""
    system_prompt: str = "You are a helpful assistant."
    """The system message the model sees first."""
    description: str = ""
    """What the agent does; shown to other agents when they can hand off to it."""
    tools: Sequence[Tool | Callable[..., Any]] = ()
    """Python tools (functions decorated with ``@tool``, or plain typed functions)."""
    mcp_config: dict[str, Any] | str | None = None
    """An ``mcpServers`` config (dict, or a JSON/YAML file path) whose tools the agent may use."""
    mcp_servers: list[str] | None = None
    """Which servers of ``mcp_config`` to use; ``None`` means all of them."""
    conf: AgentConfig | None = None
    """Model endpoint settings; ``None`` reads ``LLM_*`` env vars, else the embedded model."""
    model: ChatModel | None = None
    """A model object to use instead of ``conf`` (e.g. ``FunctionModel`` in tests)."""
    max_steps: int = 10
    """Most LLM calls this agent makes in one run; then the run stops with ``success=False``."""
    tool_choice: Literal["auto", "required", "none"] = "auto"
    """Whether the model may, must or must not call a tool. ``"required"`` applies to the first
    model call of a turn only: once a tool has answered, the model chooses again (so it can
    reply), as openai-agents' ``reset_tool_choice`` does."""
    demos: list[dict[str, Any]] = field(default_factory=list)
    """Few-shot examples ``{"input", "output"}`` shown before the conversation; one with
    ``tool_calls`` (``[{"name", "arguments", "result"}]``) is shown as the request, the calls,
    their results and the answer."""
    tool_provider: ToolProvider | None = field(default=None, repr=False)
    """An environment that supplies tools (normally built from ``mcp_config``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise DefinitionError(
                "Agent.name must be a non-empty string, e.g. Agent(name='solver')"
            )
        if _RESERVED.search(self.name):
            raise DefinitionError(
                f"Agent.name {self.name!r} uses a reserved form ('|', ':', a leading '__' or a "
                "'__tools' suffix); rename the agent"
            )
        if self.tool_choice not in ("auto", "required", "none"):
            raise DefinitionError(
                f"agent {self.name!r}: tool_choice must be 'auto', 'required' or 'none', "
                f"not {self.tool_choice!r}"
            )
        if self.max_steps < 1:
            raise DefinitionError(f"agent {self.name!r}: max_steps must be at least 1")

    @property
    def id(self) -> str:
        """The agent's id (its name), as AWorld's ``agent.id()``."""
        return self.name

    def card(self) -> dict[str, Any]:
        """What a reader (or the topology view) should know about this agent; no secrets."""
        return {
            "kind": "agent",
            "name": self.name,
            "description": self.description,
            "system_prompt": self.system_prompt,
            "tools": [getattr(t, "name", getattr(t, "__name__", str(t))) for t in self.tools],
            "mcp_servers": self.mcp_servers,
            "model": getattr(self.model, "name", None)
            or (self.conf.llm_model_name if self.conf else None),
            "max_steps": self.max_steps,
            "tool_choice": self.tool_choice,
        }
