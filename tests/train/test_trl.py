"""A real GRPO step with TRL on CPU, from the token ids the embedded model sampled.

The trainer holds SmolLM2-135M loaded by transformers from the GGUF file the embedded
llama.cpp server serves, so the rollouts come from the same weights (de-quantized)."""

from __future__ import annotations

import importlib.util
import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from aworld_graph import Agent, AgentConfig
from aworld_graph.errors import ConfigError
from aworld_graph.local import model_path
from aworld_graph.testing import FunctionModel
from aworld_graph.train import AgentTrainer, TrainerNotInstalled
from tests.train import gguf


def alternating() -> Callable[[str | None, object], float]:
    """A reward of 0, 1, 0, 1… by call: the two samples of a prompt always differ, so the
    group has an advantage to learn from whatever the model samples (two samples of a
    length-based reward can tie, leaving nothing to learn)."""
    calls = itertools.count()
    return lambda answer, expected: float(next(calls) % 2)


@pytest.mark.local_model
# TRL 1.16 itself reads transformers 5's deprecated `is_gradient_checkpointing` alias
@pytest.mark.filterwarnings("ignore:.*will be removed in v6:FutureWarning")
def test_grpo_step_on_cpu_from_sampled_ids(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    import torch

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model = gguf.causal_lm()
    tokenizer = gguf.tokenizer()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    agent = Agent(
        name="writer",
        system_prompt="Answer in a few words.",
        conf=AgentConfig(llm_temperature=1.0, params={"max_tokens": 12}),
    )
    rows = [
        {"prompt": "Write a random word.", "expected": "word"},
        {"prompt": "Name a color."},  # no expected answer: this row fails alone
    ]
    trainer = AgentTrainer(
        agent,
        trainer="trl",
        reward_func=alternating(),
        train_dataset=rows,
        config={
            "model": model,
            "tokenizer": tokenizer,
            "tokenizer_name": "gguf:" + model_path().name,
            "args": {
                "output_dir": str(tmp_path),
                "use_cpu": True,
                "per_device_train_batch_size": 4,
                "num_generations": 2,
                "max_completion_length": 16,
                "max_steps": 1,
                "learning_rate": 1e-4,
                "logging_steps": 1,
                "report_to": [],
                "save_strategy": "no",
                "bf16": False,
                "activation_checkpointing": False,
                "seed": 1,
            },
        },
    )
    result = trainer.train()
    assert result.global_step == 1
    (out,) = trainer.rollouts
    # TRL trained on the ids the embedded model sampled, each with its logprob
    assert len(out["completion_ids"]) == 4 and all(out["completion_ids"])
    lengths = [len(ids) for ids in out["completion_ids"]]
    assert lengths == [len(lp) for lp in out["logprobs"]] == [len(m) for m in out["env_mask"]]
    assert out["aworld_error"] == [None] * 4
    ended = [ids for ids in out["completion_ids"] if len(ids) < 12]
    assert all(tokenizer.decode(ids[-1:]) == "<|im_end|>" for ids in ended)
    # the row without an expected answer failed alone, named
    assert len(trainer.failed) == 2
    assert all("has no 'expected'" in why for why in trainer.failed)
    loss = [h["loss"] for h in trainer.trl_trainer.state.log_history if "loss" in h]
    assert loss and all(torch.isfinite(torch.tensor(x)) for x in loss)
    changed = [n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert changed, "the GRPO step left every weight as it was"


def _agent() -> Agent:
    return Agent(name="a", system_prompt="s", model=FunctionModel(lambda m, t: "4"))


@pytest.mark.parametrize(("name", "extra"), [("areal", "train-areal"), ("verl", "train-verl")])
def test_a_trainer_not_installed_is_one_line_naming_the_extra(name: str, extra: str) -> None:
    if importlib.util.find_spec(name) is not None:
        pytest.skip(f"{name} is installed here")
    trainer = AgentTrainer(_agent(), trainer=name, reward_func=len, train_dataset=[])
    with pytest.raises(TrainerNotInstalled, match=f"aworld-graph\\[{extra}\\]") as caught:
        trainer.train()
    assert "\n" not in str(caught.value)


def test_unknown_trainer_and_missing_agent_are_refused() -> None:
    with pytest.raises(ConfigError, match="use one of"):
        AgentTrainer(_agent(), trainer="deepspeed", reward_func=len, train_dataset=[])
    with pytest.raises(ConfigError, match="agent or a swarm"):
        AgentTrainer(trainer="trl", reward_func=len, train_dataset=[])
