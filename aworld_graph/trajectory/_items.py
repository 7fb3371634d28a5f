"""The AWorld trajectory items of a run, built from its state values (see
:mod:`aworld_graph.trajectory`, which reads runs back and re-exports these)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..records import Message, Reward, TraceRecord

__all__ = ["build_trajectory", "usage_of"]


def usage_of(trace: Iterable[Mapping[str, Any]]) -> tuple[int, dict[str, int]]:
    """Number of LLM calls and summed token usage in a trace."""
    calls = 0
    total = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for record in trace:
        if record.get("kind") == "llm":
            calls += 1
            for key in total:
                total[key] += int((record.get("usage") or {}).get(key, 0))
    return calls, total


def _public_message(message: Message) -> dict[str, Any]:
    return {k: v for k, v in message.items() if not k.startswith("_")}


def _openai_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for c in calls
    ]


def _item_steps(
    trace: list[TraceRecord],
) -> dict[int, tuple[TraceRecord | None, set[Any]]]:
    """Trace index of each item's record → its tools record and the supersteps it covers."""
    out: dict[int, tuple[TraceRecord | None, set[Any]]] = {}
    for i, record in enumerate(trace):
        if record.get("kind") not in ("llm", "limit", "critic", "human"):
            continue
        tool_record = (
            next(
                (
                    r
                    for r in trace[i + 1 :]
                    if r.get("kind") == "tools" and r.get("agent") == record.get("agent")
                ),
                None,
            )
            if record.get("tool_calls")
            else None
        )
        steps = {record.get("step")} | ({tool_record.get("step")} if tool_record else set())
        out[i] = (tool_record, steps)
    return out


def _owners(
    rewards: list[Reward], steps_of: Mapping[int, tuple[Any, set[Any]]]
) -> dict[int, list[Reward]]:
    """Which item each reward belongs to, so that none is lost: the item covering its step;
    else (a step with no item of its own, such as a function node's) the latest item before
    it; else the first item."""
    owned: dict[int, list[Reward]] = {i: [] for i in steps_of}
    for reward in rewards:
        step = reward.get("step")
        covering = [i for i, (_, steps) in steps_of.items() if step in steps]
        if not covering and steps_of:
            earlier = [
                i
                for i, (_, steps) in steps_of.items()
                if isinstance(step, int) and any(isinstance(s, int) and s <= step for s in steps)
            ]
            covering = [earlier[-1] if earlier else next(iter(steps_of))]
        for i in covering:
            owned[i].append(reward)
    return owned


def _item(
    number: int,
    ids: tuple[str | None, str, str | None],
    at: Mapping[str, Any],
    pre_agent: str | None,
    *,
    kind: Any,
    agent: Any,
    execute_time: str | None,
    checkpoint_id: str | None,
    state: dict[str, Any],
    action: dict[str, Any],
    reward: dict[str, Any],
) -> dict[str, Any]:
    """The ``number``-th trajectory item of the run ``ids`` = ``(session_id, task_id,
    task_name)``: of the step whose ``node`` and ``step`` are ``at``'s."""
    session_id, task_id, task_name = ids
    return {
        "id": f"{task_id}_{number}",
        "meta": {
            "session_id": session_id,
            "task_id": task_id,
            "task_name": task_name,
            "agent_id": agent,
            "step": at.get("step"),
            "execute_time": execute_time,
            "pre_agent": pre_agent,
            "checkpoint_id": checkpoint_id,
            "node": at.get("node"),
            "kind": kind,
        },
        "state": state,
        "action": action,
        "reward": reward,
    }


def build_trajectory(
    values: Mapping[str, Any],
    *,
    task_id: str,
    task_name: str | None = None,
    session_id: str | None = None,
    checkpoints: Mapping[int, str] | None = None,
    carry_context: bool = True,
    errors: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """AWorld trajectory items from a run's state values.

    ``checkpoints`` maps a superstep number to the ``checkpoint_id`` of the
    checkpoint written after it; ``errors`` are failures pending on the latest checkpoint.
    """
    trace: list[TraceRecord] = list(values.get("trace") or [])
    messages: list[Message] = list(values.get("messages") or [])
    rewards: list[Reward] = list(values.get("rewards") or [])
    checkpoints = checkpoints or {}
    ids = (session_id, task_id, task_name)
    items: list[dict[str, Any]] = []
    pre_agent: str | None = None
    steps_of = _item_steps(trace)
    owned = _owners(rewards, steps_of)
    for i, (tool_record, steps) in steps_of.items():
        record = trace[i]
        kind = record.get("kind")
        step_rewards = owned[i]
        n = int(record.get("n_messages", len(messages)))
        seen = messages[:n]
        if record.get("prompt_turn"):  # a private turn of a workflow agent: its own messages
            seen = [m for m in seen if m.get("_turn") == record["prompt_turn"]]
        context = [_public_message(m) for m in seen] if carry_context else []
        user_input = next(
            (m.get("content") for m in reversed(seen) if m.get("role") in ("user", "tool")),
            None,
        )
        last_step = (
            max(s for s in steps if s is not None) if any(s is not None for s in steps) else None
        )
        checkpoint_id = checkpoints.get(last_step) if last_step is not None else None
        at = record.get("at")
        created_at = (
            datetime.fromtimestamp(at, UTC).isoformat() if isinstance(at, (int, float)) else None
        )
        outputs = [
            {
                k: r.get(k)
                for k in (
                    "tool_call_id",
                    "name",
                    "server",
                    "arguments",
                    "content",
                    "result",
                    "is_error",
                    "duration_ms",
                    "repeated",
                )
                if k in r
            }
            for r in (tool_record.get("tool_results", []) if tool_record else [])
        ]
        score = step_rewards[-1].get("score") if step_rewards else record.get("score")
        status = step_rewards[-1].get("status") if step_rewards else None
        if status is None:
            if kind == "limit" or record.get("error"):
                status = "failed"
            elif any(o.get("is_error") for o in outputs):
                status = "tool_error"
            else:
                status = "success"
        items.append(
            _item(
                len(items) + 1,
                ids,
                record,
                pre_agent,
                kind=kind,
                agent=record.get("agent"),
                execute_time=created_at,
                checkpoint_id=checkpoint_id,
                state={
                    "input": user_input,
                    "messages": context,
                    "context": dict(values.get("context") or {}),
                },
                action={
                    "content": record.get("content") if kind != "limit" else None,
                    "tool_calls": _openai_calls(record.get("tool_calls") or []),
                    "is_agent_finished": kind == "llm" and not record.get("tool_calls"),
                    "ext_info": {
                        "model": record.get("model"),
                        "usage": record.get("usage"),
                        "latency_ms": record.get("latency_ms"),
                        "finish_reason": record.get("finish_reason"),
                        "error": record.get("error"),
                        "feedback": step_rewards[-1].get("feedback")
                        if step_rewards
                        else record.get("feedback"),
                        "unavailable_servers": record.get("unavailable_servers"),
                        "retried": record.get("retried"),
                    },
                },
                reward={
                    "tool_outputs": outputs,
                    "status": status,
                    "score": score,
                    "rewards": [dict(r) for r in step_rewards],
                },
            )
        )
        pre_agent = record.get("agent")
    for error in errors or []:
        items.append(
            _item(
                len(items) + 1,
                ids,
                error,
                pre_agent,
                kind="error",
                agent=error.get("node"),
                execute_time=None,
                checkpoint_id=error.get("checkpoint_id"),
                state={"input": None, "messages": [], "context": {}},
                action={
                    "content": None,
                    "tool_calls": [],
                    "is_agent_finished": False,
                    "ext_info": {"error": error.get("error")},
                },
                reward={"tool_outputs": [], "status": "error", "score": None, "rewards": []},
            )
        )
    return items
