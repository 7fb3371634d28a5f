"""ms-swift GRPO rollouts resume from the store (aworld_graph.train.swift), with ms-swift's own
classes in its venv (tests/train/trainer_venv.py).

ms-swift calls the scheduler's ``run`` under ``swift rollout`` (server mode), another process
than the trainer: what names an episode there is the request's ``uuid``, the ``request_id``
ms-swift's trainer gives each sample. ``AWorldGRPOTrainer`` (ms-swift's ``GRPOTrainer`` from
its ``TrainerFactory``, as ``swift rlhf`` takes it) names it from the run and the trainer's
state. Building a whole ``GRPOTrainer`` needs a model ms-swift knows and, for server mode,
vLLM: the trainer here is ms-swift's class with what its naming reads set (the step in a
``transformers.TrainerState``, an ``accelerate.Accelerator``, a torch module's mode), and
ms-swift's own code names the samples and turns them into the requests ``swift rollout`` gets
(as JSON, rebuilt there). The engine answers as ms-swift's engines do
(``ChatCompletionResponse`` with ids and logprobs), scripted: first a call of ``add``, then the
sum; each call is a line in its log, and ``add`` appends to a file, so a test counts both.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Agent
from aworld_graph.errors import ConfigError
from aworld_graph.rewards import contains
from aworld_graph.train import AgentTrainer, TrainerNotInstalled
from aworld_graph.train.swift import grpo_trainer
from tests.train.trainer_venv import ROOT, Unavailable, trainer_python

SCRIPT = r"""
import asyncio, json, re, sys
from dataclasses import asdict
from types import SimpleNamespace

import torch
from accelerate import Accelerator
from transformers import TrainerState
from swift.infer_engine.protocol import (
    ChatCompletionMessageToolCall, ChatCompletionResponse, ChatCompletionResponseChoice,
    ChatMessage, Function, RequestConfig, RolloutInferRequest, UsageInfo,
)
from swift.rl_core.data import GRPOSample
from swift.rollout.multi_turn import multi_turns
from swift.trainers import TrainerFactory

from aworld_graph import Agent, tool
from aworld_graph.rewards import contains
from aworld_graph.train import AgentTrainer

mode, tools_log, calls_log, step, hold = sys.argv[1:6]


@tool
def add(a: int, b: int) -> int:
    "Add two numbers."
    with open(tools_log, "a") as f:
        f.write(f"{a}+{b}\n")
    return a + b


agent = Agent(name="solver", system_prompt="Add with the tool, then answer.", tools=[add])
# what the --external_plugins file of `swift rlhf` and `swift rollout` does
AgentTrainer(agent, trainer="swift", reward_func=contains, train_dataset=[],
             config={"run_id": "exp1"}).adapter()


class ScriptedEngine:
    # ms-swift's engine interface: infer_async -> ChatCompletionResponse with ids and logprobs
    async def infer_async(self, request, request_config, **kwargs):
        question = next(m["content"] for m in request.messages if m["role"] == "user")
        a, b = (int(n) for n in re.search(r"(\d+)\+(\d+)", question).groups())
        answering = any(m["role"] == "tool" for m in request.messages)
        with open(calls_log, "a") as f:
            f.write(f"{question} {'answer' if answering else 'tool'}\n")
        if answering and hold != "-" and hold in question:
            print("held", flush=True)
            await asyncio.Event().wait()  # in flight until the process is killed
        calls = None
        text = str(a + b) if answering else ""
        if not answering:
            calls = [ChatCompletionMessageToolCall(
                function=Function(name="add", arguments={"a": a, "b": b}), id="call-1")]
        ids = [ord(c) for c in (text or f"add({a},{b})")]
        prompt = [ord(c) for c in json.dumps(request.messages)][:64]
        choice = ChatCompletionResponseChoice(
            index=0, message=ChatMessage(role="assistant", content=text, tool_calls=calls),
            finish_reason="stop", logprobs={"content": [{"logprob": -0.25} for _ in ids]},
            token_ids=ids,
        )
        return ChatCompletionResponse(
            model="scripted", choices=[choice],
            usage=UsageInfo(len(prompt), len(ids), len(prompt) + len(ids)), prompt_token_ids=prompt,
        )


def trainer(global_step, training=True):
    # ms-swift's GRPO trainer class as `swift rlhf --rlhf_type grpo` takes it
    cls = TrainerFactory.get_trainer_cls(SimpleNamespace(rlhf_type="grpo"))
    made = cls.__new__(cls)
    made.state = TrainerState(global_step=global_step)
    made.accelerator = Accelerator(cpu=True)
    made.model = torch.nn.Linear(1, 1).train(training)
    return made


def requests(named_by, questions):
    samples = [GRPOSample(messages=[{"role": "user", "content": q}],
                          extra={"solution": SOLUTIONS[q]}) for q in questions]
    samples = named_by._add_prompt_id_to_inputs(samples)  # where ms-swift names them
    # what `swift rollout` gets: the requests as JSON (ms-swift's vllm_client), rebuilt there
    return [RolloutInferRequest(**json.loads(json.dumps(asdict(s.to_infer_request(True)))))
            for s in samples]


SOLUTIONS = {"What is 2+2?": "4", "What is 3+3?": "6"}
QUESTIONS = list(SOLUTIONS)
config = RequestConfig(max_tokens=32, temperature=1.0)
scheduler = multi_turns["aworld"](infer_engine=ScriptedEngine(), max_turns=8)


async def rollout():
    async def one(request):  # as MultiTurnScheduler.async_infer runs each request
        out = await scheduler.run(request, config)
        print(json.dumps({"uuid": request.uuid, "out": out.model_dump(mode="json")}), flush=True)

    await asyncio.gather(*(one(r) for r in requests(trainer(int(step)), QUESTIONS)))


if mode == "rollout":
    asyncio.run(rollout())
else:
    at3 = trainer(3)
    named = {
        "first": [r.uuid for r in requests(at3, QUESTIONS)],
        "again": [r.uuid for r in requests(at3, QUESTIONS)],  # a second generation at step 3
        "eval": [r.uuid for r in requests(trainer(3, training=False), QUESTIONS)],
        "step4": [r.uuid for r in requests(trainer(4), QUESTIONS)],
        "restarted": [r.uuid for r in requests(trainer(3), QUESTIONS)],
    }
    scheduler_cls = type(scheduler)
    trainer_cls = type(at3)
    trainer_cls.run_id = None  # ms-swift's own request ids
    named["unnamed"] = [r.uuid for r in requests(trainer(3), QUESTIONS)]
    try:
        asyncio.run(scheduler.on_trajectory_start(requests(at3, QUESTIONS)))
        colocate = None
    except Exception as exc:
        colocate = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"named": named, "trainer": trainer_cls.__name__, "colocate": colocate}))
"""


def _venv_python() -> Path:
    try:
        return trainer_python("swift")
    except Unavailable as exc:
        pytest.skip(str(exc))


def _command(home: Path, *args: str, **kwargs: Any) -> Any:
    """The script in ms-swift's venv, with the store in ``home``."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "AWORLD_GRAPH_DB": str(home / "store.db"),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    return [str(_venv_python()), "-c", SCRIPT, *args], {"cwd": ROOT, "env": env, **kwargs}


def _outputs(stdout: str) -> dict[str, dict[str, Any]]:
    """The rollout outputs printed, by request uuid."""
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return {row["uuid"]: row["out"] for row in rows}


def test_the_swift_trainer_needs_a_run_name_and_ms_swift() -> None:
    with pytest.raises(ConfigError, match="give the training run a name"):
        grpo_trainer(" ")
    with pytest.raises(TrainerNotInstalled, match="train-swift"):  # not in this environment
        grpo_trainer("exp1")
    trainer = AgentTrainer(
        Agent(name="a"),
        trainer="swift",
        reward_func=contains,
        train_dataset=[],
        config={"run_id": "exp1"},
    )
    with pytest.raises(TrainerNotInstalled, match="train-swift"):
        trainer.adapter()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_swift_request_ids_name_episodes_from_the_trainers_state(tmp_path: Path) -> None:
    cmd, kwargs = _command(tmp_path, "names", str(tmp_path / "t"), str(tmp_path / "c"), "3", "-")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    named = result["named"]
    assert result["trainer"] == "AWorldGRPOTrainer"  # swift rlhf's GRPO trainer now
    assert named["first"] == ["exp1-p0-train-s3-g0-0", "exp1-p0-train-s3-g0-1"]
    assert named["again"] == ["exp1-p0-train-s3-g1-0", "exp1-p0-train-s3-g1-1"]
    assert named["eval"] == ["exp1-p0-eval-s3-g0-0", "exp1-p0-eval-s3-g0-1"]
    assert named["step4"] == ["exp1-p0-train-s4-g0-0", "exp1-p0-train-s4-g0-1"]
    assert named["restarted"] == named["first"]  # a trainer started again counts from 0
    unnamed = named["unnamed"]  # without a run_id: ms-swift's ids, new at every rollout
    assert all(u.startswith("chatcmpl-") for u in unnamed) and len(set(unnamed)) == 2
    # colocate mode, where ms-swift would sample the turns itself: refused, naming the fix
    assert "ConfigError" in result["colocate"] and "--vllm_mode server" in result["colocate"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_swift_rollout_killed_mid_way_resumes_its_episodes(tmp_path: Path) -> None:
    """``swift rollout``'s process killed (SIGKILL) while the second episode's answering call is
    in flight, after the first episode finished and the second one's tool call finished; the
    trainer restarted at the same step sends the same requests again: the first episode is
    read back (no model call), the second resumes (its tool call is not run again)."""
    tools, calls = tmp_path / "tools.log", tmp_path / "calls.log"
    cmd, kwargs = _command(tmp_path, "rollout", str(tools), str(calls), "3", "3+3")
    with (tmp_path / "killed.err").open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, **kwargs)
        try:
            assert proc.stdout is not None
            seen: list[str] = []
            while "held" not in seen or not any(s.startswith("{") for s in seen):
                line = proc.stdout.readline()
                assert line, (tmp_path / "killed.err").read_text()[-4000:]
                seen.append(line.strip())
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    before = _outputs("\n".join(seen))
    assert list(before) == ["exp1-p0-train-s3-g0-0"]  # the first episode finished
    assert sorted(tools.read_text().split()) == ["2+2", "3+3"]  # both tool calls ran
    assert Counter(calls.read_text().splitlines()) == {
        "What is 2+2? tool": 1,
        "What is 2+2? answer": 1,
        "What is 3+3? tool": 1,
        "What is 3+3? answer": 1,  # in flight when killed
    }
    cmd, kwargs = _command(tmp_path, "rollout", str(tools), str(calls), "3", "-")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, done.stderr[-4000:]
    again = _outputs(done.stdout)
    assert calls.read_text().splitlines()[4:] == ["What is 3+3? answer"]  # 2+2 read back
    assert sorted(tools.read_text().split()) == ["2+2", "3+3"]  # 3+3's tool call not run again
    first, second = again["exp1-p0-train-s3-g0-0"], again["exp1-p0-train-s3-g0-1"]
    assert first["rollout_infos"]["aworld_thread"] == "swift-exp1-p0-train-s3-g0-0"
    assert second["rollout_infos"]["aworld_thread"] == "swift-exp1-p0-train-s3-g0-1"
    # the read-back episode gives ms-swift what its first run gave: the sampled ids, not text
    old = before["exp1-p0-train-s3-g0-0"]
    for key in ("response_token_ids", "response_loss_mask", "rollout_logprobs", "messages"):
        assert first[key] == old[key]
    assert first["response"]["choices"][0]["token_ids"] == [ord("4")]
    assert first["response"]["choices"][0]["message"]["content"] == "4"
    assert second["response_token_ids"] == [[ord("6")]] and second["response_loss_mask"] == [[1]]
    assert [first["rollout_infos"]["aworld_reward"], second["rollout_infos"]["aworld_reward"]] == [
        1.0,
        1.0,
    ]
    # the next step's requests are other episodes: sampled anew
    cmd, kwargs = _command(tmp_path, "rollout", str(tools), str(calls), "4", "-")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, done.stderr[-4000:]
    assert sorted(_outputs(done.stdout)) == ["exp1-p0-train-s4-g0-0", "exp1-p0-train-s4-g0-1"]
    assert len(calls.read_text().splitlines()) == 5 + 4
    assert sorted(tools.read_text().split()) == ["2+2", "2+2", "3+3", "3+3"]
