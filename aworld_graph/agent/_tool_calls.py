"""What one tool call of an agent's turn does: the repeat guard, arguments that are not
JSON, a handoff, a delegation to a team member, or the tool itself (a tool provider's call).
The tools node (:mod:`aworld_graph._tools_node`) runs each call as its own LangGraph task."""

from __future__ import annotations

import json
import time
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..records import Message, ToolResult
from ..tools import truncate_for_model
from ._messages import NUDGE
from ._tools import AgentTools

__all__ = ["run_call"]


async def run_call(
    tools: AgentTools,
    tc: dict[str, Any],
    messages: list[Message],
    exclude: set[str | None],
    config: RunnableConfig,
    *,
    repeat_guard: bool,
) -> ToolResult:
    """The result record of tool call ``tc`` of ``tools.agent``; with ``repeat_guard``, a
    call that repeats an earlier successful one (not among ``exclude``) gets its result."""
    fn = tc.get("function", {})
    name, raw_args = fn.get("name", ""), fn.get("arguments") or "{}"
    base: ToolResult = {
        "tool_call_id": tc.get("id"),
        "name": name,
        "arguments": raw_args,
        "server": None,
    }
    graph_tool = tools.graph_tools.get(name)
    if graph_tool is None and repeat_guard:
        previous = _previous_result(messages, name, raw_args, exclude)
        if previous is not None:
            content = (
                f"{previous}\n(You already called {name} with these arguments and this was "
                f"its result; do not call it again. {NUDGE})"
            )
            return {
                **base,
                "content": content,
                "result": previous,
                "is_error": False,
                "repeated": True,
                "duration_ms": 0.0,
            }
    try:
        arguments = json.loads(raw_args) if raw_args.strip() else {}
        if not isinstance(arguments, dict):
            raise ValueError("arguments must be a JSON object")
    except ValueError as exc:
        content = (
            f"The arguments for tool '{name}' are not valid JSON ({exc}); got {raw_args[:200]!r}. "
            "Call the tool again with a JSON object matching its schema."
        )
        return {
            **base,
            "content": content,
            "result": content,
            "is_error": True,
            "duration_ms": 0.0,
        }
    started = time.perf_counter()
    if graph_tool is not None and graph_tool.kind == "handoff":
        return {
            **base,
            "content": f"Transferred to {graph_tool.target}.",
            "result": None,
            "is_error": False,
            "handoff": graph_tool.target,
            "duration_ms": 0.0,
        }
    if graph_tool is not None and graph_tool.run is not None:
        request = str(arguments.get("request") or arguments.get("task") or json.dumps(arguments))
        sub = await graph_tool.run(request, config, str(tc.get("id")))
        answer = sub.get("answer") or sub.get("msg") or ""
        return {
            **base,
            "content": truncate_for_model(str(answer)),
            "result": answer,
            "is_error": not sub.get("success", True),
            "delegate": graph_tool.target,
            "thread_id": sub.get("thread_id"),
            "sub_trace": sub.get("trace", []),
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        }
    outcome = await tools.call_tool(name, arguments)
    duration = outcome.duration_ms or (time.perf_counter() - started) * 1000
    return {
        **base,
        "server": outcome.server,
        "content": truncate_for_model(outcome.content),
        "result": outcome.result if outcome.result is not None else outcome.content,
        "is_error": outcome.is_error,
        "duration_ms": round(duration, 3),
    }


def _previous_result(
    messages: list[Message], name: str, arguments: str, exclude: set[str | None]
) -> str | None:
    """Result of an earlier identical, successful call (for the repeat guard)."""
    wanted = _canonical(arguments)
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    for message in messages:
        for tc in message.get("tool_calls") or []:
            fn = tc.get("function", {})
            if (
                tc.get("id") in exclude
                or fn.get("name") != name
                or _canonical(fn.get("arguments", "")) != wanted
            ):
                continue
            result = results.get(tc.get("id"))
            if result is not None and not result.get("_error"):
                return str(result.get("content", ""))
    return None


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return arguments.strip()
