"""The tools an agent offers its model and calls: its own, its environment's (the MCP servers
of its ``mcp_config``, started on first use) and the graph's (:class:`GraphTool`: handoffs
and delegations, which the tools node handles itself).

:class:`AgentTools` is the part of :class:`aworld_graph._agent_nodes.AgentRuntime` that
holds them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..errors import DefinitionError
from ..records import TraceRecord
from ..tools import Tool, ToolOutcome, ToolProvider, ToolSpec, as_tools
from . import Agent

__all__ = ["AgentTools", "GraphTool"]


@dataclass(kw_only=True)
class GraphTool:
    """A tool the graph itself handles: a handoff to another agent, or a delegation."""

    spec: ToolSpec
    """What the model sees."""
    target: str
    """The agent (or node) the call goes to."""
    kind: str
    """``handoff`` (control passes to ``target``) or ``delegate`` (``target`` runs and reports)."""
    run: Callable[[str, RunnableConfig, str], Awaitable[dict[str, Any]]] | None = None
    """For delegations: ``run(request, config, call_id)`` → ``{"answer", "trace", "thread_id"}``."""


class AgentTools:
    """An agent's tools: what it offers the model (:meth:`specs`) and how a call reaches the
    tool (:meth:`call_tool`); graph tools are offered here and run by the tools node."""

    def __init__(self, agent: Agent, graph_tools: list[GraphTool] | None = None) -> None:
        self.agent = agent
        self.name = agent.name
        self.local_tools: dict[str, Tool] = {t.name: t for t in as_tools(agent.tools)}
        self.graph_tools: dict[str, GraphTool] = {g.spec.name: g for g in graph_tools or []}
        clash = set(self.local_tools) & set(self.graph_tools)
        if clash:
            raise DefinitionError(
                f"agent {self.name!r}: tool name(s) {sorted(clash)} are also handoff/delegate tools; rename the tool"
            )
        self.provider: ToolProvider | None = agent.tool_provider
        self._specs: list[ToolSpec] | None = None

    def _ensure_provider(self) -> ToolProvider | None:
        if self.provider is None and self.agent.mcp_config is not None:
            from ..environment import Sandbox  # the MCP environment, built lazily

            self.provider = Sandbox(
                mcp_config=self.agent.mcp_config,
                mcp_servers=self.agent.mcp_servers,
                skip_unavailable=True,
            )
        return self.provider

    async def specs(self) -> list[ToolSpec]:
        """Every tool this agent offers the model (local, environment, graph-handled).

        MCP servers that cannot be started or reached are left out (see
        :attr:`unavailable`); only when none of the agent's tool sources works – every
        server is down and it has no tools of its own – is that an error.
        """
        if self._specs is None:
            specs = [t.spec for t in self.local_tools.values()] + [
                g.spec for g in self.graph_tools.values()
            ]
            provider = self._ensure_provider()
            if provider is not None:
                offered = await provider.tool_specs()
                down = self.unavailable
                if down and not offered and not self.local_tools:
                    from ..environment import ServerUnavailable

                    raise ServerUnavailable(
                        ", ".join(down),
                        f"agent {self.name!r} has no tool source left: "
                        + "; ".join(down.values())
                        + ". Fix the server(s), or give the agent tools of its own",
                    )
                specs += offered
            self._specs = specs
        return self._specs

    @property
    def unavailable(self) -> dict[str, str]:
        """MCP servers of this agent left out because they could not be used, and why."""
        return dict(getattr(self.provider, "unavailable", None) or {})

    def newly_unavailable(self, trace: list[TraceRecord]) -> dict[str, str]:
        """Left-out servers this run's trace does not name yet for this agent (each run
        records them once, at the agent's first model call)."""
        down = self.unavailable
        for record in trace:
            if record.get("agent") == self.name and not record.get("thread_id"):
                for server in record.get("unavailable_servers") or {}:
                    down.pop(server, None)
        return down

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        if name in self.local_tools:
            return await self.local_tools[name](arguments)
        provider = self._ensure_provider()
        known = [s.name for s in await self.specs()]
        if provider is not None and name in known:
            return await provider.call_tool(name, arguments)
        return ToolOutcome(
            content=f"Unknown tool '{name}'. Available tools: {', '.join(known) or 'none'}. "
            "Call one of these, or answer without a tool.",
            is_error=True,
        )

    @property
    def handoff_targets(self) -> set[str]:
        """The agents a handoff tool of this agent passes control to."""
        return {g.target for g in self.graph_tools.values() if g.kind == "handoff"}
