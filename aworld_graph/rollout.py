"""Rollouts: k scored runs per task, grouped by task – the shape GRPO-style training needs.

>>> groups = await rollout(tasks, n=4, reward_fn=numeric)        # doctest: +SKIP
>>> [(g.task.id, g.mean, g.advantages) for g in groups]          # doctest: +SKIP

Each run is a copy of its task on thread ``<task.id>.r<i>`` (so it is checkpointed, can be
resumed and exported), run at the sampling temperature its agents are configured with,
scored by :func:`~aworld_graph.rewards.score_response` against ``task.expected`` and
stored as an episode reward (:func:`~aworld_graph.rewards.store_score`). The run metadata
carries ``rollout_group`` (the task id) and ``rollout_index``, which the exporters use to
pair the best and worst run of a task for preference data.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from .checkpoint import open_store
from .config import RunConfig
from .engine.batch import run_tasks
from .errors import DefinitionError
from .model import sampling_temperature
from .rewards import RewardFn, Score, episode_reward, exact, score_response, store_score
from .task import Task, TaskResponse

__all__ = ["RolloutGroup", "RolloutRun", "rollout"]


@dataclass(kw_only=True)
class RolloutRun:
    """One scored run of a task."""

    index: int
    """Position in its group (``i`` of thread ``<task.id>.r<i>``)."""
    thread_id: str
    """Checkpoint thread of the run."""
    response: TaskResponse
    """What the run produced (its trajectory includes the episode reward)."""
    score: float
    """The episode reward."""
    status: str
    """``pass`` or ``fail`` (the reward against the threshold)."""
    advantage: float = 0.0
    """``score`` minus the group mean."""


@dataclass(kw_only=True)
class RolloutGroup:
    """The k runs of one task and their reward statistics."""

    task: Task
    """The task that was rolled out."""
    runs: list[RolloutRun] = field(default_factory=list)
    """The runs, in index order."""
    mean: float = 0.0
    """Mean score of the group."""
    std: float = 0.0
    """Population standard deviation of the scores."""
    min: float = 0.0
    """Lowest score."""
    max: float = 0.0
    """Highest score."""

    @property
    def scores(self) -> list[float]:
        """Scores in run order."""
        return [r.score for r in self.runs]

    @property
    def advantages(self) -> list[float]:
        """``score - mean`` per run (GRPO's group-relative advantage, unscaled)."""
        return [r.advantage for r in self.runs]

    def normalized_advantages(self, eps: float = 1e-4) -> list[float]:
        """``(score - mean) / (std + eps)`` per run (GRPO's scaled advantage)."""
        return [r.advantage / (self.std + eps) for r in self.runs]

    @property
    def best(self) -> RolloutRun:
        """The highest-scoring run (the first one on ties)."""
        return max(self.runs, key=lambda r: r.score)

    @property
    def worst(self) -> RolloutRun:
        """The lowest-scoring run (the last one on ties)."""
        return min(reversed(self.runs), key=lambda r: r.score)

    def as_dict(self) -> dict[str, Any]:
        """Plain data: ids, scores and statistics (no responses)."""
        return {
            "task_id": self.task.id,
            "input": self.task.input,
            "expected": self.task.expected,
            "threads": [r.thread_id for r in self.runs],
            "scores": self.scores,
            "advantages": self.advantages,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
        }


def _copy(task: Task, index: int, temperature: float | None = None) -> Task:
    meta = {**task.metadata, "rollout_group": task.id, "rollout_index": index}
    if temperature is not None:
        meta["rollout_temperature"] = temperature
    if isinstance(task.expected, (str, int, float, bool)):
        meta["ground_truth"] = task.expected
    return dataclasses.replace(
        task,
        id=f"{task.id}.r{index}",
        conf=dataclasses.replace(task.conf),
        metadata=meta,
        new_thread=False,  # a rollout run again reads its stored runs back
    )


def _stats(group: RolloutGroup) -> RolloutGroup:
    scores = group.scores
    if scores:
        group.mean = statistics.fmean(scores)
        group.std = statistics.pstdev(scores) if len(scores) > 1 else 0.0
        group.min, group.max = min(scores), max(scores)
        for run in group.runs:
            run.advantage = run.score - group.mean
    return group


async def _score(
    task: Task,
    response: TaskResponse,
    fn: RewardFn,
    threshold: float,
    checkpointer: BaseCheckpointSaver[Any] | None,
) -> tuple[TaskResponse, Score]:
    stored = episode_reward(response.state.get("rewards") or [])
    if stored is not None and stored.get("score") is not None:  # a finished run read back
        return response, Score(
            score=float(stored["score"]),
            status=str(stored.get("status")),
            feedback=stored.get("feedback"),
            reward_fn=str(stored.get("reward_fn", "")),
            expected=task.expected,
        )
    score = score_response(response, task.expected, fn, threshold=threshold)
    if response.status not in ("finished", "max_steps") or not response.state.get("trace"):
        return response, score  # a run that has not ended keeps its state (and error) as is
    return await store_score(task, score, checkpointer=checkpointer), score


async def rollout(
    tasks: Task | Sequence[Task],
    *,
    n: int = 4,
    reward_fn: RewardFn = exact,
    threshold: float = 1.0,
    concurrency: int = 8,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    temperature: float | None = None,
    run_conf: RunConfig | None = None,
) -> list[RolloutGroup]:
    """Run each task ``n`` times (at most ``concurrency`` runs at once), score and group them.

    Args:
        tasks: One task or many; each needs a unique id, and ``task.expected`` is the ground
            truth the reward function compares the answer with.
        n: Runs per task (``k`` of GRPO). Sampling comes from the agents' configured
            temperature (``AgentConfig.llm_temperature``) unless ``temperature`` is given; at
            temperature 0 the runs of a task are usually the same.
        reward_fn: ``fn(answer, expected) -> score`` (see :mod:`aworld_graph.rewards`).
        threshold: Scores at or above it have status ``pass``.
        concurrency: Most runs in flight at once, over all tasks.
        checkpointer: Where runs are stored (default: the default database).
        temperature: Sample every model call of these runs at this temperature (OpenAI-
            compatible models, the embedded one included; test models ignore it). Recorded
            in each run's metadata as ``rollout_temperature``.
        run_conf: Where the runs go (``RunConfig(engine_name="ray", worker_num=N)``: Ray
            workers sharing ``checkpointer``); scoring happens here, on the driver.

    Returns:
        One :class:`RolloutGroup` per task, in the order given. Running a rollout again with
        the same task ids reads the stored runs back instead of running them again.
    """
    if n < 1:
        raise DefinitionError(f"rollout(n={n}): n must be at least 1")
    todo = [tasks] if isinstance(tasks, Task) else list(tasks)
    if len({t.id for t in todo}) != len(todo):
        raise DefinitionError("rollout: two tasks share an id; each task needs its own id")
    saver = checkpointer if checkpointer is not None else open_store(shared=True)
    copies = {t.id: [_copy(t, i, temperature) for i in range(n)] for t in todo}
    with sampling_temperature(temperature):
        responses = await run_tasks(
            [c for cs in copies.values() for c in cs],
            concurrency=concurrency,
            checkpointer=saver,
            run_conf=run_conf,
        )
    groups: list[RolloutGroup] = []
    for task in todo:
        group = RolloutGroup(task=task)
        for index, copy in enumerate(copies[task.id]):
            response, score = await _score(copy, responses[copy.id], reward_fn, threshold, saver)
            group.runs.append(
                RolloutRun(
                    index=index,
                    thread_id=copy.id,
                    response=response,
                    score=score.score,
                    status=score.status,
                )
            )
        groups.append(_stats(group))
    return groups
