"""What an agent does when its graph nodes run: one LLM call, or the tool calls it asked for.

Internal: :mod:`aworld_graph.swarm` and :mod:`aworld_graph.agent` wire these functions into a
LangGraph ``StateGraph``. Each function returns an explicit state delta (messages appended,
one trace record, counters), which is exactly what the checkpointer keeps as a transition.

:class:`AgentRuntime` is the agent made ready to run; each job is a module of its own:

* its tools – :mod:`aworld_graph._agent_tools` (:class:`AgentTools`, :class:`GraphTool`);
* its turns and step limits – :mod:`aworld_graph._agent_turns`;
* the LLM node – :mod:`aworld_graph._agent_llm`;
* the tools node – :mod:`aworld_graph._tools_node`, one call – :mod:`aworld_graph._tool_calls`;
* the routing between the two nodes – here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END

from .. import tracing
from ..model import ChatModel
from ..records import Message, ToolResult
from ..state import SwarmState
from . import Agent, tools_node_name
from ._llm import llm_step
from ._messages import last_assistant, public_messages, turn_input
from ._resolve import resolve_model
from ._tool_calls import run_call
from ._tools import AgentTools, GraphTool
from ._tools_node import TOOL_CALL_TASK, tools_step

__all__ = ["TOOL_CALL_TASK", "AgentRuntime", "GraphTool", "public_messages", "turn_input"]


class AgentRuntime(AgentTools):
    """An :class:`Agent` made ready to run: its model resolved, its tools gathered
    (:class:`AgentTools`), its two nodes (:meth:`llm_node`, :meth:`tools_node_fn`) and the
    routing after each.

    ``private=True`` (workflow swarms) gives each turn of the agent its own conversation that
    starts from the task input plus the outputs of earlier nodes; otherwise (single agents,
    handoff swarms) agents share one conversation.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        private: bool = False,
        graph_tools: list[GraphTool] | None = None,
    ) -> None:
        self.private = private
        self.tools_node = tools_node_name(agent.name)
        self.model: ChatModel = agent.model or resolve_model(agent.conf)
        super().__init__(agent, graph_tools)

    def turn_input(self, state: SwarmState) -> str:
        """What a private turn of this agent starts from (see :func:`turn_input`)."""
        return turn_input(self.name, state)

    # -- the nodes ------------------------------------------------------------------------------
    @tracing.agent_step("llm")
    async def llm_node(self, state: SwarmState, config: RunnableConfig) -> dict[str, Any]:
        """One model call; appends the assistant message and a trace record."""
        return await llm_step(self, self.model, state, config, private=self.private)

    @tracing.agent_step("tools")
    async def tools_node_fn(self, state: SwarmState, config: RunnableConfig) -> dict[str, Any]:
        """Run every tool call of this agent's last message; one tool message per call.

        Each call is its own LangGraph task (:data:`TOOL_CALL_TASK`): its result is saved as
        soon as it finishes, so when a crashed run resumes, this node runs again but calls that
        had finished return their saved results and only the unfinished ones execute again.
        A handoff among the calls passes control on; only the first handoff counts, and every
        call – handoff or not – gets its tool message, so no call is left dangling.
        """
        return await tools_step(self, self._run_call, state, config)

    @tracing.tool_call
    async def _run_call(
        self,
        tc: dict[str, Any],
        messages: list[Message],
        exclude: set[str | None],
        config: RunnableConfig,
    ) -> ToolResult:
        return await run_call(
            self, tc, messages, exclude, config, repeat_guard=self.model.profile.repeat_guard
        )

    # -- routing --------------------------------------------------------------------------------
    def route_after_llm(
        self, next_after_answer: Callable[[SwarmState], Any] | str = END
    ) -> Callable[[SwarmState], Any]:
        """Routing function: to the tools node on tool calls, else onwards."""

        def route(state: SwarmState) -> Any:
            if state.get("status") in ("max_steps", "error"):
                return END
            last = last_assistant(state.get("messages", []), self.name)
            if last is not None and last.get("tool_calls"):
                return self.tools_node
            return next_after_answer(state) if callable(next_after_answer) else next_after_answer

        return route

    def route_after_tools(self, state: SwarmState) -> str:
        """Back to this agent, or to the agent a handoff named."""
        active = state.get("active_agent")
        return (
            active
            if active and active != self.name and active in self.handoff_targets
            else self.name
        )
