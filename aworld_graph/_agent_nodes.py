"""What an agent does when its graph nodes run: one LLM call, or the tool calls it asked for.

Internal: :mod:`aworld_graph.swarm` and :mod:`aworld_graph.agent` wire these functions into a
LangGraph ``StateGraph``. Each function returns an explicit state delta (messages appended,
one trace record, counters), which is exactly what the checkpointer keeps as a transition.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.func import task
from langgraph.graph import END

from . import tracing
from ._messages import (
    assistant_message,
    demo_messages,
    last_assistant,
    public_messages,
    render_as_text,
    tool_used_this_turn,
    turn_input,
)
from ._resolve import resolve_model
from ._tool_calls import run_call
from .agent import Agent, tools_node_name
from .errors import DefinitionError
from .model import ChatModel
from .state import Message, SwarmState
from .tools import Tool, ToolOutcome, ToolProvider, ToolSpec, as_tools

__all__ = ["TOOL_CALL_TASK", "AgentRuntime", "GraphTool", "public_messages", "turn_input"]

TOOL_CALL_TASK = "__tool_call__"
"""Name of the LangGraph task that runs one tool call inside a tools node (reserved: no node
name may start with ``__``)."""


def _step(config: RunnableConfig) -> int:
    return int((config.get("metadata") or {}).get("langgraph_step", 0))


def _max_steps(config: RunnableConfig) -> int:
    return int((config.get("configurable") or {}).get("max_steps", 50))


def _emit(event: dict[str, Any]) -> None:
    try:
        get_stream_writer()(event)
    except RuntimeError:  # not inside a runnable context (direct calls in tests)
        pass


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


class AgentRuntime:
    """An :class:`Agent` made ready to run: its model resolved, its tools gathered.

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
        self.agent = agent
        self.name = agent.name
        self.private = private
        self.tools_node = tools_node_name(agent.name)
        self.model: ChatModel = agent.model or resolve_model(agent.conf)
        self.local_tools: dict[str, Tool] = {t.name: t for t in as_tools(agent.tools)}
        self.graph_tools: dict[str, GraphTool] = {g.spec.name: g for g in graph_tools or []}
        clash = set(self.local_tools) & set(self.graph_tools)
        if clash:
            raise DefinitionError(
                f"agent {self.name!r}: tool name(s) {sorted(clash)} are also handoff/delegate tools; rename the tool"
            )
        self.provider: ToolProvider | None = agent.tool_provider
        self._specs: list[ToolSpec] | None = None

    # -- tools --------------------------------------------------------------------------------
    def _ensure_provider(self) -> ToolProvider | None:
        if self.provider is None and self.agent.mcp_config is not None:
            from .environment import Sandbox  # the MCP environment, built lazily

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
                    from .environment import ServerUnavailable

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

    # -- turns --------------------------------------------------------------------------------
    def _turn(self, messages: list[Message]) -> tuple[str, bool]:
        """This agent's current turn id, and whether it is a new turn."""
        mine = [m for m in messages if m.get("_agent") == self.name]
        if mine and mine[-1].get("role") == "tool":
            return str(mine[-1].get("_turn")), False
        turns = {m.get("_turn") for m in mine}
        return f"{self.name}#{len(turns) + 1}", True

    def turn_input(self, state: SwarmState) -> str:
        """What a private turn of this agent starts from (see :func:`turn_input`)."""
        return turn_input(self.name, state)

    # -- the LLM node -------------------------------------------------------------------------
    def _llm_calls(self, state: SwarmState) -> int:
        """This agent's LLM calls in this run: since the thread's latest task input (a thread
        of several turns takes a new input per run)."""
        messages = state.get("messages", [])
        start = next(
            (
                i
                for i in range(len(messages) - 1, -1, -1)
                if messages[i].get("role") == "user" and "_agent" not in messages[i]
            ),
            -1,
        )
        return sum(
            1
            for r in state.get("trace", [])
            if r.get("agent") == self.name
            and r.get("kind") == "llm"
            and int(r.get("n_messages", start + 1)) > start
        )

    def _limit(self, state: SwarmState, config: RunnableConfig) -> str | None:
        if self._llm_calls(state) >= self.agent.max_steps:
            return f"agent {self.name!r} made {self.agent.max_steps} LLM calls (its max_steps) without a final answer"
        if state.get("steps", 0) >= _max_steps(config):
            return f"the task reached max_steps={_max_steps(config)} before an answer"
        return None

    @tracing.agent_step("llm")
    async def llm_node(self, state: SwarmState, config: RunnableConfig) -> dict[str, Any]:
        """One model call; appends the assistant message and a trace record."""
        step = _step(config)
        limit = self._limit(state, config)
        if limit is not None:
            return {
                "status": "max_steps",
                "error": limit
                + "; raise max_steps (Agent.max_steps or TaskConfig.max_steps) and run again",
                "trace": {
                    "kind": "limit",
                    "at": time.time(),
                    "node": self.name,
                    "agent": self.name,
                    "step": step,
                    "error": limit,
                },
            }
        history = state.get("messages", [])
        turn, new_turn = self._turn(history)
        added: list[Message] = []
        if self.private:
            if new_turn:
                added.append(
                    {
                        "role": "user",
                        "content": self.turn_input(state),
                        "_agent": self.name,
                        "_turn": turn,
                    }
                )
            conversation = [m for m in history if m.get("_turn") == turn] + added
        else:
            conversation = history
        prompt: list[Message] = [{"role": "system", "content": self.agent.system_prompt}]
        conversation = public_messages(conversation)
        text_mode = self.model.profile.tool_results == "text"
        # examples are turns of their own, rendered as the conversation is (tool calls too)
        demos = demo_messages(self.agent.demos)
        prompt += render_as_text(demos) if text_mode else demos
        prompt += render_as_text(conversation) if text_mode else conversation
        specs = await self.specs()
        offer = bool(specs) and not (text_mode and tool_used_this_turn(conversation))
        on_token: Callable[[str], None] | None = None
        if (config.get("configurable") or {}).get("stream_tokens"):

            def on_token(text: str) -> None:
                _emit({"event": "token", "agent": self.name, "text": text})

        response = await tracing.model_call(
            self.model,
            prompt,
            [s.openai() for s in specs] if offer else None,
            tool_choice=self.model.profile.tool_choice if offer else None,
            on_token=on_token,
        )
        message = {**assistant_message(response), "_agent": self.name, "_turn": turn}
        record = {
            "kind": "llm",
            "at": time.time(),
            "node": self.name,
            "agent": self.name,
            "step": step,
            "turn": turn,
            "model": response.model or self.model.name,
            "usage": response.usage.as_dict(),
            "latency_ms": round(response.latency_ms, 3),
            "finish_reason": response.finish_reason,
            "content": response.content,
            "tool_calls": [c.as_dict() for c in response.tool_calls],
            "n_messages": len(history) + len(added),
            "prompt_turn": turn if self.private else None,
            "system_prompt": self.agent.system_prompt,
            "tools": [s.openai() for s in specs] if offer else [],
            "raw": response.raw,
        }
        down = self._newly_unavailable(state)
        if down:
            record["unavailable_servers"] = down
            for server, reason in down.items():
                _emit(
                    {
                        "event": "server_unavailable",
                        "agent": self.name,
                        "server": server,
                        "error": reason,
                    }
                )
        _emit(
            {
                "event": "llm_call",
                "agent": self.name,
                "content": response.content,
                "tool_calls": record["tool_calls"],
                "usage": record["usage"],
                "latency_ms": record["latency_ms"],
            }
        )
        update: dict[str, Any] = {
            "messages": added + [message],
            "trace": record,
            "steps": 1,
            "active_agent": self.name,
        }
        if not response.tool_calls:
            update["answer"] = response.content
            update["outputs"] = {self.name: response.content}
            update["status"] = "finished"
            _emit({"event": "answer", "agent": self.name, "content": response.content})
        return update

    def _newly_unavailable(self, state: SwarmState) -> dict[str, str]:
        """Left-out servers this run's trace does not name yet for this agent (each run
        records them once, at the agent's first model call)."""
        down = self.unavailable
        for record in state.get("trace", []):
            if record.get("agent") == self.name and not record.get("thread_id"):
                for server in record.get("unavailable_servers") or {}:
                    down.pop(server, None)
        return down

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

    @property
    def handoff_targets(self) -> set[str]:
        return {g.target for g in self.graph_tools.values() if g.kind == "handoff"}

    # -- the tools node -----------------------------------------------------------------------
    @tracing.tool_call
    async def _run_call(
        self, tc: dict[str, Any], messages: list[Message], exclude: set[str], config: RunnableConfig
    ) -> dict[str, Any]:
        return await run_call(self, tc, messages, exclude, config)

    @tracing.agent_step("tools")
    async def tools_node_fn(self, state: SwarmState, config: RunnableConfig) -> dict[str, Any]:
        """Run every tool call of this agent's last message; one tool message per call.

        Each call is its own LangGraph task (:data:`TOOL_CALL_TASK`): its result is saved as
        soon as it finishes, so when a crashed run resumes, this node runs again but calls that
        had finished return their saved results and only the unfinished ones execute again.
        A handoff among the calls passes control on; only the first handoff counts, and every
        call – handoff or not – gets its tool message, so no call is left dangling.
        """
        messages = state.get("messages", [])
        last = last_assistant(messages, self.name) or {}
        turn = last.get("_turn")
        calls = list(last.get("tool_calls") or [])
        exclude = {tc.get("id") for tc in calls}
        done = await asyncio.gather(
            *(_tool_call(self, tc, messages, exclude, config) for tc in calls)
        )
        results = [dict(r) for r in done]  # the task's own return value is saved as it was
        handoff: str | None = None
        for r in results:
            if r.get("handoff"):
                if handoff is None:
                    handoff = r["handoff"]
                else:
                    r["content"] = (
                        f"Ignored: control already passed to {handoff}; hand off to one agent at a time."
                    )
                    r["handoff"] = None
        tool_messages: list[Message] = []
        sub_trace: list[dict[str, Any]] = []
        for r in results:
            msg: Message = {
                "role": "tool",
                "tool_call_id": r["tool_call_id"],
                "content": r["content"],
                "_agent": self.name,
                "_turn": turn,
            }
            if r["is_error"]:
                msg["_error"] = True
            tool_messages.append(msg)
            sub_trace += r.pop("sub_trace", None) or []
            _emit(
                {
                    "event": "tool_call",
                    "agent": self.name,
                    "tool": r["name"],
                    "server": r["server"],
                    "arguments": r["arguments"],
                    "content": r["content"],
                    "is_error": r["is_error"],
                    "duration_ms": r["duration_ms"],
                }
            )
        record = {
            "kind": "tools",
            "node": self.tools_node,
            "agent": self.name,
            "step": _step(config),
            "turn": turn,
            "tool_results": results,
        }
        update: dict[str, Any] = {
            "messages": tool_messages,
            "trace": [record, *sub_trace],
            "steps": 1,
        }
        if handoff is not None:
            update["active_agent"] = handoff
            _emit({"event": "handoff", "from": self.name, "to": handoff})
        return update


if TYPE_CHECKING:
    from langgraph.func import _TaskFunction

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _named_task(name: str) -> Callable[[Callable[_P, Awaitable[_T]]], _TaskFunction[_P, _T]]:
    """``langgraph.func.task(name=...)``, typed: LangGraph's overload for it binds its type
    variables only in its result, so a type checker reads the decorated function as one that
    takes and returns nothing."""
    return task(name=name)


@_named_task(TOOL_CALL_TASK)
async def _tool_call(
    agent: AgentRuntime,
    tc: dict[str, Any],
    messages: list[Message],
    exclude: set[str],
    node_config: RunnableConfig,
) -> dict[str, Any]:
    """One tool call as a LangGraph task, so its finished result survives a crash.

    ``node_config`` is the tools node's config (its thread names delegated sub-runs). LangGraph
    fills parameters named ``config``, ``runtime``, ``store``, ``writer`` or ``previous`` itself,
    so those names are not used here."""
    return await agent._run_call(tc, messages, exclude, node_config)
