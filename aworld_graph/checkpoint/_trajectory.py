"""Derive the ``trajectory`` row of one transition (parent checkpoint → new checkpoint).

``trajectory`` is a view over the ``checkpoints`` table (the derived columns are stored on
each checkpoint's row, written in the same transaction). Columns, plain SQLite types, JSON
as text:

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
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import orjson

from .._secrets import may_hold_secrets, strip_secrets


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _fast(value: Any) -> bytes | None:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # orjson writes null; the slow path keeps "nan"/"inf"
    return orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_DATACLASS)


__all__ = ["Transition", "transition_row", "node_from_task_path", "duration_ms", "error_text"]

MAX_STRING = 2_000
MAX_ITEMS = 200
MAX_CHANNEL_JSON = 32_000
_SKIP_PREFIXES = ("branch:", "__pregel")


@dataclasses.dataclass(kw_only=True, slots=True)
class Transition:
    """What one put() changed, before it is encoded into trajectory columns."""

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


def error_text(value: Any) -> str:
    """What an error write says, secrets removed (LangGraph writes the error's ``repr``)."""
    if isinstance(value, BaseException):
        value = f"{type(value).__name__}: {value}"
    text = value if isinstance(value, str) else repr(value)
    return str(strip_secrets(text))


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
    """The derived columns ``(nodes, changes, llm_usage, tool_names, reward)`` as stored."""
    parts = [
        f"{_dumps(channel)}:{_channel_json(value)}"
        for source in (t.changed, t.appended)
        for channel, value in source.items()
        if not channel.startswith(_SKIP_PREFIXES)
    ]
    trace = [r for r in t.appended.get("trace", ()) if isinstance(r, Mapping)]
    messages = t.appended.get("messages", t.changed.get("messages"))
    messages = messages if isinstance(messages, list) else []
    nodes = t.nodes
    if trace:
        nodes = list(dict.fromkeys([*nodes, *(str(r["node"]) for r in trace if r.get("node"))]))
    usage = _usage(trace, messages) if trace or messages else None
    tools = _tool_names(trace, messages) if trace or messages else None
    return (
        _dumps(nodes),
        "{" + ",".join(parts) + "}" if parts else None,
        _dumps(usage) if usage else None,
        _dumps(tools) if tools else None,
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


def _channel_json(value: Any) -> str:
    try:  # short plain JSON without secrets: nothing to shorten or strip
        raw = _fast(value)
    except TypeError:
        raw = None
    if raw is not None and len(raw) <= MAX_STRING and not may_hold_secrets(raw):
        return raw.decode()
    text = _dumps(strip_secrets(_plain(value, 0)))
    if len(text) <= MAX_CHANNEL_JSON:
        return text
    return _dumps({"truncated": True, "json_chars": len(text), "preview": text[:MAX_STRING]})


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (dict, list, tuple, str)) and not value)


def _plain(value: Any, depth: int) -> Any:
    """A JSON view of ``value``: long strings and lists shortened, empty fields dropped."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
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
            fields = {k: v for k, v in dump(exclude_none=True).items() if not _empty(v)}
            return _plain(fields, depth + 1)
        except Exception:
            return _plain(repr(value), depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return _plain(fields, depth + 1)
    return _plain(str(value), depth + 1)
