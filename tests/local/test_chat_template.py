"""The embedded model's prompt, tool-argument grammar and stop-on-disconnect middleware,
without the model (the real-model checks are in test_local_serving.py)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import threading
from typing import Any

import pytest

from aworld_graph.local.grammar import arguments_plan
from aworld_graph.local.template import (
    ANSWER_MARK,
    DEFAULT_SYSTEM,
    call_text,
    render,
    tools_block,
)

CALC = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": 'Evaluate an arithmetic expression, e.g. "2 * (3 + 4)".',
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}
NASTY = """He said "a < b && c > d" & it's <b>fine</b>"""

needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed"
)


def demo() -> list[dict[str, Any]]:
    """A conversation with a tool call and its result, as a demo would carry it."""
    return [
        {"role": "system", "content": "You are a careful math assistant."},
        {"role": "user", "content": "What is 12*3?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "12*3"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "36"},
        {"role": "assistant", "content": "36"},
        {"role": "user", "content": "What is 25*4?"},
    ]


def test_without_tools_the_prompt_is_smollm2s_own_template() -> None:
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert render(messages) == (
        f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    with_system = [{"role": "system", "content": "Be brief."}, *messages]
    assert render(with_system).startswith("<|im_start|>system\nBe brief.<|im_end|>\n")


@pytest.mark.parametrize("tools", [None, [CALC]])
def test_nothing_is_html_escaped(tools: list[dict[str, Any]] | None) -> None:
    messages = [
        {"role": "system", "content": NASTY},
        {"role": "user", "content": NASTY},
        {"role": "assistant", "content": NASTY},
        {"role": "user", "content": [{"type": "text", "text": NASTY}]},
    ]
    prompt = render(messages, tools)
    assert prompt.count(NASTY) == 4
    assert "&#34;" not in prompt and "&#39;" not in prompt and "&lt;" not in prompt
    assert "&amp;" not in prompt and "&quot;" not in prompt


def test_a_demo_with_a_tool_call_renders_in_the_format_the_model_writes() -> None:
    prompt = render(demo(), [CALC])
    assert "&#34;" not in prompt
    assert (
        '<|im_start|>assistant\nUse calculator: {"expression": "12*3"}<|im_end|>\n'
        "<|im_start|>user\nThe calculator tool returned: 36<|im_end|>\n"
        f"<|im_start|>assistant\n{ANSWER_MARK} 36<|im_end|>\n"
        "<|im_start|>user\nWhat is 25*4?<|im_end|>\n<|im_start|>assistant\n"
    ) in prompt
    assert "You have these tools:\n- calculator: Evaluate" in prompt
    # without tools offered, the same call still reads the same; text turns have no label
    plain = render(demo())
    assert 'Use calculator: {"expression": "12*3"}' in plain
    assert "<|im_start|>assistant\n36<|im_end|>" in plain and "You have these tools" not in plain


def test_the_tools_block_names_each_tool_its_arguments_and_both_ways_to_reply() -> None:
    search = {
        "type": "function",
        "function": {
            "name": "search_files",
            "description": "Search files.",
            "parameters": {
                "type": "object",
                "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
                "required": ["pattern"],
            },
        },
    }
    block = tools_block([CALC, search])
    assert '- calculator: Evaluate an arithmetic expression, e.g. "2 * (3 + 4)".' in block
    assert '  Arguments: {"expression": string}' in block
    assert '  Arguments: {"pattern": string, "path": string (optional)}' in block
    assert 'for example: Use calculator: {"expression": "..."}' in block
    assert 'start with "Reply:"' in block
    assert render([{"role": "user", "content": "x"}], [CALC]).startswith(
        f"<|im_start|>system\n{DEFAULT_SYSTEM}\n\nYou have these tools:"
    )


def test_several_tool_results_are_one_user_turn_named_by_their_calls() -> None:
    calls = [
        {"id": "a", "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'}},
        {"id": "b", "function": {"name": "read_file", "arguments": {"path": "x.txt"}}},
    ]
    prompt = render(
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "Let me see.", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "a", "content": "2"},
            {"role": "tool", "tool_call_id": "b", "content": "hello"},
        ]
    )
    assert (
        "<|im_start|>assistant\nLet me see.\n"
        + call_text("calculator", '{"expression": "1+1"}')
        + '\nUse read_file: {"path": "x.txt"}<|im_end|>\n'
        "<|im_start|>user\nThe calculator tool returned: 2\n"
        "The read_file tool returned: hello<|im_end|>\n"
    ) in prompt


def test_flat_arguments_start_from_the_first_strings_opening_quote() -> None:
    plan = arguments_plan(CALC["function"]["parameters"])  # type: ignore[index]
    assert plan.prefix == '{"expression": "' and not plan.lstrip
    assert plan.grammar.startswith('root ::= char* "\\"" "}"')
    assert r'char ::= [^"\\\x00-\x1F]' in plan.grammar  # no raw control characters
    mixed = arguments_plan(
        {
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "mode": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["n"],
        }
    )
    assert mixed.prefix == '{"n": '
    assert '( ", " "\\"mode\\": " ("\\"a\\"" | "\\"b\\"") )?' in mixed.grammar
    assert arguments_plan({"type": "object", "properties": {}}).prefix == "{"


NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {"x": {"$ref": "#/$defs/X"}},
    "$defs": {"X": {"type": "object", "properties": {"y": {"type": "string"}}}},
    "required": ["x"],
}


@needs_llama
def test_every_arguments_grammar_parses_and_nested_schemas_fall_back() -> None:
    schemas: list[dict[str, Any]] = [
        CALC["function"]["parameters"],  # type: ignore[list-item]
        {"type": "object", "properties": {"path": {"type": "string"}}},
        {"type": "object", "properties": {}},
        {"type": "object", "properties": {"x": {"type": ["string", "null"]}}, "required": ["x"]},
        NESTED,
    ]
    # in a child: llama_cpp (the fallback's converter) keeps /dev/null open once imported
    code = (
        "import json, sys\n"
        "from llama_cpp.llama_grammar import LlamaGrammar\n"
        "from aworld_graph.local.grammar import arguments_plan\n"
        "plans = [arguments_plan(s) for s in json.load(sys.stdin)]\n"
        "for p in plans: LlamaGrammar.from_string(p.grammar, verbose=False)\n"
        "print(json.dumps([[p.prefix, p.lstrip, p.grammar] for p in plans]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(schemas),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    prefix, lstrip, grammar = json.loads(done.stdout.strip().splitlines()[-1])[-1]
    assert prefix == "" and lstrip and "\\x00-\\x1F" in grammar


# -- the server's stop on disconnect ---------------------------------------------------------


def _asgi(app: Any, *, disconnect_after: float | None) -> list[dict[str, Any]]:
    """Run one POST through ``StopOnDisconnect(app)``; the client leaves after a while."""
    from aworld_graph.local.server import StopOnDisconnect

    sent: list[dict[str, Any]] = []

    async def go() -> None:
        left = asyncio.Event()
        inbox = [{"type": "http.request", "body": b'{"a": 1}', "more_body": False}]

        async def receive() -> dict[str, Any]:
            if inbox:
                return inbox.pop(0)
            await left.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        if disconnect_after is not None:
            asyncio.get_running_loop().call_later(disconnect_after, left.set)
        await asyncio.wait_for(
            StopOnDisconnect(app)({"type": "http", "method": "POST"}, receive, send), 10
        )

    asyncio.run(go())
    return sent


def test_a_client_that_leaves_cancels_its_generation() -> None:
    from aworld_graph.local.handler import CANCEL

    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["body"] = await receive()
        event = CANCEL.get()
        assert isinstance(event, threading.Event)

        def generate() -> int:  # a worker thread, as the handler runs in
            steps = 0
            while not event.is_set() and steps < 1000:
                event.wait(0.01)
                steps += 1
            return steps

        seen["steps"] = await asyncio.to_thread(generate)
        seen["after"] = await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    _asgi(app, disconnect_after=0.2)
    assert json.loads(seen["body"]["body"]) == {"a": 1}
    assert seen["steps"] < 1000  # stopped by the disconnect, not by running out
    assert seen["after"] == {"type": "http.disconnect"}


def test_a_client_that_waits_is_not_cancelled() -> None:
    from aworld_graph.local.handler import CANCEL

    flags: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        event = CANCEL.get()
        assert event is not None
        await asyncio.sleep(0.1)
        flags.append(event.is_set())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok", "more_body": False})

    sent = _asgi(app, disconnect_after=None)
    assert flags == [False] and sent[-1]["body"] == b"ok"
    assert CANCEL.get() is None
