"""A real GRPO step with TRL on CPU, from the token ids the embedded model sampled.

The trainer holds SmolLM2-135M loaded by transformers from the GGUF file the embedded
llama.cpp server serves, so the rollouts come from the same weights (de-quantized)."""

from __future__ import annotations

import os

import pytest

from aworld_graph import Agent, AgentConfig
from aworld_graph.local import model_path
from aworld_graph.train.trl import rollout_func, trl_reward
from tests.train import gguf

pytest.importorskip("trl")


def shorter_is_better(answer: str | None, expected: object) -> float:
    """Varies between samples, so the group has an advantage to learn from."""
    return 1.0 / (1.0 + len(answer or ""))


@pytest.mark.local_model
# TRL 1.16 itself reads transformers 5's deprecated `is_gradient_checkpointing` alias
@pytest.mark.filterwarnings("ignore:.*will be removed in v6:FutureWarning")
def test_grpo_step_on_cpu_from_sampled_ids(tmp_path: object) -> None:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model = gguf.causal_lm()
    tokenizer = gguf.tokenizer()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    agent = Agent(
        name="solver",
        system_prompt="Answer in one short sentence.",
        conf=AgentConfig(llm_temperature=1.0, params={"max_tokens": 12}),
    )
    seen: list[dict] = []
    func = rollout_func(agent=agent, tokenizer="gguf:" + model_path().name)

    def recorded(prompts: list, trainer: object) -> dict:
        out = func(prompts, trainer)
        seen.append(out)
        return out

    data = Dataset.from_list(
        [{"prompt": "Name a color.", "expected": "red"}, {"prompt": "Say hi.", "expected": "hi"}]
    )
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=16,
        max_steps=1,
        learning_rate=1e-4,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        bf16=False,
        activation_checkpointing=False,
        seed=1,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[trl_reward(shorter_is_better)],
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        rollout_func=recorded,
    )
    result = trainer.train()
    assert seen, "TRL never called the rollout function"
    out = seen[0]
    # the ids TRL trained on are the ones the embedded model sampled, ending its turn
    assert all(ids for ids in out["completion_ids"])
    assert all(
        len(ids) == len(lp) for ids, lp in zip(out["completion_ids"], out["logprobs"], strict=True)
    )
    assert out["aworld_error"] == [None] * len(out["completion_ids"])
    assert all(
        tokenizer.decode(ids[-1:]) == "<|im_end|>" for ids in out["completion_ids"] if len(ids) < 12
    )
    loss = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert loss and all(torch.isfinite(torch.tensor(x)) for x in loss)
    assert result.global_step == 1
    changed = [n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert changed, "the GRPO step left every weight as it was"
