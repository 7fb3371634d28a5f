"""Content for spans, in the GenAI conventions' JSON shapes, with secrets stripped.

Only used with ``configure(capture_content=True)``: chat messages become
``gen_ai.system_instructions`` / ``gen_ai.input.messages`` / ``gen_ai.output.messages``
(role and typed parts), tool arguments and results become text. Every value goes through
:func:`~aworld_graph.secrets.strip_secrets` first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..secrets import strip_secrets

__all__ = ["as_json", "input_messages", "output_messages", "system_instructions", "text"]

LIMIT = 8000
"""Longest text one content attribute keeps (characters)."""


def text(value: Any, limit: int = LIMIT) -> str:
    """``value`` as secret-free text (JSON for containers), cut at ``limit`` characters."""
    if isinstance(value, str):
        try:  # JSON text (tool arguments): strip by key, not only by pattern
            value = json.loads(value)
        except ValueError:
            return _cut(str(strip_secrets(value)), limit)
        if isinstance(value, str):
            return _cut(str(strip_secrets(value)), limit)
    return _cut(as_json(value), limit)


def as_json(value: Any) -> str:
    """Secret-free JSON text of ``value``."""
    return json.dumps(strip_secrets(value), ensure_ascii=False, default=str)


def _cut(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[:limit] + "…"


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if message.get("role") == "tool":
        return [
            {
                "type": "tool_call_response",
                "id": message.get("tool_call_id"),
                "response": message.get("content"),
            }
        ]
    content = message.get("content")
    if content:
        parts.append({"type": "text", "content": content})
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": fn.get("name"),
                "arguments": _arguments(fn.get("arguments")),
            }
        )
    return parts


def system_instructions(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The system messages' text parts, or ``None`` when there are none."""
    parts = [
        {"type": "text", "content": m.get("content") or ""}
        for m in messages
        if m.get("role") == "system"
    ]
    return _cut(as_json(parts), LIMIT * 4) if parts else None


def input_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    """The conversation without its system messages."""
    shaped = [
        {"role": m.get("role"), "parts": _parts(m)} for m in messages if m.get("role") != "system"
    ]
    return _cut(as_json(shaped), LIMIT * 4)


def output_messages(response: Any) -> str:
    """A model reply (:class:`~aworld_graph.model.ModelResponse`) as one output message."""
    message = {
        "content": response.content,
        "tool_calls": [
            {"id": c.id, "function": {"name": c.name, "arguments": c.arguments}}
            for c in response.tool_calls
        ],
    }
    shaped = [
        {"role": "assistant", "parts": _parts(message), "finish_reason": response.finish_reason}
    ]
    return _cut(as_json(shaped), LIMIT * 4)
