"""A run's path through the drawn topology: its steps in order, mapped onto view node ids.

Steps come from the run state's ``trace`` (every LLM call, tool execution, critic verdict,
human input, function node and nested-swarm step, including those of sub-runs), joined with
the AWorld trajectory items for checkpoint times and with the state's rewards.

The *route* is the edges the run really took. LangGraph runs in supersteps: a node that runs
in superstep ``t`` was triggered by the writes of nodes that ran in ``t - 1`` (a join gate:
by its sources since the node last ran), and every trace record carries its superstep. So an
edge ``u → v`` of one swarm counts as taken when ``u`` ran in the superstep right before
``v``, on the same thread (each sub-run and nested swarm numbers its own supersteps); a
delegation when the tool execution of the leader names the member's sub-run; the start edge
for the nodes of the first superstep, an end edge for those of the last one of a finished
run. An edge whose source ran long before its target is not taken, so loops, hand-offs and
conditions light up only the way the run went.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, cast

from ..records import Reward, TraceRecord
from ._view import END, START, View

__all__ = ["load_run", "run_path"]

_TEXT = 2000


def _clip(value: Any, limit: int = _TEXT) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"... ({len(value) - limit} more characters)"
    return value


def _node_id(view: View, record: TraceRecord) -> str | None:
    within = view.find(record["parent_node"]) if record.get("parent_node") else None
    if record.get("kind") == "tools":
        agent = str(record.get("agent") or "")
        return view.find(f"{agent}__tools", within) or view.find(agent, within)
    return view.find(str(record.get("node") or ""), within)


def _calls(record: TraceRecord) -> list[dict[str, Any]]:
    return [
        {"name": c.get("name"), "arguments": _clip(c.get("arguments"), 500)}
        for c in record.get("tool_calls") or []
    ]


def _results(record: TraceRecord) -> list[dict[str, Any]]:
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
    rewards = cast(list[Reward], [r for r in state.get("rewards") or [] if isinstance(r, dict)])
    trace: list[TraceRecord] = list(state.get("trace") or [])
    steps: list[dict[str, Any]] = []
    for record in trace:
        sub = record.get("thread_id")
        step_rewards = [] if sub else [r for r in rewards if r.get("step") == record.get("step")]
        reward: Reward = step_rewards[-1] if step_rewards else {}
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
    route = _route(view, steps, trace, finished=getattr(response, "status", None) == "finished")
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
        "route": route,
    }


def _route(
    view: View, steps: list[dict[str, Any]], trace: list[TraceRecord], *, finished: bool
) -> list[dict[str, Any]]:
    """The edges the run took, in the order it first took them: ``{"edge": "e<i>" (its
    index in ``view.edges``, as the page numbers them), "source", "target", "step"}`` where
    ``step`` is the index of the step that the edge led to."""
    parent = {n.id: n.cluster for n in view.nodes} | {c.id: c.cluster for c in view.clusters}
    between: dict[tuple[str, str], list[int]] = defaultdict(list)
    into: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(view.edges):
        between[(e.source, e.target)].append(i)
        into[e.target].append(i)
    gates = {n.id for n in view.nodes if n.kind == "join"}
    # where each node ran: per thread and swarm, superstep -> (node ids, step index)
    runs: dict[tuple[Any, Any], list[tuple[int, str, int]]] = defaultdict(list)
    taken: dict[int, int] = {}

    def take(edges: list[int], at: int) -> None:
        for i in edges:
            taken.setdefault(i, at)

    records = iter(trace)
    for step in steps:
        record = next(records, None) if step["kind"] != "error" else None
        node, superstep = step.get("node"), step.get("step")
        if not node or not isinstance(superstep, int):
            continue
        here = {node}
        if step["kind"] == "tools":  # a tool execution is its agent's step too
            agent = view.find(str(step.get("agent") or ""), parent.get(node))
            here |= {agent} if agent else set()
            for result in (record.get("tool_results") or []) if record else []:
                member = view.find(str(result.get("delegate") or ""), parent.get(node))
                if result.get("delegate") and member and agent:
                    take(between[(agent, member)], step["index"])
        for id in here:
            runs[(step.get("thread"), parent.get(id))].append((superstep, id, step["index"]))
    for (thread, _), ran in runs.items():
        at: dict[int, set[str]] = defaultdict(set)
        for superstep, id, _ in ran:
            at[superstep].add(id)
        last: dict[str, int] = {}
        for superstep, id, index in sorted(ran, key=lambda r: (r[2], r[0])):
            for source in at.get(superstep - 1, ()):
                if source not in gates:
                    take(between[(source, id)], index)
            for i in into[id]:
                gate = view.edges[i].source
                if gate not in gates:
                    continue
                came = [
                    j
                    for j in into[gate]
                    if any(
                        last.get(id, -1) < t < superstep
                        for t, source, _ in ran
                        if source == view.edges[j].source
                    )
                ]
                if came:
                    take([i, *came], index)
            last[id] = superstep
        if thread is None and at:
            first, final = min(at), max(at)
            for id in at[first]:
                take(between[(START, id)], min(x for t, n, x in ran if t == first and n == id))
            if finished:
                for id in at[final]:
                    take(between[(id, END)], max(x for t, n, x in ran if t == final and n == id))
    return [
        {
            "edge": f"e{i}",
            "source": view.edges[i].source,
            "target": view.edges[i].target,
            "step": at,
        }
        for i, at in sorted(taken.items(), key=lambda item: (item[1], item[0]))
    ]


async def load_run(target: Any, thread_id: str, checkpointer: Any) -> Any:
    """The ``TaskResponse`` of the stored run ``thread_id`` of ``target`` (an agent or swarm),
    read from ``checkpointer`` through LangGraph; nothing is run."""
    from ..errors import DefinitionError
    from ..run import GraphRun, as_source
    from ..task import Task

    task = Task(input="", swarm=as_source(target), id=thread_id)
    async with GraphRun(task, checkpointer) as run:
        snapshot = await run.snapshot()
        if not snapshot.values:
            raise DefinitionError(
                f"no run with thread id {thread_id!r} in this database; check --run and --db"
            )
        return await run.response()
