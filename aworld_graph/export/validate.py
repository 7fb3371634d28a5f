"""A validator for OpenAI chat fine-tuning samples (the project's own reading of the rules).

>>> validate_openai({"messages": [{"role": "user", "content": "hi"},
...                               {"role": "assistant", "content": "hello"}]})
[]

Rules checked, each reported as one line naming the message (``messages[3]``) and the fix:

* the sample is an object with a non-empty ``messages`` list; top-level keys are
  ``messages``, ``tools``, ``parallel_tool_calls`` (and legacy ``functions``);
* roles are ``system``/``developer``/``user``/``assistant``/``tool``; each role has only
  its own keys; system messages come first; the conversation proper starts with ``user``;
* ``content`` is a string or a list of typed parts; only an assistant message with
  ``tool_calls`` may leave it empty or null; ``weight`` is 0 or 1;
* every tool call has a unique non-empty ``id``, ``type: function``, a valid function
  name and ``arguments`` that are a JSON object encoded as a string;
* every tool message answers a call of the assistant message before it, each call is
  answered exactly once and before the conversation goes on (calls in the final assistant
  message may stay open: that teaches calling);
* called functions are among ``tools`` when ``tools`` is given; tool names are unique and
  parameters are JSON-schema objects;
* (for SFT) the last message is an assistant message – or the tool results that answer the
  calls of the last assistant message (a complete tool exchange) – and some assistant
  message has weight 1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["validate_openai", "validate_openai_file"]

_TOP = {"messages", "tools", "parallel_tool_calls", "functions"}
_ROLE_KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "weight", "refusal", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
}
_FN_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_PART_TYPES = {"text", "image_url", "input_audio", "file", "refusal"}


def _content_errors(where: str, message: dict[str, Any], may_be_empty: bool) -> list[str]:
    content = message.get("content")
    if content is None or content == "":
        return [] if may_be_empty else [f"{where}: content is empty; give the message text"]
    if isinstance(content, str):
        return []
    if isinstance(content, list):
        errors = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in _PART_TYPES:
                errors.append(
                    f"{where}.content[{j}]: a part needs a type among {sorted(_PART_TYPES)}"
                )
            elif part["type"] == "text" and not isinstance(part.get("text"), str):
                errors.append(f"{where}.content[{j}]: a text part needs a string 'text'")
        return errors
    return [f"{where}: content must be a string or a list of parts, not {type(content).__name__}"]


def _call_errors(where: str, call: Any, seen: set[str], known: set[str] | None) -> list[str]:
    if not isinstance(call, dict):
        return [f"{where}: a tool call must be an object"]
    errors = []
    cid = call.get("id")
    if not isinstance(cid, str) or not cid:
        errors.append(f"{where}: tool call without an id; give each call a unique id")
    elif cid in seen:
        errors.append(f"{where}: tool call id {cid!r} is used twice; ids must be unique")
    else:
        seen.add(cid)
    if call.get("type") != "function":
        errors.append(f"{where}: tool call type must be 'function'")
    fn = call.get("function")
    if not isinstance(fn, dict):
        return [*errors, f"{where}: tool call needs a 'function' object with name and arguments"]
    name = fn.get("name")
    if not isinstance(name, str) or not _FN_NAME.match(name):
        errors.append(f"{where}: function name {name!r} must match [a-zA-Z0-9_-]{{1,64}}")
    elif known is not None and name not in known:
        errors.append(f"{where}: calls {name!r}, which is not among the sample's tools")
    args = fn.get("arguments")
    if not isinstance(args, str):
        errors.append(
            f"{where}: arguments must be a JSON-encoded string, not {type(args).__name__}"
        )
    else:
        try:
            if not isinstance(json.loads(args), dict):
                errors.append(f"{where}: arguments must encode a JSON object")
        except ValueError:
            errors.append(f"{where}: arguments are not valid JSON: {args[:60]!r}")
    return errors


def _tools_errors(tools: Any) -> tuple[list[str], set[str] | None]:
    if tools is None:
        return [], None
    if not isinstance(tools, list):
        return ["tools: must be a list of tool specs"], None
    errors, names = [], set()
    for i, spec in enumerate(tools):
        fn = spec.get("function") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or spec.get("type") != "function" or not isinstance(fn, dict):
            errors.append(f"tools[{i}]: must be {{'type': 'function', 'function': {{...}}}}")
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not _FN_NAME.match(name):
            errors.append(f"tools[{i}]: function name {name!r} must match [a-zA-Z0-9_-]{{1,64}}")
        elif name in names:
            errors.append(f"tools[{i}]: tool {name!r} is listed twice")
        else:
            names.add(name)
        params = fn.get("parameters")
        if params is not None and (not isinstance(params, dict) or params.get("type") != "object"):
            errors.append(f"tools[{i}]: parameters must be a JSON schema with type 'object'")
    return errors, names


def validate_openai(sample: Any, *, require_assistant_last: bool = True) -> list[str]:
    """Everything wrong with one chat fine-tuning sample (empty list: valid)."""
    if not isinstance(sample, dict):
        return ["sample must be a JSON object with 'messages'"]
    errors = [
        f"unknown top-level key {k!r} (allowed: {sorted(_TOP)})" for k in sample if k not in _TOP
    ]
    messages = sample.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*errors, "messages: must be a non-empty list"]
    tool_errors, known = _tools_errors(sample.get("tools"))
    errors += tool_errors
    pending: dict[str, str] = {}  # open call id -> where it was made
    seen: set[str] = set()
    started = False
    trained = False
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            errors.append(f"{where}: must be an object")
            continue
        role = message.get("role")
        if role not in _ROLE_KEYS:
            errors.append(f"{where}: role {role!r} is not one of {sorted(_ROLE_KEYS)}")
            continue
        extra = sorted(set(message) - _ROLE_KEYS[role])
        if extra:
            errors.append(f"{where}: {role} message may not have {extra}")
        if role != "tool" and pending:
            errors.append(
                f"{where}: tool call(s) {sorted(pending)} are not answered; add a tool message "
                "for each call right after the assistant message"
            )
            pending.clear()
        if role in ("system", "developer"):
            if started:
                errors.append(f"{where}: system messages must come before the conversation")
            errors += _content_errors(where, message, False)
            continue
        if not started and role != "user":
            errors.append(f"{where}: the conversation must start with a user message, not {role}")
        started = True
        if role == "user":
            errors += _content_errors(where, message, False)
        elif role == "assistant":
            calls = message.get("tool_calls")
            if calls is not None and (not isinstance(calls, list) or not calls):
                errors.append(f"{where}: tool_calls must be a non-empty list (or absent)")
                calls = None
            errors += _content_errors(where, message, bool(calls))
            weight = message.get("weight", 1)
            if weight not in (0, 1) or isinstance(weight, bool):
                errors.append(f"{where}: weight must be 0 or 1")
            trained = trained or weight == 1
            for j, call in enumerate(calls or []):
                errors += _call_errors(f"{where}.tool_calls[{j}]", call, seen, known)
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    pending[call["id"]] = where
            if i == len(messages) - 1:
                pending.clear()  # calls of the final message may stay open
        else:  # tool
            cid = message.get("tool_call_id")
            if cid not in pending:
                errors.append(
                    f"{where}: tool message answers {cid!r}, which is no open call of the "
                    "assistant message before it"
                )
            else:
                del pending[cid]
            errors += _content_errors(where, message, True)
    if pending:
        errors.append(f"tool call(s) {sorted(pending)} are never answered")
    if require_assistant_last and not _ends_on_assistant(messages):
        errors.append(
            "the last message must be the assistant's (the reply to learn), or the tool "
            "results that answer its calls"
        )
    if require_assistant_last and not trained:
        errors.append("no assistant message to learn from (all have weight 0)")
    return errors


def _ends_on_assistant(messages: list[Any]) -> bool:
    """The conversation ends with an assistant message, maybe followed by tool results."""
    for message in reversed(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role != "tool":
            return role == "assistant"
    return False


def validate_openai_file(path: str | Path, **kwargs: Any) -> Iterator[tuple[int, list[str]]]:
    """``(line number, errors)`` for each invalid line of a JSONL file."""
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except ValueError as exc:
                yield number, [f"not JSON: {exc}"]
                continue
            errors = validate_openai(sample, **kwargs)
            if errors:
                yield number, errors
