"""What goes over the wire: JSON shapes of the LangGraph Platform API, input parsing, SSE frames.

Every value leaving the server passes :func:`clean`: plain JSON types only, and nothing of a
secret (:func:`~aworld_graph.secrets.strip_secrets`).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

import orjson

from ..run import pending_nodes
from ..secrets import strip_secrets
from ._chat import stored_calls

__all__ = [
    "ApiError",
    "checkpoint_ref",
    "clean",
    "dumps",
    "input_text",
    "jsonable",
    "now",
    "snapshot_json",
    "sse",
    "to_messages",
]


class ApiError(Exception):
    """A request the server answers with a 4xx JSON error: ``{"code", "message"}``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def now() -> str:
    """The current time, ISO-8601 UTC (as LangGraph's API writes timestamps)."""
    return datetime.now(UTC).isoformat()


_SCALARS = frozenset({str, int, float, bool, type(None)})


def jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` as plain JSON types: containers recursively, LangGraph interrupts as
    ``{"value", "id"}`` (and ``response_schema`` where they have one), dataclasses and
    pydantic models as dicts, anything else as text."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if _depth < 64 and (kind is dict or kind is list):  # what states are made of: no detour
        deeper = _depth + 1
        if kind is dict:
            return {
                str(k): v if type(v) in _SCALARS else jsonable(v, deeper) for k, v in value.items()
            }
        return [v if type(v) in _SCALARS else jsonable(v, deeper) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if _depth > 64:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, _depth + 1) for v in value]
    if type(value).__name__ == "Interrupt" and hasattr(value, "value"):
        found = {"value": jsonable(value.value, _depth + 1), "id": str(getattr(value, "id", ""))}
        if hasattr(value, "response_schema"):  # LangGraph's newer interrupts: as its server
            found["response_schema"] = jsonable(value.response_schema, _depth + 1)
        return found
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return jsonable(value.value, _depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value), _depth + 1)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return jsonable(dump(mode="json"), _depth + 1)
    return str(value)


def clean(value: Any) -> Any:
    """JSON-safe and secret-free: what every response and stream event carries."""
    return strip_secrets(jsonable(value))


def checkpoint_ref(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A LangGraph config as the API's ``Checkpoint`` object."""
    if not config:
        return None
    conf = config.get("configurable") or {}
    return {
        "thread_id": conf.get("thread_id"),
        "checkpoint_ns": conf.get("checkpoint_ns", ""),
        "checkpoint_id": conf.get("checkpoint_id"),
        "checkpoint_map": conf.get("checkpoint_map"),
    }


def _interrupts(items: Any) -> list[dict[str, Any]]:
    return [jsonable(i) for i in items or ()]


def snapshot_json(snapshot: Any, thread_id: str) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` as the API's ``ThreadState``."""
    ref = checkpoint_ref(snapshot.config) or {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": None,
        "checkpoint_map": None,
    }
    return {
        "values": clean(snapshot.values or {}),
        "next": pending_nodes(snapshot),
        "checkpoint": ref,
        "metadata": clean(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "parent_checkpoint": checkpoint_ref(snapshot.parent_config),
        "tasks": [
            {
                "id": t.id,
                "name": t.name,
                "error": None if t.error is None else str(t.error),
                "interrupts": _interrupts(t.interrupts),
                "checkpoint": None,
                "state": None,
                "result": clean(t.result) if getattr(t, "result", None) is not None else None,
            }
            for t in snapshot.tasks or ()
        ],
        "interrupts": _interrupts(snapshot.interrupts),
    }


_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant"}
_ROLES |= {"system": "system", "tool": "tool"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks: [{"type": "text", "text": ...}, ...]
        return "".join(
            str(b.get("text", "")) if isinstance(b, Mapping) else str(b) for b in content
        )
    return "" if content is None else str(content)


def to_messages(items: Any, field: str) -> list[dict[str, Any]]:
    """LangChain-style (``{"type": "human"}``) or OpenAI-style (``{"role": "user"}``) messages,
    or plain strings, as the OpenAI-style dicts the graph state keeps."""
    if not isinstance(items, list):
        raise ApiError(422, "invalid_input", f"{field} must be a list of messages")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            out.append({"role": "user", "content": item})
            continue
        if not isinstance(item, Mapping):
            raise ApiError(422, "invalid_input", f"{field}[{i}] must be an object or a string")
        role = _ROLES.get(str(item.get("role") or item.get("type") or "").lower())
        if role is None:
            raise ApiError(
                422,
                "invalid_input",
                f"{field}[{i}] has no known role or type (use 'user'/'human', 'assistant'/'ai', "
                "'system' or 'tool')",
            )
        message = {"role": role, "content": _text(item.get("content"))}
        for key in ("tool_call_id", "name", "tool_calls"):
            if item.get(key) is not None:
                message[key] = item[key]
        if "tool_calls" in message:  # LangChain's shape too, as the server gives it out
            message["tool_calls"] = stored_calls(message["tool_calls"])
            if message["tool_calls"] is None:
                del message["tool_calls"]
        out.append(message)
    return out


def input_text(value: Any) -> str | None:
    """The task input of a run request's ``input``: ``{"messages": [...]}`` (the last user
    message), ``{"input": "..."}``, or a plain string; ``None`` when there is none."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if not isinstance(value, Mapping):
        raise ApiError(
            422,
            "invalid_input",
            'input must be {"messages": [{"role": "user", "content": ...}]} or {"input": "..."}',
        )
    if isinstance(value.get("input"), str):
        return str(value["input"])
    if "messages" in value:
        users = [m for m in to_messages(value["messages"], "input.messages") if m["role"] == "user"]
        if users:
            return str(users[-1]["content"])
    raise ApiError(
        422,
        "invalid_input",
        'input has no user message: send {"messages": [{"role": "user", "content": "..."}]} '
        'or {"input": "..."}',
    )


def dumps(data: Any) -> bytes:
    """A clean value as compact UTF-8 JSON: orjson's (the JSON library LangGraph's client
    reads with), else – for what orjson refuses, such as an integer over 64 bits or a lone
    surrogate – the standard library's."""
    try:
        return orjson.dumps(data)
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(data, separators=(",", ":")).encode()


def sse(event: str, data: Any, ident: str | None = None) -> bytes:
    """One server-sent event."""
    head = f"id: {ident}\n" if ident is not None else ""
    return f"{head}event: {event}\ndata: ".encode() + dumps(data) + b"\n\n"
