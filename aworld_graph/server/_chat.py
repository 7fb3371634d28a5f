"""Messages as LangChain's chat UIs read them: a view made where values and messages leave
the server, for the workflows of this library (a LangGraph application's own messages are
LangChain's already and go out as they are).

The state keeps OpenAI-style messages with bookkeeping keys (``_agent``, ``_turn``,
``_error``); clients get LangChain's shape (``type`` human/ai/tool/system, an ``id``,
``tool_calls`` with ``args`` as objects, ``tool_call_id`` and ``name`` on a tool message),
with the OpenAI ``role`` kept beside ``type`` for clients that read it. The view is the
conversation a person had: the copy of the task an agent takes into a private turn and the
prompt a workflow writes for its next agent (user messages that open an agent's turn,
``_turn``) are not shown; a person's reply at a human step is.

Ids are made from the state alone, so every read of a thread gives the same ones and a
streamed chunk's id is known before its message is stored: an agent's ``n``-th reply is
``ai-AGENT-n``, its ``n``-th tool result ``tool-AGENT-n``, a human step's ``n``-th reply
``human-NODE-n``; a message no node wrote (the task input, an edit) is ``TYPE-i`` by its
place ``i`` in the stored list (which only grows).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "chat_chunk",
    "chat_messages",
    "chat_updates",
    "chat_values",
    "next_reply_id",
    "stored_calls",
]

_TYPES = {"user": "human", "assistant": "ai", "tool": "tool", "system": "system"}


class _Ids:
    """Counts the messages of a stored list in order, naming each as it comes."""

    def __init__(self, before: Iterable[Any] = ()) -> None:
        self.seen = Counter[tuple[str, str]]()
        self.index = 0
        self.calls: dict[str, str] = {}
        """Tool call id → tool name, from the replies counted so far."""
        for message in before:
            self.name(message)

    def name(self, message: Any) -> str:
        """The id of ``message``, the next of the list."""
        index, self.index = self.index, self.index + 1
        if not isinstance(message, Mapping):
            return f"msg-{index}"
        kind = _TYPES.get(str(message.get("role")), "msg")
        for call in message.get("tool_calls") or ():
            if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
                self.calls[str(call.get("id"))] = str(call["function"].get("name"))
        author = message.get("_agent")
        if not isinstance(author, str) or message.get("_turn") and kind == "human":
            return f"{kind}-{index}"
        self.seen[kind, author] += 1
        return f"{kind}-{author}-{self.seen[kind, author]}"


def _args(raw: Any) -> tuple[dict[str, Any] | None, str]:
    """A tool call's arguments as an object, or ``None`` and why not."""
    if isinstance(raw, Mapping):
        return dict(raw), ""
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except ValueError as exc:
        return None, f"the arguments are not JSON: {exc}"
    if isinstance(parsed, dict):
        return parsed, ""
    return None, "the arguments are not a JSON object"


def _calls(message: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """An assistant message's calls as LangChain's ``tool_calls`` and ``invalid_tool_calls``."""
    good: list[dict[str, Any]] = []
    bad: list[dict[str, Any]] = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        inner = call.get("function")
        fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else call
        name, raw = fn.get("name"), fn.get("arguments", fn.get("args"))
        args, error = _args(raw)
        if args is None:
            bad.append(
                {"id": call.get("id"), "name": name, "args": raw, "error": error}
                | {"type": "invalid_tool_call"}
            )
        else:
            good.append({"id": call.get("id"), "name": name, "args": args, "type": "tool_call"})
    return good, bad


def _shown(message: Any, ident: str, calls: Mapping[str, str]) -> dict[str, Any] | None:
    """``message`` in LangChain's shape, or ``None`` when a person did not see it."""
    if not isinstance(message, Mapping):
        return None
    role = str(message.get("role"))
    if "type" in message and "role" not in message:  # LangChain's shape already
        return {**message, "id": message.get("id") or ident}
    kind = _TYPES.get(role)
    if kind == "human" and message.get("_turn"):  # the input of an agent's private turn
        return None
    content = message.get("content")
    out: dict[str, Any] = {
        "type": kind or role,
        "role": role,
        "id": ident,
        "content": "" if content is None else content,
        "additional_kwargs": {},
        "response_metadata": {},
    }
    author = message.get("_agent")
    if kind in ("human", "ai") and isinstance(author, str):
        out["name"] = author
    elif message.get("name") is not None:
        out["name"] = message["name"]
    if kind == "ai":
        out["tool_calls"], out["invalid_tool_calls"] = _calls(message)
    if kind == "tool":
        call = message.get("tool_call_id")
        out["tool_call_id"] = call
        out["name"] = message.get("name") or calls.get(str(call))
        out["status"] = "error" if message.get("_error") else "success"
    return out


def chat_messages(messages: Any) -> Any:
    """A state's message list as the conversation a person had, in LangChain's shape."""
    if not isinstance(messages, list):
        return messages
    ids = _Ids()
    out = []
    for message in messages:
        shown = _shown(message, ids.name(message), ids.calls)
        if shown is not None:
            out.append(shown)
    return out


def chat_values(values: Any, app: bool = False) -> Any:
    """A state's values with their ``messages`` as :func:`chat_messages` shows them (an
    application's, ``app``, as they are)."""
    if app or not isinstance(values, Mapping) or "messages" not in values:
        return values
    return {**values, "messages": chat_messages(values["messages"])}


def chat_updates(updates: Any, before: Any, app: bool = False) -> Any:
    """An ``updates`` stream part (``{node: writes}``) with the messages each node wrote
    shown as in the state after them; ``before``: the state's messages before them."""
    if app or not isinstance(updates, Mapping):
        return updates
    ids = _Ids(before if isinstance(before, list) else ())
    out: dict[str, Any] = {}
    for node, writes in updates.items():
        if not isinstance(writes, Mapping) or "messages" not in writes:
            out[node] = writes
            continue
        wrote = writes["messages"]
        items = wrote if isinstance(wrote, list) else [] if wrote is None else [wrote]
        shown = [_shown(m, ids.name(m), ids.calls) for m in items]
        out[node] = {**writes, "messages": [m for m in shown if m is not None]}
    return out


def next_reply_id(before: Any, agent: str) -> str:
    """The id agent ``agent``'s next reply will have, in a state whose messages are
    ``before``: what its streamed chunks carry, so they merge into it."""
    ids = _Ids(before if isinstance(before, list) else ())
    return f"ai-{agent}-{ids.seen['ai', agent] + 1}"


def chat_chunk(
    ident: str,
    agent: str,
    content: str,
    calls: Iterable[Mapping[str, Any]] = (),
    usage: Any = None,
) -> dict[str, Any]:
    """A streamed ``AIMessageChunk`` of agent ``agent``'s reply ``ident``: some of its text,
    or its tool calls (``{"id", "name", "arguments"}``, as ``tool_calls`` and as
    ``tool_call_chunks``)."""
    good, bad = _calls({"tool_calls": [{"id": c.get("id"), "function": c} for c in calls]})
    pieces = [
        {
            "id": c["id"],
            "name": c["name"],
            "args": json.dumps(c["args"]) if "error" not in c else c["args"],
            "index": i,
            "type": "tool_call_chunk",
        }
        for i, c in enumerate([*good, *bad])
    ]
    chunk: dict[str, Any] = {
        "type": "AIMessageChunk",
        "id": ident,
        "name": agent,
        "content": content,
        "additional_kwargs": {},
        "response_metadata": {},
        "tool_calls": good,
        "invalid_tool_calls": bad,
        "tool_call_chunks": pieces,
    }
    if isinstance(usage, Mapping):  # LangChain's names for the OpenAI counts
        chunk["usage_metadata"] = {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
            "total_tokens": usage.get("total_tokens", 0),
        }
    return chunk


def stored_calls(calls: Any) -> Any:
    """Tool calls a client sends in LangChain's shape (``{"id", "name", "args"}``) as the
    state keeps them (OpenAI's ``{"id", "type": "function", "function": {"name",
    "arguments"}}``); OpenAI's as they are; none (an empty list) as ``None``."""
    if not isinstance(calls, list):
        return calls
    out: list[Any] = []
    for call in calls:
        if isinstance(call, Mapping) and "function" not in call and "name" in call:
            args = call.get("args")
            text = args if isinstance(args, str) else json.dumps(args or {})
            fn = {"name": str(call["name"]), "arguments": text}
            out.append({"id": call.get("id"), "type": "function", "function": fn})
        else:
            out.append(call)
    return out or None
