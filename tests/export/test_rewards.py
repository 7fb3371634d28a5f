"""Reward functions, scoring, and episode rewards stored in the run's trajectory."""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Agent, DefinitionError, Runners, Task
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.rewards import (
    as_trl_reward,
    as_verl_score,
    contains,
    episode_reward,
    exact,
    numeric,
    regex,
    score_response,
    store_score,
)
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call
from tests.export.conftest import add


@pytest.mark.parametrize(
    ("fn", "answer", "expected", "score"),
    [
        (exact, "Paris.", "paris", 1.0),
        (exact, "Paris is it", "paris", 0.0),
        (exact, "Lyon", ["Paris", "Lyon"], 1.0),
        (exact, None, "paris", 0.0),
        (partial(exact, case_sensitive=True), "paris", "Paris", 0.0),
        (contains, "The capital is Paris.", "paris", 1.0),
        (contains, "The capital is Lyon.", "paris", 0.0),
        (numeric, "so 17*23 = 391", 391, 1.0),
        (numeric, "about 3.1416", 3.14159, 0.0),
        (partial(numeric, tolerance=1e-3), "about 3.1416", 3.14159, 1.0),
        (partial(numeric, tolerance=0.01, relative=True), "1,000", "1005", 1.0),
        (numeric, "no number here", 5, 0.0),
        (regex, "ticket A-17 opened", r"A-\d+", 1.0),
        (regex, "ticket opened", r"A-\d+", 0.0),
    ],
)
def test_builtin_reward_functions(fn: Any, answer: str | None, expected: Any, score: float) -> None:
    assert fn(answer, expected) == score


def test_user_callables_may_return_bool_pairs_or_read_the_response() -> None:
    assert score_response("yes", None, lambda a, e: a == "yes").score == 1.0
    scored = score_response("meh", "x", lambda a, e: (0.25, "too vague"), threshold=0.5)
    assert (scored.score, scored.status, scored.feedback) == (0.25, "fail", "too vague")

    def by_length(answer: str | None, expected: Any, *, response: Any) -> float:
        return 1.0 if response is None else float(len(response.answer) == expected)

    assert score_response("abc", 3, by_length).score == 1.0
    with pytest.raises(DefinitionError, match="returned 'high'"):
        score_response("x", None, lambda a, e: "high")
    with pytest.raises(DefinitionError, match="finite"):
        score_response("x", None, lambda a, e: float("nan"))


def test_trl_and_verl_adapters_use_the_same_functions() -> None:
    reward = as_trl_reward(numeric)
    completions = [
        [{"role": "assistant", "content": "it is 5"}],
        [{"role": "assistant", "content": "6"}],
    ]
    assert reward(prompts=[[], []], completions=completions, ground_truth=["5", "5"]) == [1.0, 0.0]
    assert reward(completions=["5", "x"], ground_truth=[5, 5]) == [1.0, 0.0]
    assert as_verl_score(contains)("src", "the answer is Paris", "paris", {}) == 1.0


async def test_store_score_appends_an_episode_reward_visible_everywhere(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "r.db")
    agent = Agent(
        name="solver", tools=[add], model=ScriptedModel([tool_call("add", {"a": 2, "b": 3}), "5"])
    )
    task = Task(input="2+3?", agent=agent, id="scored", expected=5)
    response = await Runners.run_task(task, checkpointer=saver)
    score = score_response(response[task.id], task.expected, numeric)
    scored = await store_score(task, score, checkpointer=saver)
    last = scored.trajectory[-1]
    assert last["reward"]["score"] == 1.0 and last["reward"]["status"] == "pass"
    item = episode_reward(scored.state["rewards"])
    assert item is not None
    assert (
        item["source"] == "reward_fn" and item["level"] == "episode" and item["ground_truth"] == 5
    )
    assert item["step"] == max(r["step"] for r in scored.state["trace"])
    with sqlite3.connect(tmp_path / "r.db") as conn:
        rows = conn.execute(
            "SELECT reward FROM trajectory WHERE thread_id = 'scored' AND reward IS NOT NULL"
        ).fetchall()
    assert rows == [(1.0,)]
    again = await Runners.resume("scored", agent=agent, checkpointer=saver)
    assert again.status == "finished" and again.answer == "5"  # the reward update ends nothing


async def test_store_score_on_a_run_with_no_step_says_so(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "r.db")
    task = Task(input="x", agent=Agent(name="a", model=FunctionModel(lambda m, t: "y")), id="never")
    with pytest.raises(DefinitionError, match="no step"):
        await store_score(task, score_response("y", "y"), checkpointer=saver)
