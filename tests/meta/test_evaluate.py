"""Evaluation: concurrent, checkpointed, tagged runs; bootstrap intervals; cost; read-back."""

from __future__ import annotations

import random
import statistics
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Agent
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.export import RunFilter, iter_runs
from aworld_graph.meta import TaskItem, bootstrap_ci, evaluate, paired_bootstrap
from aworld_graph.rewards import numeric
from aworld_graph.testing import FunctionModel


def test_bootstrap_interval_contains_the_mean_and_narrows_with_more_data() -> None:
    rng = random.Random(1)
    small = [float(rng.random() < 0.6) for _ in range(20)]
    large = [float(rng.random() < 0.6) for _ in range(400)]
    lo, hi = bootstrap_ci(small)
    assert lo <= statistics.fmean(small) <= hi
    lo2, hi2 = bootstrap_ci(large)
    assert lo2 <= statistics.fmean(large) <= hi2
    assert hi2 - lo2 < hi - lo
    assert bootstrap_ci([1.0, 1.0]) == (1.0, 1.0)
    assert bootstrap_ci(small) == bootstrap_ci(small)  # seeded: reproducible


def test_paired_bootstrap_sees_a_consistent_gain_and_no_gain() -> None:
    a = [0.0, 1.0] * 15
    better = [1.0, 1.0] * 15
    gain = paired_bootstrap(a, better)
    assert (
        gain.diff == pytest.approx(0.5) and gain.low > 0 and gain.p_better == 1.0 and gain.n == 30
    )
    same = paired_bootstrap(a, a)
    assert same.diff == 0 and same.low == same.high == 0
    shuffled = paired_bootstrap(a, list(reversed(a)))
    assert shuffled.low < 0 < shuffled.high
    assert "paired bootstrap, n=30" in str(gain)
    with pytest.raises(ValueError, match="same tasks"):
        paired_bootstrap([1.0], [1.0, 0.0])


def _adder(calls: list[str]) -> Agent:
    """Answers ``a+b`` questions, wrongly when a is odd."""

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        question = str(messages[-1]["content"])
        calls.append(question)
        a, b = (int(x) for x in question.rstrip("?").split("+"))
        return f"It is {a + b + (a % 2)}."

    return Agent(name="adder", model=FunctionModel(reply))


async def test_runs_are_scored_tagged_costed_and_read_back(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "runs.db")
    calls: list[str] = []
    items = [TaskItem(id=f"t{i}", input=f"{i}+1?", expected=i + 1, split="dev") for i in range(10)]
    ev = await evaluate(
        _adder(calls),
        items,
        reward=numeric,
        candidate="c007",
        split="dev",
        run_id="r1",
        checkpointer=saver,
    )
    assert ev.scores == {f"t{i}": float(i % 2 == 0) for i in range(10)}
    assert ev.mean == 0.5 and ev.ci_low < 0.5 < ev.ci_high and ev.n == 10
    assert ev.llm_calls == 10 and ev.tokens > 0 and ev.seconds > 0 and ev.errors == 0
    assert ev.threads["t3"] == "meta-r1-c007-dev-t3.r0"
    runs = {r.metadata["task"]: r for r in iter_runs(saver)}
    assert set(runs) == {f"t{i}" for i in range(10)}
    assert {
        (r.metadata["candidate"], r.metadata["split"], r.metadata["meta_run"])
        for r in runs.values()
    } == {("c007", "dev", "r1")}
    assert runs["t2"].reward == 1.0 and runs["t3"].reward == 0.0
    assert [r.metadata["task"] for r in iter_runs(saver, RunFilter(min_reward=1.0))].count(
        "t3"
    ) == 0

    again = await evaluate(
        _adder(calls),
        items,
        reward=numeric,
        candidate="c007",
        split="dev",
        run_id="r1",
        checkpointer=saver,
    )
    assert len(calls) == 10  # finished runs are read back, not run again
    assert again.scores == ev.scores and again.llm_calls == ev.llm_calls
    assert again.as_dict() | {"seconds": 0} == type(ev).from_dict(again.as_dict()).as_dict() | {
        "seconds": 0
    }


async def test_concurrency_is_bounded(tmp_path: Path) -> None:
    import asyncio

    active, peak = 0, 0

    async def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.02)
        active -= 1
        return "1"

    agent = Agent(name="slow", model=FunctionModel(reply))
    items = [TaskItem(id=f"t{i}", input=f"q{i}", expected=1, split="train") for i in range(9)]
    ev = await evaluate(
        agent, items, reward=numeric, concurrency=3, checkpointer=TrajectorySaver(tmp_path / "c.db")
    )
    assert ev.mean == 1.0 and peak == 3


async def test_a_failing_run_scores_zero_and_is_counted_as_an_error(tmp_path: Path) -> None:
    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if "boom" in str(messages[-1]["content"]):
            raise RuntimeError("model exploded")
        return "7"

    agent = Agent(name="fragile", model=FunctionModel(reply))
    items = [
        TaskItem(id="ok", input="fine", expected=7, split="test"),
        TaskItem(id="bad", input="boom", expected=7, split="test"),
    ]
    ev = await evaluate(
        agent, items, reward=numeric, checkpointer=TrajectorySaver(tmp_path / "e.db")
    )
    assert ev.scores == {"ok": 1.0, "bad": 0.0} and ev.statuses["bad"] == "error" and ev.errors == 1


async def test_an_errored_run_is_read_back_once_recorded_and_retried_only_when_asked(
    tmp_path: Path,
) -> None:
    """A deterministic runaway (here: a model that always fails on one input) costs its calls
    once: evaluating again with the same ids reads the error back; retry_errors runs it again."""
    seen: list[str] = []

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        question = str(messages[-1]["content"])
        seen.append(question)
        if "runaway" in question:
            raise RuntimeError("the argument ran past the timeout")
        return "7"

    agent = Agent(name="fragile", model=FunctionModel(reply))
    saver = TrajectorySaver(tmp_path / "e.db")
    items = [
        TaskItem(id="ok", input="fine", expected=7, split="train"),
        TaskItem(id="bad", input="runaway", expected=7, split="train"),
    ]
    first = await evaluate(agent, items, reward=numeric, run_id="r", checkpointer=saver)
    assert first.statuses == {"ok": "finished", "bad": "error"} and seen.count("runaway") == 1
    again = await evaluate(agent, items, reward=numeric, run_id="r", checkpointer=saver)
    assert seen.count("runaway") == 1 and seen.count("fine") == 1  # nothing ran again
    assert again.scores == first.scores == {"ok": 1.0, "bad": 0.0}
    assert again.statuses == first.statuses and again.threads == first.threads
    retried = await evaluate(
        agent, items, reward=numeric, run_id="r", checkpointer=saver, retry_errors=True
    )
    assert seen.count("runaway") == 2 and seen.count("fine") == 1  # only the error ran again
    assert retried.statuses["bad"] == "error" and retried.scores["bad"] == 0.0


async def test_the_trajectory_reward_column_holds_task_rewards_not_critic_scores(
    tmp_path: Path,
) -> None:
    import sqlite3

    from aworld_graph.meta import synthetic as syn
    from aworld_graph.meta.candidates import materialize

    tasks = syn.synthetic_tasks(train=4, dev=0, test=0)
    saver = TrajectorySaver(tmp_path / "t.db")
    ev = await evaluate(
        materialize(syn.oracle_spec(), model=syn.student_model()),
        tasks.train,
        reward=tasks.reward,
        run_id="t",
        checkpointer=saver,
    )
    with sqlite3.connect(tmp_path / "t.db") as conn:
        rows = conn.execute(
            "SELECT thread_id, nodes, reward, changes FROM trajectory WHERE thread_id LIKE 'meta-t-%'"
        ).fetchall()
    critic_steps = [r for r in rows if "solver_tool_check" in r[1]]
    assert critic_steps and all(r[2] is None for r in critic_steps)  # the verdicts are kept apart
    assert all('"judged":"solver"' in r[3] for r in critic_steps)  # ... in the step's changes
    scored = {r[0]: r[2] for r in rows if r[2] is not None}
    assert scored == {ev.threads[t]: s for t, s in ev.scores.items()}  # one task reward per run
