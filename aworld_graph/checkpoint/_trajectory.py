"""Derive the ``trajectory`` row of one transition (parent checkpoint → new checkpoint).

Columns, all plain SQLite types, JSON as text:

``thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step`` — ids;
``nodes`` — JSON list of the nodes that ran in this step (from the tasks' pending writes at
the parent checkpoint and the ``node`` of appended ``trace`` records); ``source`` —
``input`` | ``loop`` | ``update`` | ``fork``; ``created_at`` — ISO-8601 UTC; ``duration_ms``
— time since the parent checkpoint; ``changes`` — JSON object channel → new value, or for a
list that grew by appending, only the appended items (secrets stripped, large values
truncated); ``llm_usage`` — JSON ``{"calls", "prompt_tokens", "completion_tokens",
"total_tokens"}`` summed over appended ``trace`` records (or LangChain messages'
``usage_metadata``); ``tool_names`` — JSON list of tools called or executed in this step;
``reward`` — the ``score`` of the last item appended to ``rewards`` in this step.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ._secrets import strip_secrets

__all__ = ["Transition", "transition_row", "node_from_task_path", "duration_ms"]

MAX_STRING = 2_000
MAX_ITEMS = 200
MAX_CHANNEL_JSON = 32_000
_SKIP_PREFIXES = ("branch:", "__pregel")


@dataclasses.dataclass(kw_only=True, slots=True)
class Transition:
    """What one put() contributes to the trajectory, before JSON encoding."""

    thread_id: str
    """Thread of the run."""
    checkpoint_ns: str
    """Namespace (``""`` for the root graph, ``parent:task`` for subgraphs)."""
    checkpoint_id: str
    """The new checkpoint."""
    parent_checkpoint_id: str | None
    """The checkpoint it was derived from."""
    run_id: str | None
    """``run_id`` from the metadata, when LangGraph or the caller set one."""
    step: int | None
    """LangGraph step (``-1`` for the input checkpoint)."""
    source: str | None
    """How the checkpoint was made (input, loop, update, fork)."""
    created_at: str
    """Checkpoint timestamp, ISO-8601."""
    duration_ms: float | None
    """Milliseconds since the parent checkpoint."""
    nodes: list[str]
    """Nodes that ran in this step, from pending writes at the parent."""
    changed: dict[str, Any]
    """Channel → new value for channels whose value was replaced."""
    appended: dict[str, list[Any]]
    """Channel → appended items for list channels that grew by appending."""


def node_from_task_path(task_path: str) -> str | None:
    """The node name of a pull task (``"~__pregel_pull, agent"`` → ``"agent"``)."""
    if task_path.startswith("~__pregel_pull, "):
        return task_path[len("~__pregel_pull, ") :]
    return None


def duration_ms(parent_ts: str | None, ts: str) -> float | None:
    """Milliseconds between two ISO timestamps, or ``None`` if either is unknown."""
    if not parent_ts:
        return None
    try:
        delta = datetime.fromisoformat(ts) - datetime.fromisoformat(parent_ts)
    except (TypeError, ValueError):
        return None
    return round(delta.total_seconds() * 1000.0, 3)


def transition_row(t: Transition) -> tuple[Any, ...]:
    """The ``trajectory`` row for ``t``, in table column order."""
    changes: dict[str, Any] = {}
    for channel, value in t.changed.items():
        if not channel.startswith(_SKIP_PREFIXES):
            changes[channel] = _channel_json(value)
    for channel, items in t.appended.items():
        if not channel.startswith(_SKIP_PREFIXES):
            changes[channel] = _channel_json(items)
    trace = [r for r in t.appended.get("trace", ()) if isinstance(r, Mapping)]
    messages = t.appended.get("messages", t.changed.get("messages"))
    messages = messages if isinstance(messages, list) else []
    nodes = list(dict.fromkeys([*t.nodes, *(str(r["node"]) for r in trace if r.get("node"))]))
    usage = _usage(trace, messages)
    tools = _tool_names(trace, messages)
    return (
        t.thread_id,
        t.checkpoint_ns,
        t.checkpoint_id,
        t.parent_checkpoint_id,
        t.run_id,
        t.step,
        json.dumps(nodes),
        t.source,
        t.created_at,
        t.duration_ms,
        json.dumps(changes, ensure_ascii=False, separators=(",", ":")) if changes else None,
        json.dumps(usage) if usage else None,
        json.dumps(tools, ensure_ascii=False) if tools else None,
        _reward(t.appended.get("rewards", ())),
    )


def _usage(trace: list[Mapping[str, Any]], messages: list[Any]) -> dict[str, int] | None:
    total = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for record in trace:
        usage = record.get("usage")
        if isinstance(usage, Mapping):
            total["calls"] += 1
            for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                total[key] += _int(usage.get(key))
    if not trace:
        for message in messages:
            usage = getattr(message, "usage_metadata", None)
            if isinstance(usage, Mapping):
                total["calls"] += 1
                total["prompt_tokens"] += _int(usage.get("input_tokens"))
                total["completion_tokens"] += _int(usage.get("output_tokens"))
                total["total_tokens"] += _int(usage.get("total_tokens"))
    return total if total["calls"] else None


def _tool_names(trace: list[Mapping[str, Any]], messages: list[Any]) -> list[str]:
    names: list[str] = []
    for record in trace:
        for key in ("tool_calls", "tool_results"):
            names.extend(_names(record.get(key)))
    for message in messages:
        if isinstance(message, Mapping):
            names.extend(_names(message.get("tool_calls")))
        else:
            names.extend(_names(getattr(message, "tool_calls", None)))
    return list(dict.fromkeys(names))


def _names(calls: Any) -> Iterable[str]:
    if not isinstance(calls, list):
        return
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        name = call.get("name")
        if name is None and isinstance(call.get("function"), Mapping):
            name = call["function"].get("name")
        if name:
            yield str(name)


def _reward(items: Iterable[Any]) -> float | None:
    reward = None
    for item in items:
        score = item.get("score") if isinstance(item, Mapping) else None
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            reward = float(score)
    return reward


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _channel_json(value: Any) -> Any:
    plain = strip_secrets(_plain(value, 0))
    text = json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
    if len(text) <= MAX_CHANNEL_JSON:
        return plain
    return {"truncated": True, "json_chars": len(text), "preview": text[:MAX_STRING]}


def _plain(value: Any, depth: int) -> Any:
    """A JSON-compatible view of ``value`` with long strings and lists shortened."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            return value[:MAX_STRING] + f"…[{len(value) - MAX_STRING} more chars]"
        return value
    if depth > 12:
        return "…"
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        out = [_plain(v, depth + 1) for v in items[:MAX_ITEMS]]
        if len(items) > MAX_ITEMS:
            out.append(f"…[{len(items) - MAX_ITEMS} more items]")
        return out
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return _plain(dump(exclude_none=True), depth + 1)
        except Exception:
            return _plain(repr(value), depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return _plain(fields, depth + 1)
    return _plain(str(value), depth + 1)
