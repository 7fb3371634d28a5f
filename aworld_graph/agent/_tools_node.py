"""An agent's tools node: every tool call of its last message, each as its own LangGraph task.

A finished call's result is saved as soon as it finishes, so when a crashed run resumes, the
node runs again but calls that had finished return their saved results and only the
unfinished ones execute again. A handoff among the calls passes control on; only the first
handoff counts, and every call – handoff or not – gets its tool message, so no call is left
dangling. What one call does is :func:`aworld_graph._tool_calls.run_call`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.func import task

from ..records import Message, ToolResult, TraceRecord
from ..state import SwarmState
from . import tools_node_name
from ._messages import last_assistant
from ._tools import AgentTools
from ._turns import emit, step_of

__all__ = ["TOOL_CALL_TASK", "RunCall", "tools_step"]

TOOL_CALL_TASK = "__tool_call__"
"""Name of the LangGraph task that runs one tool call inside a tools node (reserved: no node
name may start with ``__``)."""

RunCall = Callable[
    [dict[str, Any], list[Message], set[str | None], RunnableConfig], Awaitable[ToolResult]
]
"""Runs one tool call: ``(call, messages, ids of this step's calls, the node's config)``."""


async def tools_step(
    tools: AgentTools, run: RunCall, state: SwarmState, config: RunnableConfig
) -> dict[str, Any]:
    """The state update of ``tools.agent``'s tools node: one tool message per call of its
    last message (each run by ``run`` in a task of its own), one ``tools`` trace record and
    the trace of delegated sub-runs; a handoff passes control on."""
    name = tools.name
    messages = state.get("messages", [])
    last = last_assistant(messages, name)
    turn = last.get("_turn") if last else None
    calls = list(last.get("tool_calls") or []) if last else []
    exclude: set[str | None] = {tc.get("id") for tc in calls}
    done = await asyncio.gather(
        *(_tool_call(run, name, tc, messages, exclude, config) for tc in calls)
    )
    results = [r.copy() for r in done]  # the task's own return value is saved as it was
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
    sub_trace: list[TraceRecord] = []
    for r in results:
        msg: Message = {
            "role": "tool",
            "tool_call_id": r["tool_call_id"],
            "content": r["content"],
            "_agent": name,
            "_turn": turn,
        }
        if r["is_error"]:
            msg["_error"] = True
        tool_messages.append(msg)
        sub_trace += r.pop("sub_trace", []) or []
        emit(
            {
                "event": "tool_call",
                "agent": name,
                "tool": r["name"],
                "tool_call_id": str(r["tool_call_id"] or ""),
                "server": r["server"],
                "arguments": r["arguments"],
                "content": r["content"],
                "is_error": r["is_error"],
                "duration_ms": r["duration_ms"],
            }
        )
    record: TraceRecord = {
        "kind": "tools",
        "node": tools_node_name(name),
        "agent": name,
        "step": step_of(config),
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
        emit({"event": "handoff", "from": name, "to": handoff})
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
    run: RunCall,
    agent: str,
    tc: dict[str, Any],
    messages: list[Message],
    exclude: set[str | None],
    node_config: RunnableConfig,
) -> ToolResult:
    """One tool call as a LangGraph task, so its finished result survives a crash.

    ``node_config`` is the tools node's config (its thread names delegated sub-runs). LangGraph
    fills parameters named ``config``, ``runtime``, ``store``, ``writer`` or ``previous`` itself,
    so those names are not used here. A call whose saved result a resumed run reuses does not
    run this body, so it tells of no start."""
    fn = tc.get("function") or {}
    emit(
        {
            "event": "tool_start",
            "agent": agent,
            "tool": str(fn.get("name") or ""),
            "tool_call_id": str(tc.get("id") or ""),
            "arguments": str(fn.get("arguments") or "{}"),
        }
    )
    return await run(tc, messages, exclude, node_config)
