"""Evaluate a workflow version on a split: concurrent, checkpointed, tagged runs; mean reward
with a bootstrap confidence interval; and what it cost (LLM calls, tokens, wall time).

>>> ev = await evaluate(swarm, tasks.dev, reward=tasks.reward, candidate="c003")  # doctest: +SKIP
>>> ev.mean, ev.ci, ev.llm_calls                                                   # doctest: +SKIP

Each task runs once on thread ``<prefix>-<task id>.r0`` through
:func:`~aworld_graph.rollout.rollout`, so it is checkpointed, scored with the reward
function and stored as an episode reward; its run metadata carries ``meta_run``,
``candidate``, ``split`` and ``task``. Evaluating again with the same ids reads the finished
runs back instead of running them again (that is how an interrupted optimization resumes); a
run that ended in an error is read back too, as the error it was (a deterministic runaway is
recorded once, not repeated on every resume), unless ``retry_errors=True``. A run that was
stopped mid-way (a kill) is continued from its last checkpoint.
"""

from __future__ import annotations

import random
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..checkpoint import open_store
from ..config import RunConfig
from ..export.runs import Run, load_run
from ..rewards import RewardFn, episode_reward, score_response
from ..swarm.graph import GraphSource
from ..task import Task
from ..trajectory import usage_of
from .candidates import Evaluation
from .tasks import TaskItem

__all__ = [
    "Comparison",
    "Evaluation",
    "bootstrap_ci",
    "evaluate",
    "paired_bootstrap",
    "thread_prefix",
]


def bootstrap_ci(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (``(nan, nan)`` when empty)."""
    if not values:
        return (float("nan"), float("nan"))
    if len(set(values)) == 1:
        return (float(values[0]), float(values[0]))
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2
    return means[int(tail * resamples)], means[min(resamples - 1, int((1 - tail) * resamples))]


@dataclass(kw_only=True)
class Comparison:
    """Version B against version A on the same tasks (paired by task)."""

    diff: float
    """Mean of ``b - a`` over the tasks."""
    low: float
    """Lower end of the bootstrap interval of ``diff``."""
    high: float
    """Upper end."""
    p_better: float
    """Share of bootstrap resamples in which B's mean beats A's."""
    n: int
    """Tasks compared."""
    confidence: float = 0.95
    """Confidence level of the interval."""

    def __str__(self) -> str:
        return (
            f"{self.diff:+.3f} [{self.low:+.3f}, {self.high:+.3f}] "
            f"({self.confidence:.0%} paired bootstrap, n={self.n})"
        )


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Paired bootstrap of ``mean(b - a)``: tasks are resampled, each keeping both scores."""
    if len(a) != len(b):
        raise ValueError(f"paired_bootstrap needs scores on the same tasks ({len(a)} vs {len(b)})")
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    if not diffs:
        return Comparison(diff=float("nan"), low=float("nan"), high=float("nan"), p_better=0.0, n=0)
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2
    return Comparison(
        diff=sum(diffs) / n,
        low=means[int(tail * resamples)],
        high=means[min(resamples - 1, int((1 - tail) * resamples))],
        p_better=sum(m > 0 for m in means) / resamples,
        n=n,
        confidence=confidence,
    )


def thread_prefix(run_id: str, candidate: str, split: str) -> str:
    """The start of the thread ids of one evaluation's runs."""
    return f"meta-{run_id}-{candidate}-{split}"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text)


async def evaluate(
    swarm: GraphSource,
    items: Sequence[TaskItem],
    *,
    reward: RewardFn,
    threshold: float = 1.0,
    candidate: str = "c000",
    split: str = "train",
    run_id: str = "eval",
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    concurrency: int = 4,
    run_conf: RunConfig | None = None,
    retry_errors: bool = False,
) -> Evaluation:
    """Run ``swarm`` once on every task of ``items`` (at most ``concurrency`` at once) and score
    the answers with ``reward``; see the module docstring for where the runs go.
    ``run_conf=RunConfig(engine_name="ray", ...)`` fans the runs out to Ray workers.
    ``retry_errors``: run again the tasks whose stored run ended in an error (by default they
    are read back and scored as they ended)."""
    from ..rollout import rollout

    prefix = thread_prefix(run_id, candidate, split)
    saver = checkpointer if checkpointer is not None else open_store(shared=True)
    failed: dict[str, Run] = {}
    if not retry_errors:
        for item in items:
            found = load_run(saver, f"{prefix}-{_safe(item.id)}.r0")
            if found is not None and found.status == "error":
                failed[item.id] = found
    tasks = [
        Task(
            input=item.input,
            swarm=swarm,
            id=f"{prefix}-{_safe(item.id)}",
            expected=item.expected,
            metadata={"meta_run": run_id, "candidate": candidate, "split": split, "task": item.id},
        )
        for item in items
        if item.id not in failed
    ]
    started = time.perf_counter()
    groups = await rollout(
        tasks,
        n=1,
        reward_fn=reward,
        threshold=threshold,
        concurrency=concurrency,
        checkpointer=saver,
        run_conf=run_conf,
    )
    ran = {g.task.metadata["task"]: g.runs[0] for g in groups}
    result = Evaluation(candidate=candidate, split=split)
    for item in items:
        if item.id in failed:
            stored = failed[item.id]
            done = episode_reward(stored.rewards)
            score = (
                float(done["score"])
                if done is not None and done.get("score") is not None
                else score_response(stored.answer, item.expected, reward).score
            )
            calls, usage = usage_of(stored.trace)
            result.scores[item.id] = score
            result.threads[item.id] = stored.thread_id
            result.statuses[item.id] = "error"
            result.llm_calls += calls
            result.tokens += usage["total_tokens"]
            continue
        done_run = ran[item.id]
        result.scores[item.id] = done_run.score
        result.threads[item.id] = done_run.thread_id
        result.statuses[item.id] = done_run.response.status
        result.llm_calls += done_run.response.llm_calls
        result.tokens += int(done_run.response.usage.get("total_tokens", 0))
    result.seconds = time.perf_counter() - started
    values = list(result.scores.values())
    if values:
        result.mean = statistics.fmean(values)
        result.ci_low, result.ci_high = bootstrap_ci(values)
    return result
