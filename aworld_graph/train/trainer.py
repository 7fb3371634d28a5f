"""``AgentTrainer``: one agent or swarm, one trainer adapter, one ``train()``.

>>> AgentTrainer(solver, trainer="trl", reward_func=numeric,           # doctest: +SKIP
...              train_dataset=rows, config={"model": model, "tokenizer": tok,
...                                          "args": {"max_steps": 10}}).train()

``trainer`` picks the adapter: ``trl`` trains in this process (``GRPOTrainer`` with
:func:`~aworld_graph.train.trl.rollout_func`); ``areal`` and ``slime`` train from their own
launchers, so :meth:`AgentTrainer.adapter` hands them the workflow object
(:class:`~aworld_graph.train.areal.AReaLWorkflow`) or the custom generate function
(:func:`~aworld_graph.train.slime.slime_generate`); ``verl`` and ``swift`` get their agent loop
or scheduler class (:class:`~aworld_graph.train.verl.AWorldAgentLoop`,
:class:`~aworld_graph.train.swift.AWorldScheduler`). A trainer whose package is missing is
one line naming the extra to install (:class:`TrainerNotInstalled`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from ..agent import Agent
from ..errors import ConfigError
from .extras import TRAINERS, TrainerNotInstalled

__all__ = ["TRAINERS", "AgentTrainer", "TrainerNotInstalled"]


@dataclass
class AgentTrainer:
    """Train ``agent`` (or ``swarm``) with ``trainer`` on ``train_dataset``'s rows (see the
    module docstring). Rows have a ``prompt`` and an ``expected`` answer for ``reward_func``;
    a row without them, or whose reward function raises, fails alone (:attr:`failed`)."""

    agent: Agent | None = None
    """The agent trained (its model is the policy)."""
    swarm: Any = None
    """Or a swarm (TRL only)."""
    _: KW_ONLY
    trainer: str = "trl"
    """``trl``, ``areal``, ``slime``, ``verl`` or ``swift`` (:data:`TRAINERS`)."""
    reward_func: Callable[..., Any]
    """``fn(answer, expected) -> score`` (as in :mod:`aworld_graph.rewards`)."""
    train_dataset: Any
    """Rows (dicts with ``prompt`` and ``expected``) or a ``datasets.Dataset``."""
    test_dataset: Any = None
    """Evaluation rows, same shape."""
    config: dict[str, Any] = field(default_factory=dict)
    """TRL: ``model``, ``tokenizer``, ``tokenizer_name`` (the sampled ids' tokenizer),
    ``run_id`` (resumable episodes: :func:`~aworld_graph.train.trl.rollout_func`) and ``args``
    (``GRPOConfig`` fields or a ``GRPOConfig``); slime: ``run_id`` (resumable episodes:
    :func:`~aworld_graph.train.slime.slime_generate`); AReaL: ``run_id`` (unfinished episodes
    resume: :mod:`~aworld_graph.train.areal`); ms-swift: ``run_id`` (resumable
    episodes: :func:`~aworld_graph.train.swift.grpo_trainer` becomes ``swift rlhf``'s GRPO
    trainer)."""
    failed: list[str] = field(default_factory=list, init=False)
    """Why each failed row gave no training data, one line per row, in order."""
    rollouts: list[dict[str, list[Any]]] = field(default_factory=list, init=False)
    """TRL: what each call of the rollout function returned (ids, logprobs, masks…)."""
    trl_trainer: Any = field(default=None, init=False)
    """TRL: the ``GRPOTrainer`` of the last :meth:`train`."""

    def __post_init__(self) -> None:
        if self.trainer not in TRAINERS:
            raise ConfigError(
                f"AgentTrainer(trainer={self.trainer!r}): use one of {sorted(TRAINERS)}"
            )
        if (self.agent is None) == (self.swarm is None):
            raise ConfigError("AgentTrainer takes an agent or a swarm (exactly one)")

    def _need(self) -> None:
        module, how = TRAINERS[self.trainer]
        if importlib.util.find_spec(module) is None:
            raise TrainerNotInstalled(f"trainer {self.trainer!r} is not installed: {how}")

    def adapter(self) -> Any:
        """What the trainer runs: a TRL ``rollout_func``, an AReaL workflow object, a slime
        custom generate function, verl's agent loop class (registered with verl as
        ``aworld_agent``) or ms-swift's scheduler class (``multi_turns["aworld"]``), each
        configured with the agent and reward function."""
        if self.trainer == "trl":
            from .trl import rollout_func

            run = rollout_func(
                agent=self.agent,
                swarm=self.swarm,
                tokenizer=self.config.get("tokenizer_name"),
                run_id=self.config.get("run_id"),
            )

            def counted(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
                out = run(prompts, trainer)
                self.rollouts.append(out)
                self.failed += [e for e in out["aworld_error"] if e is not None]
                return out

            return counted
        if self.agent is None:
            raise ConfigError(f"the {self.trainer} adapter runs an agent; give AgentTrainer(agent)")
        if self.trainer == "areal":
            from .areal import AReaLWorkflow

            return AReaLWorkflow(
                agent=self.agent, reward_func=self.reward_func, run_id=self.config.get("run_id")
            )
        if self.trainer == "slime":
            from .slime import slime_generate

            return slime_generate(
                agent=self.agent, reward_func=self.reward_func, run_id=self.config.get("run_id")
            )
        if self.trainer == "verl":
            self._need()
            from .verl import AWorldAgentLoop

            return AWorldAgentLoop.configure(agent=self.agent, reward_func=self.reward_func)
        self._need()
        from .swift import AWorldScheduler, grpo_trainer

        if self.config.get("run_id") is not None:  # resumable episodes: the trainer names them
            grpo_trainer(self.config["run_id"])
        return AWorldScheduler.configure(agent=self.agent, reward_func=self.reward_func)

    def train(self) -> Any:
        """Train in this process (TRL); other trainers start from their own launchers."""
        self._need()
        if self.trainer != "trl":
            raise ConfigError(
                f"{self.trainer} trains from its own launcher: give it AgentTrainer(...).adapter() "
                "(docs/training.md, Adapters)"
            )
        from trl.trainer.grpo_config import GRPOConfig
        from trl.trainer.grpo_trainer import GRPOTrainer

        from .trl import trl_reward

        model = self.config.get("model")
        if model is None:
            raise ConfigError(
                "AgentTrainer(trainer='trl') needs config={'model': ...} (a model or its name)"
            )
        args = self.config.get("args") or {}
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[trl_reward(self.reward_func, on_error=self.failed.append)],
            args=args if isinstance(args, GRPOConfig) else GRPOConfig(**args),
            train_dataset=_rows(self.train_dataset),
            eval_dataset=_rows(self.test_dataset) if self.test_dataset is not None else None,
            processing_class=self.config.get("tokenizer"),
            rollout_func=self.adapter(),
        )
        self.trl_trainer = trainer
        return trainer.train()


def _rows(data: Any) -> Any:
    """A ``datasets.Dataset`` of ``data`` (a list of dicts is converted; a Dataset kept)."""
    if isinstance(data, Sequence) and not isinstance(data, str):
        from datasets import Dataset  # type: ignore[import-untyped]

        return Dataset.from_list([dict(r) for r in data])
    return data
