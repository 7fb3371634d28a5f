"""verl's side of tests/train/test_verl_resume.py, imported by its scripts in verl's venv
(tests/train/trainer_venv.py): verl's own default trainer config, a model folder verl reads
(the tokenizer and config of the embedded model's GGUF, no weights), a stand-in for verl's
server manager, an agent whose tool counts its runs in a file, and batches as verl's trainer
hands them to its agent loop manager."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import verl
from omegaconf import OmegaConf
from transformers import AutoConfig, AutoTokenizer
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.workers.rollout.replica import TokenOutput

from aworld_graph import Agent, tool
from aworld_graph.rewards import contains
from aworld_graph.train.verl import AWorldAgentLoop, AWorldAgentLoopWorker


def setup(model_dir: str, gguf: str, log: str) -> None:
    """The model folder (written once) and :class:`AWorldAgentLoop`'s agent: ``add`` appends
    its result to ``log`` at each run."""
    if not (Path(model_dir) / "config.json").exists():
        folder, name = os.path.dirname(gguf), os.path.basename(gguf)
        hf_config = AutoConfig.from_pretrained(folder, gguf_file=name)
        hf_config.architectures = ["LlamaForCausalLM"]  # verl reads the model type from it
        hf_config.save_pretrained(model_dir)
        AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(model_dir)

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        with Path(log).open("a") as runs:
            runs.write(f"{a + b}\n")
        return a + b

    agent = Agent(name="solver", system_prompt="Use add.", tools=[add])
    AWorldAgentLoop.configure(agent=agent, reward_func=contains)


def trainer_config(model_dir: str, **trainer: Any) -> Any:
    """verl's PPO trainer config (its generated defaults) for the trainer of
    ``trainer.use_v1=False``, experiment ``exp1``; ``trainer`` overrides ``trainer.*``."""
    config = OmegaConf.load(
        os.path.join(os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml")
    )
    config.actor_rollout_ref.model.path = model_dir
    config.actor_rollout_ref.rollout.name = "vllm"
    config.actor_rollout_ref.rollout.response_length = 64
    config.trainer.use_v1 = False
    config.trainer.experiment_name = "exp1"
    for key, value in trainer.items():
        config.trainer[key] = value
    return config


class StandInServerManager:
    """verl's ``LLMServerClient.generate``: token ids in, ``TokenOutput`` out. The scripted
    server at ``url`` answers the prompt's text; its reply is tokenized here with the
    trainer's tokenizer (the end token appended, as a server samples it)."""

    def __init__(self, url: str, tokenizer: Any) -> None:
        self.url = url
        self.tokenizer = tokenizer

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: Any, **kwargs: Any
    ) -> TokenOutput:
        async with httpx.AsyncClient(timeout=300) as client:
            reply = await client.post(
                self.url + "/generate", json={"prompt": self.tokenizer.decode(prompt_ids)}
            )
        ids = self.tokenizer.encode(reply.json()["text"], add_special_tokens=False)
        ids.append(self.tokenizer.eos_token_id)
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed")


def worker(url: str, model_dir: str, cls: type = AWorldAgentLoopWorker, **trainer: Any) -> Any:
    """``cls(config, llm_client)``, as verl's agent loop manager builds each of its workers
    (a Ray actor there)."""
    assert issubclass(cls, AgentLoopWorker)
    manager = StandInServerManager(url, AutoTokenizer.from_pretrained(model_dir))
    return cls(trainer_config(model_dir, **trainer), manager)


def _column(values: list[Any]) -> Any:
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = value
    return out


def batch(
    tasks: list[str], step: int, validate: bool = False, n: int = 1, numbered: bool = True
) -> DataProto:
    """What verl's trainer hands its agent loop manager for ``tasks`` (dataset rows 10, 11…):
    one row per sample, a prompt's ``rollout.n`` samples side by side, ``global_steps`` and
    ``validate`` in ``meta_info``. ``numbered``: with the ``priority`` column the manager
    numbers the batch with before it splits it among its workers (for a worker driven
    without its manager)."""
    rows = [(i, t) for i, t in enumerate(tasks) for _ in range(n)]
    columns = {
        "raw_prompt": _column([[{"role": "user", "content": t}] for _, t in rows]),
        "reward_model": _column([{"ground_truth": "4"} for _ in rows]),
        "index": _column([10 + i for i, _ in rows]),
        "agent_name": _column(["aworld_agent"] * len(rows)),
    }
    if numbered:
        columns["priority"] = np.arange(len(rows), dtype=np.int64)
    return DataProto.from_dict(
        non_tensors=columns, meta_info={"global_steps": step, "validate": validate}
    )


def summary(out: DataProto) -> dict[str, Any]:
    """What a test reads of a worker's output batch."""
    return {
        "threads": out.non_tensor_batch["aworld_thread"].tolist(),
        "answers": out.non_tensor_batch["aworld_answer"].tolist(),
        "responses": out.batch["responses"].tolist(),
        "rm_scores": out.batch["rm_scores"].sum(-1).tolist() if "rm_scores" in out.batch else None,
    }


plain = Agent(name="solver", system_prompt="Answer.")
"""An agent without tools, for verl's Ray workers (the agent loop config names it)."""
