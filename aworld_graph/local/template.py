"""How the embedded SmolLM2 model sees a chat: its ChatML template, tools and tool calls as text.

Pure string work, no llama.cpp (the handler that generates is :mod:`.handler`). Nothing
is HTML-escaped: quotes, ``<``, ``>`` and ``&`` reach the model as written.

With tools offered, the system message lists them and says how to reply::

    You have these tools:
    - calculator: Evaluate an arithmetic expression.
      Arguments: {"expression": string}

    To use a tool, reply "Use <tool>: <arguments as JSON>", for example: Use calculator: ...
    To reply without a tool, start with "Reply:".

A reply is then either ``Use calculator: {"expression": "25*4"}`` (a call) or
``Reply: 100`` (text). Earlier turns are rendered the same way, so the model sees its own
calls, a demo's calls and its text answers in the one format it is asked to write: an
assistant message with ``tool_calls`` becomes ``Use <name>: <arguments>`` lines, a ``tool``
message becomes a user turn ``The <name> tool returned: <result>``, and an assistant text
turn becomes ``Reply: <text>``. Without tools the prompt is SmolLM2's plain ChatML.

The format was chosen because the model prefers ``Use calculator:`` to ``Reply:`` on arithmetic
and the text reply elsewhere (the measurements are in docs/local-model.md); llama-cpp-python's
``message:`` / ``functions.<name>:`` labels made it prefer ``message:`` on arithmetic too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "ANSWER_MARK",
    "CHAT_FORMAT",
    "DEFAULT_SYSTEM",
    "IM_END",
    "IM_START",
    "call_mark",
    "call_text",
    "content_text",
    "render",
    "scaffolding",
    "tools_block",
]

CHAT_FORMAT = "aworld-smollm2"
"""The name the project's chat handler is registered under in llama-cpp-python."""
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
"""The system prompt SmolLM2's own template adds when a chat has none."""
ANSWER_MARK = "Reply:"
"""How a text reply starts while tools are offered (stripped from the returned content)."""


def call_mark(name: str) -> str:
    """How a call of tool ``name`` starts."""
    return f"Use {name}:"


def call_text(name: str, arguments: str) -> str:
    """A tool call as the model writes it: ``Use calculator: {"expression": "2+3"}``."""
    return f"{call_mark(name)} {arguments.strip()}"


def content_text(content: object) -> str:
    """A message's content as text (OpenAI content parts are joined; ``None`` is empty)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)


_TYPE_NAMES = {"string", "number", "integer", "boolean", "array", "object", "null"}


def _type_name(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        names = [k for k in kind if isinstance(k, str) and k in _TYPE_NAMES]
        return " or ".join(names) or "any"
    if isinstance(kind, str) and kind in _TYPE_NAMES:
        if kind == "array" and isinstance(schema.get("items"), Mapping):
            return f"array of {_type_name(schema['items'])}"
        return kind
    if "enum" in schema and isinstance(schema["enum"], list):
        return " or ".join(json.dumps(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            names = [_type_name(o) for o in options if isinstance(o, Mapping)]
            return " or ".join(dict.fromkeys(names)) or "any"
    return "any"


def _properties(parameters: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    props = parameters.get("properties")
    required = parameters.get("required")
    return (
        dict(props) if isinstance(props, Mapping) else {},
        [r for r in required if isinstance(r, str)] if isinstance(required, list) else [],
    )


def _signature(parameters: Mapping[str, Any]) -> str:
    """``{"expression": string, "path": string (optional)}``."""
    props, required = _properties(parameters)
    fields = []
    for name, schema in props.items():
        kind = _type_name(schema) if isinstance(schema, Mapping) else "any"
        fields.append(f"{json.dumps(name)}: {kind}" + ("" if name in required else " (optional)"))
    return "{" + ", ".join(fields) + "}"


_PLACEHOLDERS: dict[str, Any] = {
    "string": "...",
    "number": 0,
    "integer": 0,
    "boolean": True,
    "array": [],
    "object": {},
}


def _example_arguments(parameters: Mapping[str, Any]) -> str:
    props, required = _properties(parameters)
    example = {}
    for name in required or list(props)[:1]:
        schema = props.get(name)
        kind = schema.get("type") if isinstance(schema, Mapping) else None
        example[name] = _PLACEHOLDERS.get(kind, "...") if isinstance(kind, str) else "..."
    return json.dumps(example, ensure_ascii=False)


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    fn = tool.get("function", tool)
    return fn if isinstance(fn, Mapping) else {}


def tools_block(tools: Sequence[Mapping[str, Any]]) -> str:
    """The part of the system message that offers ``tools`` (OpenAI ``tools=[...]`` items)."""
    lines = ["You have these tools:"]
    first: Mapping[str, Any] | None = None
    for tool in tools:
        fn = _function(tool)
        name = str(fn.get("name", ""))
        params = fn.get("parameters")
        params = params if isinstance(params, Mapping) else {}
        first = first or fn
        description = str(fn.get("description") or "").strip()
        lines.append(f"- {name}: {description}" if description else f"- {name}")
        lines.append(f"  Arguments: {_signature(params)}")
    example = ""
    if first is not None:
        params = first.get("parameters")
        params = params if isinstance(params, Mapping) else {}
        example = ", for example: " + call_text(
            str(first.get("name", "")), _example_arguments(params)
        )
    lines += [
        "",
        f'To use a tool, reply "{call_mark("<tool>")} <arguments as JSON>"{example}',
        f'To reply without a tool, start with "{ANSWER_MARK}".',
    ]
    return "\n".join(lines)


def _result_mark(name: str) -> str:
    """How a tool's result is shown to the model (a user turn)."""
    return f"The {name} tool returned:"


def scaffolding(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
) -> list[str]:
    """The phrases of the prompt machinery for ``messages`` and ``tools``: the labels of a reply,
    a call and a tool result, and the lines of the tools block. A small model echoes them; the
    handler drops one that opens a reply and ends the reply before any other, so none reaches
    an answer."""
    names = [str(_function(t).get("name", "")) for t in tools or ()]
    for message in messages:
        if message.get("role") == "tool" and message.get("name"):
            names.append(str(message["name"]))
        for call in message.get("tool_calls") or ():
            if isinstance(call, Mapping):
                names.append(str((call.get("function") or {}).get("name", "")))
    names = [n for n in dict.fromkeys(names) if n]
    if not names:
        return []
    phrases = [
        ANSWER_MARK,
        "You have these tools:",
        f'To use a tool, reply "{call_mark("<tool>")}',
        "To reply without a tool, start with",
    ]
    for name in names:
        phrases += [call_mark(name), _result_mark(name)]
    return phrases


def _turn(role: str, text: str) -> str:
    return f"{IM_START}{role}\n{text}{IM_END}\n"


def render(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
) -> str:
    """The prompt for ``messages`` (OpenAI format), ending with the assistant's turn opened.

    ``tools`` (when not empty) are listed in the system message and every earlier assistant
    turn is written in the reply format; tool calls and results are rendered as described in
    the module docstring whether or not tools are offered now."""
    offered = bool(tools)
    out: list[str] = []
    names: dict[str, str] = {}
    results: list[str] = []

    def flush_results() -> None:
        if results:
            out.append(_turn("user", "\n".join(results)))
            results.clear()

    system_seen = False
    for index, message in enumerate(messages):
        role = str(message.get("role", "user"))
        text = content_text(message.get("content"))
        if role == "tool":
            name = names.get(
                str(message.get("tool_call_id", "")), str(message.get("name") or "tool")
            )
            results.append(f"{_result_mark(name)} {text.strip()}")
            continue
        flush_results()
        if role in ("system", "developer") and index == 0:
            system_seen = True
            block = tools_block(tools) if offered and tools else ""
            out.append(_turn("system", text + ("\n\n" + block if text and block else block)))
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            lines = []
            if text.strip():
                lines.append(f"{ANSWER_MARK} {text.strip()}" if offered and not calls else text)
            for i, call in enumerate(calls):
                fn = call.get("function", {}) if isinstance(call, Mapping) else {}
                name = str(fn.get("name", "tool"))
                names[str(call.get("id", f"call_{i}"))] = name
                arguments = fn.get("arguments", "")
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments, ensure_ascii=False)
                lines.append(call_text(name, arguments or "{}"))
            out.append(_turn("assistant", "\n".join(lines)))
        else:
            out.append(_turn("system" if role in ("system", "developer") else role, text))
    flush_results()
    if not system_seen:
        block = tools_block(tools) if offered and tools else ""
        out.insert(0, _turn("system", DEFAULT_SYSTEM + ("\n\n" + block if block else "")))
    if add_generation_prompt:
        out.append(f"{IM_START}assistant\n")
    return "".join(out)
