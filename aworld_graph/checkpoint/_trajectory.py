"""The ``trajectory`` columns of one transition (parent → new checkpoint), stored on the new
checkpoint's row (the view: :mod:`._schema`; its columns: :class:`.TransitionRow`)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import orjson

from ..secrets import may_hold_secrets, strip_secrets

__all__ = ["transition_row", "node_from_task_path", "duration_ms", "error_text"]

MAX_STRING = 2_000
MAX_ITEMS = 200
MAX_CHANNEL_JSON = 32_000
_SKIP_PREFIXES = ("branch:", "__pregel")


def node_from_task_path(task_path: str) -> str | None:
    """The node name of a pull task (``"~__pregel_pull, agent"`` → ``"agent"``)."""
    pull = "~__pregel_pull, "
    return task_path.removeprefix(pull) if task_path.startswith(pull) else None


def error_text(value: Any) -> str:
    """What an error write says, secrets removed (LangGraph writes the error's ``repr``)."""
    if isinstance(value, BaseException):
        value = f"{type(value).__name__}: {value}"
    text = value if isinstance(value, str) else repr(value)
    return str(strip_secrets(text))


def duration_ms(parent_ts: str | None, ts: str) -> float | None:
    """Milliseconds between two ISO timestamps, or ``None`` if either is unknown."""
    if parent_ts is None:
        return None
    try:
        delta = datetime.fromisoformat(ts) - datetime.fromisoformat(parent_ts)
    except (TypeError, ValueError):
        return None
    return round(delta.total_seconds() * 1000.0, 3)


def transition_row(
    nodes: list[str], changed: dict[str, Any], appended: dict[str, list[Any]]
) -> tuple[Any, ...]:
    """The derived columns ``(nodes, changes, llm_usage, tool_names, reward)`` as stored, of
    a step in which ``nodes`` ran (from the writes at the parent), the ``changed`` channels
    got new values and the list channels in ``appended`` grew by those items."""
    parts = [
        f"{_dumps(channel)}:{_channel_json(value)}"
        for source in (changed, appended)
        for channel, value in source.items()
        if not channel.startswith(_SKIP_PREFIXES)
    ]
    trace = [r for r in appended.get("trace", ()) if isinstance(r, Mapping)]
    messages = appended.get("messages", changed.get("messages"))
    messages = messages if isinstance(messages, list) else []
    nodes = list(dict.fromkeys([*nodes, *(str(r["node"]) for r in trace if r.get("node"))]))
    usage = _usage(trace, messages)
    tools = _tool_names(trace, messages)
    return (
        _dumps(nodes),
        "{" + ",".join(parts) + "}" if parts else None,
        _dumps(usage) if usage else None,
        _dumps(tools) if tools else None,
        _reward(appended.get("rewards", ())),
    )


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _usage(trace: list[Mapping[str, Any]], messages: list[Any]) -> dict[str, int] | None:
    """Summed usage of the trace's LLM calls, else of the messages' ``usage_metadata``."""
    names = ("prompt_tokens", "completion_tokens", "total_tokens")
    if trace:
        found, keys = [r.get("usage") for r in trace], names
    else:
        found = [getattr(m, "usage_metadata", None) for m in messages]
        keys = ("input_tokens", "output_tokens", "total_tokens")
    usages = [u for u in found if isinstance(u, Mapping)]
    if not usages:
        return None
    sums = [sum(_int(u.get(key)) for u in usages) for key in keys]
    return {"calls": len(usages), **dict(zip(names, sums, strict=True))}


def _tool_names(trace: list[Mapping[str, Any]], messages: list[Any]) -> list[str]:
    names: list[str] = []
    for record in trace:
        for key in ("tool_calls", "tool_results"):
            names.extend(_names(record.get(key)))
    for m in messages:
        calls = m.get("tool_calls") if isinstance(m, Mapping) else getattr(m, "tool_calls", None)
        names.extend(_names(calls))
    return list(dict.fromkeys(names))


def _names(calls: Any) -> Iterable[str]:
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, Mapping):
            continue
        name = call.get("name")
        if name is None and isinstance(call.get("function"), Mapping):
            name = call["function"].get("name")
        if name:
            yield str(name)


def _reward(items: Iterable[Any]) -> float | None:
    """The score of the last task reward appended (a reward function's, ``Runners.reward``'s);
    a critic's verdict on a node (an item naming the node it ``judged``) is no task reward and
    stays in ``changes`` only."""
    reward = None
    for item in items:
        score = item.get("score") if isinstance(item, Mapping) and not item.get("judged") else None
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            reward = float(score)
    return reward


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _channel_json(value: Any) -> str:
    raw = None  # short plain JSON without secrets needs no shortening or stripping
    if not isinstance(value, float) or math.isfinite(value):  # orjson writes nan as null
        with contextlib.suppress(TypeError):
            raw = orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_DATACLASS)
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
    if isinstance(value, str) and len(value) > MAX_STRING:
        return value[:MAX_STRING] + f"…[{len(value) - MAX_STRING} more chars]"
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
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
