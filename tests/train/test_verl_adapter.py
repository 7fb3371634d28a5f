"""verl's agent loop (aworld_graph.train.verl) with verl's own classes.

verl 0.9.1 pins ``transformers<5.11``, below this project's, so it runs in a venv of its own
(tests/train/trainer_venv.py, under ``.cache/``). A script there builds the agent loop the way
verl's ``AgentLoopWorker`` does (its registry entry through ``hydra.utils.instantiate``, its
``DictConfigWrap``/``ToolListWrap``, the SmolLM2 tokenizer from the GGUF the embedded model
serves) with a stand-in server manager returning verl's ``TokenOutput``: it sends the prompt
ids to a loopback token server here (tests/train/token_server.py), which samples them with the embedded model's GGUF
(llama.cpp in this environment, so nothing is built in the venv) and keeps what it sampled.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from aworld_graph import Agent
from aworld_graph.rewards import numeric
from aworld_graph.train import AgentTrainer, TrainerNotInstalled
from tests.train.token_server import run_in_venv

SCRIPT = r"""
import asyncio, json, sys

import httpx
import hydra
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopOutput, DictConfigWrap, ToolListWrap, _agent_loop_registry,
)
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from aworld_graph import Agent
from aworld_graph.train.verl import AWorldAgentLoop

url, gguf_dir, gguf_name = sys.argv[1:4]


class StandInServerManager:
    # verl's LLMServerClient.generate: token ids in, TokenOutput out
    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        async with httpx.AsyncClient(timeout=300) as client:
            reply = await client.post(
                url + "/generate",
                json={"prompt_ids": prompt_ids, "sampling_params": sampling_params},
            )
        return TokenOutput(**reply.json())


def raises(answer, expected):
    raise RuntimeError("scorer down")


def exact_five(answer, expected):
    return 1.0 if answer and expected in answer else 0.0


config = OmegaConf.create({
    "actor_rollout_ref": {"rollout": {
        "prompt_length": 512, "response_length": 48, "multi_turn": {"format": "hermes"},
    }},
    "data": {"apply_chat_template_kwargs": {}},
})
tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_name)


def build():
    # what verl's AgentLoopWorker._run_agent_loop does with a registered agent loop
    return hydra.utils.instantiate(
        config=_agent_loop_registry["aworld_agent"],
        trainer_config=DictConfigWrap(config=config),
        server_manager=StandInServerManager(),
        tokenizer=tokenizer,
        processor=None,
        hf_model_type="llama",
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


async def main():
    agent = Agent(name="solver", system_prompt="Answer with the number only.")
    row = {
        "raw_prompt": [{"role": "user", "content": "What is 2+3?"}],
        "reward_model": {"ground_truth": "5"},
        "index": 0,
    }
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "max_tokens": 24, "logprobs": True}
    AWorldAgentLoop.configure(agent=agent, reward_func=exact_five)
    loop = build()
    out = await loop.run(sampling, **row)
    assert isinstance(out, AgentLoopOutput)
    AWorldAgentLoop.configure(agent=agent, reward_func=raises)
    failed = await build().run(sampling, **row)
    as_dict = out.as_dict()
    print(json.dumps({
        "is_base": [c.__name__ for c in type(loop).__mro__],
        "registry": _agent_loop_registry["aworld_agent"],
        "out": out.model_dump(mode="json"),
        "prompt_text": tokenizer.decode(out.prompt_ids),
        "response_text": tokenizer.decode(out.response_ids),
        "response_clean": tokenizer.decode(out.response_ids, skip_special_tokens=True),
        "rm_scores_last": float(as_dict["rm_scores"][-1]),
        "failed": failed.model_dump(mode="json"),
    }))


asyncio.run(main())
"""


@pytest.mark.parametrize("trainer", ["verl", "swift"])
def test_adapter_without_its_trainer_names_the_extra(trainer: str) -> None:
    """Here (neither verl nor ms-swift) the modules import, and using one is one line naming
    the extra (tests/train/test_swift_adapter.py runs ms-swift's)."""
    from aworld_graph.train.swift import AWorldScheduler
    from aworld_graph.train.verl import AWorldAgentLoop

    adapter = {"verl": AWorldAgentLoop, "swift": AWorldScheduler}[trainer]
    with pytest.raises(TrainerNotInstalled, match=rf"train-{trainer}"):
        adapter()
    agent = Agent(name="a")
    assert adapter.configure(agent=agent).configured_agent is agent
    config = AgentTrainer(agent, trainer=trainer, reward_func=numeric, train_dataset=[])
    with pytest.raises(TrainerNotInstalled, match=rf"train-{trainer}"):
        config.adapter()


def test_verls_workers_and_managers_without_verl_name_the_extra() -> None:
    from aworld_graph.train import verl

    for cls in (
        verl.AWorldAgentLoopWorker,
        verl.AWorldAgentLoopWorkerTQ,
        verl.AWorldAgentLoopManager,
        verl.AWorldAgentLoopManagerTQ,
    ):
        with pytest.raises(TrainerNotInstalled, match="train-verl"):
            cls({})


@pytest.mark.slow
@pytest.mark.local_model
@pytest.mark.timeout(3600)
def test_verl_agent_loop_with_verls_classes(tmp_path: Any) -> None:
    result, server = run_in_venv("verl", SCRIPT, tmp_path)
    out = result["out"]
    assert "AgentLoopBase" in result["is_base"]
    assert result["registry"] == {"_target_": "aworld_graph.train.verl.AWorldAgentLoop"}
    # the ids are the ones the server sampled for the answering call, not re-tokenized text
    last = server.sampled[-2]  # the failed run's call came after
    assert out["prompt_ids"] == last["prompt_ids"]
    assert out["response_ids"] == last["token_ids"]
    assert out["response_logprobs"] == pytest.approx(last["log_probs"], abs=1e-6)
    assert len(out["response_mask"]) == len(out["response_ids"]) == len(out["response_logprobs"])
    assert set(out["response_mask"]) == {1}
    assert "What is 2+3?" in result["prompt_text"]
    assert result["prompt_text"].endswith("<|im_start|>assistant\n")
    answer = out["extra_fields"]["aworld_answer"]
    assert answer and result["response_clean"] == answer  # the stored text, from the ids
    assert out["reward_score"] == (1.0 if "5" in answer else 0.0)
    assert result["rm_scores_last"] == out["reward_score"]
    assert out["num_turns"] == 2
    # a run whose reward function raised is no training data: no response tokens, the reason
    failed = result["failed"]
    assert failed["response_ids"] == [] and failed["response_mask"] == []
    assert "scorer down" in failed["extra_fields"]["aworld_error"]
    assert failed["reward_score"] is None
    # outside AWorldAgentLoopWorker nothing names an episode across a restart (the same row
    # comes with the same columns for each of a prompt's samples): the same row again is
    # sampled anew on a thread of its own, never read back as another episode's run
    # (tests/train/test_verl_resume.py: the worker's threads, resumed)
    threads = [out["extra_fields"]["aworld_thread"], failed["extra_fields"]["aworld_thread"]]
    assert threads[0] != threads[1] and all(t.startswith("verl-0-") for t in threads)
    assert len(server.sampled) == 2


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
