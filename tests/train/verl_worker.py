"""verl's side of tests/train/test_verl_resume.py, imported by its scripts in verl's venv
(tests/train/trainer_venv.py): verl's own default trainer config, a model folder verl reads
(the tokenizer and config of the embedded model's GGUF, no weights), a stand-in for verl's
server manager, an agent whose tool counts its runs in a file, and batches as each of verl's
trainers hands them to its agent loop manager: a ``DataProto`` for the trainer of
``trainer.use_v1=False``, a ``TensorDict`` for the V1 trainer, whose outputs are read back
from its TransferQueue."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import ray
import transfer_queue as tq
import verl
from omegaconf import OmegaConf
from tensordict import TensorDict
from transformers import AutoConfig, AutoTokenizer
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import collate_fn
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


def trainer_config(model_dir: str, n: int = 1, **trainer: Any) -> Any:
    """verl's PPO trainer config (its generated defaults) for the trainer of
    ``trainer.use_v1=False``, experiment ``exp1``, ``n`` samples a prompt (``rollout.n``, which
    the V1 trainer's worker runs); ``trainer`` overrides ``trainer.*``."""
    config = OmegaConf.load(
        os.path.join(os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml")
    )
    config.actor_rollout_ref.model.path = model_dir
    config.actor_rollout_ref.rollout.name = "vllm"
    config.actor_rollout_ref.rollout.response_length = 64
    config.actor_rollout_ref.rollout.n = n
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
        return TokenOutput(
            token_ids=ids,
            log_probs=[-0.25] * len(ids),
            stop_reason="completed",
            extra_fields={"global_steps": WEIGHTS},
        )


WEIGHTS = 2
"""The weight version the stand-in server reports (verl's servers: their ``global_steps``)."""


def worker(
    url: str, model_dir: str, cls: type = AWorldAgentLoopWorker, n: int = 1, **trainer: Any
) -> Any:
    """``cls(config, llm_client)``, as verl's agent loop manager builds each of its workers
    (a Ray actor there)."""
    assert issubclass(cls, AgentLoopWorker)
    manager = StandInServerManager(url, AutoTokenizer.from_pretrained(model_dir))
    return cls(trainer_config(model_dir, n, **trainer), manager)


def start_ray() -> None:
    """A local Ray instance and verl's TransferQueue on it (the V1 trainer's, ``tq.init``);
    its workers write to this test's store and import this checkout. The caller shuts it down
    (:func:`stop_ray`)."""
    env = {"AWORLD_GRAPH_DB": os.environ["AWORLD_GRAPH_DB"], "PYTHONPATH": os.getcwd()}
    # logical CPUs: TransferQueue's controller and two storage units take one each
    ray.init(
        num_cpus=6,
        object_store_memory=100 * 2**20,
        include_dashboard=False,
        runtime_env={"env_vars": env},
        _node_ip_address="127.0.0.1",  # run inside the Ray tests' loopback-only namespace
    )
    tq.init()


def stop_ray() -> None:
    tq.close()
    ray.shutdown()


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
        "weights": [
            list(versions)
            for versions in zip(
                out.non_tensor_batch["min_global_steps"].tolist(),
                out.non_tensor_batch["max_global_steps"].tolist(),
                strict=True,
            )
        ],
    }


def v1_batch(tasks: list[Any], step: int, validate: bool = False) -> TensorDict:
    """What verl's V1 trainer hands its agent loop manager for ``tasks`` (a user message's
    text, or the messages; dataset rows 10, 11…): one row per prompt, as its dataloader
    collates them, a new ``uid`` each, and ``global_steps`` (and ``validate``) beside them (its
    ``_next_train_batch``, ``_validate``)."""
    rows = [
        {
            "raw_prompt": task if isinstance(task, list) else [{"role": "user", "content": task}],
            "reward_model": {"ground_truth": "4"},
            "index": 10 + i,
            "agent_name": "aworld_agent",
        }
        for i, task in enumerate(tasks)
    ]
    collated = collate_fn(rows)
    collated["uid"] = np.array([str(uuid.uuid4()) for _ in rows], dtype=object)
    out = tu.get_tensordict(collated)
    tu.assign_non_tensor_data(out, "global_steps", step)
    if validate:
        tu.assign_non_tensor_data(out, "validate", True)
    return out


async def v1_run(made: Any, batch: TensorDict) -> dict[str, Any]:
    """``made``'s (a V1 worker in this process) outputs for ``batch``: its
    ``generate_sequences`` only starts a task for each prompt, awaited here."""
    partition, uids = _partition(batch), list(batch["uid"])
    await made.generate_sequences(batch)  # which takes "validate" out of the batch
    while made.background_tasks:
        await asyncio.gather(*made.background_tasks)
    return v1_outputs(uids, partition)


def _partition(batch: TensorDict) -> str:
    return "val" if "validate" in batch else "train"


def v1_outputs(uids: list[str], partition: str) -> dict[str, Any]:
    """The outputs of the prompts ``uids`` in verl's TransferQueue, once the workers marked
    each prompt done (the V1 trainer's replay buffer polls its tags the same way), in the order
    of the prompts and their sessions."""
    deadline = time.monotonic() + 300
    while True:
        tags = tq.kv_list(partition).get(partition, {})
        if all(tags.get(uid, {}).get("status") in ("finished", "failure") for uid in uids):
            break
        assert time.monotonic() < deadline, f"the prompts never finished: {tags}"
        time.sleep(0.1)
    keys = sorted(
        (k for k in tags if k.split("_")[0] in uids and k not in uids),
        key=lambda k: (uids.index(k.split("_")[0]), int(k.split("_")[1])),
    )
    out = tq.kv_batch_get(keys=keys, partition_id=partition)
    extra = list(out["extra_fields"])
    return {
        "threads": [e["aworld_thread"] for e in extra],
        "answers": [e.get("aworld_answer") for e in extra],
        "errors": [e.get("aworld_error") for e in extra],
        "responses": [r.tolist() for r in out["responses"].unbind()],
        "rm_scores": (
            [float(r.sum()) for r in out["rm_scores"].unbind()] if "rm_scores" in out else None
        ),
        "weights": [[e.get("min_global_steps"), e.get("max_global_steps")] for e in extra],
    }


plain = Agent(name="solver", system_prompt="Answer.")
"""An agent without tools, for verl's Ray workers (the agent loop config names it)."""
