"""The OpenAI chat fine-tuning validator accepts good samples and names what is wrong in bad ones."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from aworld_graph.export import validate_openai, validate_openai_file

ADD = {
    "type": "function",
    "function": {"name": "add", "parameters": {"type": "object", "properties": {}}},
}


def call(id: str = "c1", name: str = "add", arguments: Any = "{}") -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def good() -> dict[str, Any]:
    return copy.deepcopy(
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "2+3?"},
                {"role": "assistant", "content": None, "tool_calls": [call()]},
                {"role": "tool", "tool_call_id": "c1", "content": "5"},
                {"role": "assistant", "content": "5", "weight": 1},
            ],
            "tools": [ADD],
        }
    )


def test_a_good_sample_passes() -> None:
    assert validate_openai(good()) == []
    parts = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": "yo"},
        ]
    }
    assert validate_openai(parts) == []
    open_call = {
        "messages": [
            {"role": "user", "content": "add"},
            {"role": "assistant", "tool_calls": [call()]},
        ],
        "tools": [ADD],
    }
    assert validate_openai(open_call) == []


def bad(path: str, value: Any) -> dict[str, Any]:
    """``good()`` with one change: ``path`` like ``messages.3.tool_call_id`` set (or deleted)."""
    sample = good()
    *parents, last = path.split(".")
    target: Any = sample
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    key: Any = int(last) if isinstance(target, list) else last
    if value is KeyError:
        del target[key]
    else:
        target[key] = value
    return sample


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        ("not a sample", "must be a JSON object"),
        ({"messages": []}, "non-empty list"),
        (bad("extra", 1), "unknown top-level key 'extra'"),
        (bad("messages.1.role", "human"), "role 'human' is not one of"),
        (bad("messages.1.content", ""), "messages[1]: content is empty"),
        (bad("messages.1.content", 5), "content must be a string or a list"),
        (bad("messages.1.content", [{"type": "pic"}]), "a part needs a type"),
        (bad("messages.1.tool_call_id", "x"), "user message may not have ['tool_call_id']"),
        (
            bad("messages.0", {"role": "assistant", "content": "hi"}),
            "must start with a user message",
        ),
        (bad("messages.3.tool_call_id", "zz"), "answers 'zz', which is no open call"),
        (bad("messages.3", {"role": "user", "content": "and?"}), "are not answered"),
        (bad("messages.2.tool_calls.0.id", ""), "tool call without an id"),
        (bad("messages.2.tool_calls.0.type", "code"), "type must be 'function'"),
        (
            bad("messages.2.tool_calls.0.function.name", "add numbers"),
            "function name 'add numbers'",
        ),
        (bad("messages.2.tool_calls.0.function.name", "mul"), "calls 'mul', which is not among"),
        (bad("messages.2.tool_calls.0.function.arguments", {"a": 1}), "JSON-encoded string"),
        (bad("messages.2.tool_calls.0.function.arguments", "{a: 1"), "not valid JSON"),
        (bad("messages.2.tool_calls.0.function.arguments", "[1]"), "encode a JSON object"),
        (bad("messages.2.tool_calls", []), "non-empty list"),
        (bad("messages.2.content", KeyError), None),  # content may be absent with tool calls
        (bad("messages.4.content", None), "messages[4]: content is empty"),
        (bad("messages.4.weight", 2), "weight must be 0 or 1"),
        (
            bad("messages.4", {"role": "tool", "tool_call_id": "c1", "content": "again"}),
            "no open call",
        ),
        (bad("tools", [ADD, ADD]), "listed twice"),
        (bad("tools.0.function.parameters", {"type": "string"}), "type 'object'"),
        (bad("tools.0", {"name": "add"}), "must be {'type': 'function'"),
    ],
)
def test_bad_samples_are_rejected_with_a_reason(sample: Any, message: str | None) -> None:
    errors = validate_openai(sample)
    if message is None:
        assert errors == []
    else:
        assert any(message in e for e in errors), errors


def test_sft_rules_assistant_last_and_something_to_learn() -> None:
    sample = good()
    sample["messages"] = sample["messages"][:4]  # ends on a complete tool exchange: fine
    assert validate_openai(sample) == []
    sample["messages"].append({"role": "user", "content": "and now?"})
    assert any(
        e.startswith("the last message must be the assistant's (the reply to learn)")
        for e in validate_openai(sample)
    )
    assert validate_openai(sample, require_assistant_last=False) == []
    silent = good()
    silent["messages"][2]["weight"] = 0
    silent["messages"][4]["weight"] = 0
    assert "no assistant message to learn from (all have weight 0)" in validate_openai(silent)
    late_system = good()
    late_system["messages"].insert(2, {"role": "system", "content": "late"})
    assert any("system messages must come before" in e for e in validate_openai(late_system))
    dup = good()
    dup["messages"][4] = {"role": "assistant", "tool_calls": [call("c1")]}
    assert any("used twice" in e for e in validate_openai(dup))


def test_file_validation_reports_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text(
        json.dumps(good())
        + "\n\nnot json\n"
        + json.dumps({"messages": [{"role": "user", "content": "x"}]})
        + "\n"
    )
    problems = list(validate_openai_file(path))
    assert [line for line, _ in problems] == [3, 4]
    assert problems[0][1][0].startswith("not JSON")
    assert problems[1][1][0].startswith("the last message must be the assistant's")
