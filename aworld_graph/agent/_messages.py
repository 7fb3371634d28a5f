"""The message list as an agent's turn reads it: public messages, the last assistant reply,
a private turn's input, and tool calls rewritten as text for models with weak tool support."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ..model import ModelResponse
from ..records import Message
from ..state import SwarmState

__all__ = [
    "NUDGE",
    "STOPPED_CALL",
    "answer_stopped_calls",
    "assistant_message",
    "demo_messages",
    "last_assistant",
    "public_messages",
    "render_as_text",
    "tool_used_this_turn",
    "turn_input",
]

NUDGE = "Reply with the final answer only."


def public_messages(messages: list[Message]) -> list[Message]:
    """Messages without the bookkeeping keys (``_agent``, ``_turn``, ``_error``)."""
    return [cast(Message, {k: v for k, v in m.items() if not k.startswith("_")}) for m in messages]


STOPPED_CALL = "Not run: the turn was stopped before this call finished; it has no result."
"""The result a model reads for a tool call of its that never got one."""


def answer_stopped_calls(messages: list[Message]) -> list[Message]:
    """``messages`` with a tool message (:data:`STOPPED_CALL`) after the results of each tool
    call that has none: a run stopped while its tools ran (cancelled, its process killed) and
    new input went on top. A chat API refuses a conversation whose assistant asked for a call
    that no tool message answers, and the model should know the call did not happen."""
    out: list[Message] = []
    waiting: list[str] = []

    def close() -> None:
        out.extend({"role": "tool", "tool_call_id": i, "content": STOPPED_CALL} for i in waiting)
        waiting.clear()

    for message in messages:
        role = message.get("role")
        if role == "tool":
            ident = message.get("tool_call_id")
            if ident in waiting:
                waiting.remove(ident)
        else:
            close()
        out.append(message)
        if role == "assistant":
            waiting.extend(str(c.get("id")) for c in message.get("tool_calls") or [])
    close()
    return out


def last_assistant(messages: list[Message], agent: str | None = None) -> Message | None:
    message: Message  # reversed() of a list reads as an iterator of Any to mypy
    for message in reversed(messages):
        if message.get("role") == "assistant" and (
            agent is None or message.get("_agent", agent) == agent
        ):
            return message
    return None


def tool_used_this_turn(messages: list[Message]) -> bool:
    for message in reversed(messages):
        if message.get("role") == "tool":
            return True
        if message.get("role") == "user":
            return False
    return False


def demo_messages(demos: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Few-shot examples as the turns they stand for: the request, the tool calls (with their
    results) if the example has any, and the answer."""
    out: list[Message] = []
    for i, demo in enumerate(demos):
        question: Message = {"role": "user", "content": str(demo["input"])}
        out.append(question)
        calls = list(demo.get("tool_calls") or [])
        if calls:
            ids = [f"demo{i}_{j}" for j in range(len(calls))]
            asked: Message = {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": ids[j],
                        "type": "function",
                        "function": {
                            "name": str(c["name"]),
                            "arguments": json.dumps(dict(c.get("arguments") or {})),
                        },
                    }
                    for j, c in enumerate(calls)
                ],
            }
            out.append(asked)
            for j, c in enumerate(calls):
                result: Message = {
                    "role": "tool",
                    "tool_call_id": ids[j],
                    "content": str(c.get("result", "")),
                }
                out.append(result)
        answer: Message = {"role": "assistant", "content": str(demo["output"])}
        out.append(answer)
    return out


def render_as_text(messages: list[Message]) -> list[Message]:
    """Rewrite tool calls and results as plain text, for models with weak tool support."""
    out: list[Message] = []
    names: dict[str | None, str] = {}  # call id → tool name
    pending: list[str] = []

    def flush() -> None:
        if pending:
            out.append({"role": "user", "content": " ".join(pending) + " " + NUDGE})
            pending.clear()

    for message in messages:
        role = message.get("role")
        if role == "tool":
            name = names.get(message.get("tool_call_id", ""), "tool")
            pending.append(f"The {name} tool returned: {message.get('content', '')}.")
            continue
        flush()
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for tc in message["tool_calls"]:
                fn = tc.get("function", {})
                names[tc.get("id", "")] = fn.get("name", "tool")
                calls.append(f"{fn.get('name')}({fn.get('arguments', '')})")
            text = (message.get("content") or "").strip()
            out.append(
                {"role": "assistant", "content": (text + "\n" if text else "") + "; ".join(calls)}
            )
        else:
            out.append(message.copy())
    flush()
    return out


def assistant_message(response: ModelResponse) -> Message:
    message: Message = {"role": "assistant", "content": response.content}
    if response.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in response.tool_calls
        ]
    return message


def turn_input(name: str, state: SwarmState) -> str:
    """What a private turn starts from: the task, what people replied at human steps, earlier
    outputs, critic feedback.

    The replies come before the results they are about: a small model often repeats the last
    result it was shown, and a repeat must end where that result ends, not run on into the
    label of a block after it."""
    parts = [str(state.get("input", ""))]
    people = {r.get("node") for r in state.get("trace") or [] if r.get("kind") == "human"}
    outputs = {k: v for k, v in (state.get("outputs") or {}).items() if k != name}
    replies = {k: v for k, v in outputs.items() if k in people}
    results = {k: v for k, v in outputs.items() if k not in people}
    if replies:
        parts.append("\n".join(f"A person replied at {k}: {v}" for k, v in replies.items()))
    if results:
        parts.append(
            "Results from earlier steps:\n" + "\n".join(f"[{k}]\n{v}" for k, v in results.items())
        )
    critiques = [r for r in state.get("rewards", []) if r.get("judged") == name]
    if critiques and critiques[-1].get("status") == "retry":
        c = critiques[-1]
        previous = (state.get("outputs") or {}).get(name, "")
        parts.append(
            f"Your previous answer:\n{previous}\n"
            f"Feedback from {c.get('source')} (score {c.get('score')}): {c.get('feedback')}\n"
            "Write an improved answer."
        )
    return "\n\n".join(p for p in parts if p)
