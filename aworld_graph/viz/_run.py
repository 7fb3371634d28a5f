"""A run's path through the drawn topology: its steps in order, mapped onto view node ids.

Steps come from the run state's ``trace`` (every LLM call, tool execution, critic verdict,
human input, function node and nested-swarm step, including those of sub-runs), joined with
the AWorld trajectory items for checkpoint times and with the state's rewards.
"""

from __future__ import annotations

import time
from typing import Any

from ._view import View

__all__ = ["load_run", "run_path"]

_TEXT = 2000


def _clip(value: Any, limit: int = _TEXT) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"... ({len(value) - limit} more characters)"
    return value


def _node_id(view: View, record: dict[str, Any]) -> str | None:
    within = view.find(record["parent_node"]) if record.get("parent_node") else None
    if record.get("kind") == "tools":
        agent = str(record.get("agent") or "")
        return view.find(f"{agent}__tools", within) or view.find(agent, within)
    return view.find(str(record.get("node") or ""), within)


def _calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": c.get("name"), "arguments": _clip(c.get("arguments"), 500)}
        for c in record.get("tool_calls") or []
    ]


def _results(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": r.get("name"),
            "arguments": _clip(r.get("arguments"), 500),
            "content": _clip(r.get("content"), 1000),
            "is_error": bool(r.get("is_error")),
            "duration_ms": r.get("duration_ms"),
        }
        for r in record.get("tool_results") or []
    ]


def run_path(response: Any, view: View) -> dict[str, Any]:
    """The steps of ``response`` (a ``TaskResponse``) in order, each with the view node it ran
    on, its timing, token usage, tool calls and results, reward and error."""
    state: dict[str, Any] = dict(getattr(response, "state", None) or {})
    items = list(getattr(response, "trajectory", None) or [])
    times = {
        item["meta"].get("step"): item["meta"].get("execute_time")
        for item in items
        if item["meta"].get("execute_time")
    }
    rewards = [r for r in state.get("rewards") or [] if isinstance(r, dict)]
    steps: list[dict[str, Any]] = []
    for record in state.get("trace") or []:
        sub = record.get("thread_id")
        step_rewards = [] if sub else [r for r in rewards if r.get("step") == record.get("step")]
        reward = step_rewards[-1] if step_rewards else {}
        results = _results(record)
        duration = record.get("latency_ms")
        if duration is None and results:
            duration = round(sum(float(r["duration_ms"] or 0) for r in results), 3)
        steps.append(
            {
                "node": _node_id(view, record),
                "name": record.get("node"),
                "agent": record.get("agent"),
                "kind": record.get("kind"),
                "step": record.get("step"),
                "thread": sub,
                "time": None if sub else times.get(record.get("step")),
                "duration_ms": duration,
                "model": record.get("model"),
                "usage": record.get("usage"),
                "content": _clip(record.get("content")),
                "tool_calls": _calls(record),
                "tool_results": results,
                "score": reward.get("score", record.get("score")),
                "status": reward.get("status", record.get("status")),
                "feedback": _clip(reward.get("feedback", record.get("feedback"))),
                "error": _clip(record.get("error"))
                or next((r["content"] for r in results if r["is_error"]), None),
            }
        )
    for item in items:
        if item["meta"].get("kind") == "error":
            name = item["meta"].get("node")
            steps.append(
                {
                    "node": view.find(str(name)) if name else None,
                    "name": name,
                    "agent": name,
                    "kind": "error",
                    "step": item["meta"].get("step"),
                    "error": _clip(item["action"]["ext_info"].get("error")),
                    "tool_calls": [],
                    "tool_results": [],
                }
            )
    for i, step in enumerate(steps):
        step["index"] = i + 1
    return {
        "thread_id": getattr(response, "thread_id", None) or getattr(response, "id", None),
        "status": getattr(response, "status", None),
        "success": getattr(response, "success", None),
        "answer": _clip(getattr(response, "answer", None)),
        "msg": getattr(response, "msg", None),
        "llm_calls": getattr(response, "llm_calls", None),
        "usage": getattr(response, "usage", None),
        "steps": steps,
        "visited": sorted({s["node"] for s in steps if s.get("node")}),
    }


async def load_run(target: Any, thread_id: str, checkpointer: Any) -> Any:
    """The ``TaskResponse`` of the stored run ``thread_id`` of ``target`` (an agent or swarm),
    read from ``checkpointer`` through LangGraph; nothing is run."""
    from .._run_impl import close_graph, open_graph, respond
    from ..errors import DefinitionError
    from ..graph import as_source
    from ..task import Task

    task = Task(input="", swarm=as_source(target), id=thread_id)
    graph = open_graph(task)
    try:
        compiled = graph.compile(checkpointer)
        config = {"configurable": {"thread_id": thread_id}}
        snapshot = await compiled.aget_state(config)  # type: ignore[arg-type]
        if not snapshot.values:
            raise DefinitionError(
                f"no run with thread id {thread_id!r} in this database; check --run and --db"
            )
        return await respond(task, compiled, config, started=time.perf_counter())  # type: ignore[arg-type]
    finally:
        await close_graph(graph)
