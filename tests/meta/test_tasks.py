"""Task sets: JSONL files with splits and a reward; the shipped, generated sets."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from aworld_graph.errors import ConfigError
from aworld_graph.meta import (
    TaskItem,
    TaskSet,
    load_tasks,
    reasoning_gym_tasks,
    save_tasks,
    shipped,
)
from aworld_graph.meta.generate import (
    SHIPPED_SIZE,
    arithmetic_tasks,
    expression_tasks,
    tool_use_tasks,
)
from aworld_graph.meta.tasks import TASKSET_DIR, tool_use_root
from aworld_graph.rewards import contains, numeric


def test_round_trip_keeps_tasks_splits_header_and_reward(tmp_path: Path) -> None:
    tasks = TaskSet(
        name="tiny",
        items=[
            TaskItem(id="a", input="1+1?", expected=2, split="train", metadata={"k": 1}),
            TaskItem(id="b", input="2+2?", expected=[4, "four"], split="test"),
        ],
        reward=numeric,
        reward_name="numeric",
        threshold=0.5,
    )
    path = save_tasks(tasks, tmp_path / "t.jsonl")
    back = load_tasks(path)
    assert back.name == "tiny" and back.reward is numeric and back.threshold == 0.5
    assert back.items == tasks.items
    assert (
        [t.id for t in back.train] == ["a"]
        and back.dev == []
        and [t.id for t in back.test] == ["b"]
    )
    assert load_tasks(path, reward="contains").reward is contains
    assert back.fingerprint() == tasks.fingerprint()


def test_lines_without_split_get_a_stable_split_from_their_id(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = [{"id": f"t{i}", "input": f"q{i}", "expected": i} for i in range(200)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    first = {t.id: t.split for t in load_tasks(path).items}
    path.write_text(
        "\n".join(
            json.dumps(r) for r in reversed(rows + [{"id": "new", "input": "x", "expected": 0}])
        )
    )
    second = {t.id: t.split for t in load_tasks(path).items}
    assert all(second[k] == v for k, v in first.items())
    counts = {s: sum(1 for v in first.values() if v == s) for s in ("train", "dev", "test")}
    assert 70 < counts["train"] < 130 and counts["dev"] > 25 and counts["test"] > 25


def test_every_problem_is_reported_at_once_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        "\n".join(
            [
                '{"input": "ok", "expected": 1, "id": "x"}',
                "not json",
                '{"input": 3, "expected": 1}',
                '{"input": "dup", "expected": 1, "id": "x"}',
                '{"input": "s", "expected": 1, "split": "valid"}',
                '{"taskset": {"reward": "numeric"}}',
            ]
        )
    )
    with pytest.raises(ConfigError) as info:
        load_tasks(path)
    text = str(info.value)
    assert "5 problem(s)" in text
    for line, words in [
        (2, "not JSON"),
        (3, "string 'input'"),
        (4, "used twice"),
        (5, "split 'valid'"),
        (6, "first line"),
    ]:
        assert f"{path}:{line}: " in text and words in text
    with pytest.raises(ConfigError, match="unknown reward 'fuzzy'"):
        load_tasks(
            save_tasks(
                [TaskItem(id="a", input="q", expected=1, split="train")], tmp_path / "r.jsonl"
            ),
            reward="fuzzy",
        )
    with pytest.raises(ConfigError, match="cannot read task set"):
        load_tasks(tmp_path / "missing.jsonl")


def test_shipped_arithmetic_set_is_what_its_generator_makes_and_answers_are_right() -> None:
    tasks = shipped("arithmetic")
    assert tasks.reward is numeric and tasks.source == TASKSET_DIR / "arithmetic.jsonl"
    assert (len(tasks.train), len(tasks.dev), len(tasks.test)) == (100, 50, 100)
    assert tasks.items == arithmetic_tasks(SHIPPED_SIZE).items  # regenerating: the same file
    assert len({t.input for t in tasks.items}) == len(tasks.items)  # no question twice
    from aworld_graph.environment.calculator import calculate

    for t in tasks.items:
        assert calculate(t.metadata["expression"]) == t.expected > 0
        assert t.metadata["expression"].count(" ") >= 4  # at least two operations
    assert len({t.metadata["template"] for t in tasks.test}) >= 5
    with pytest.raises(ConfigError, match="shipped: arithmetic, expressions, tool_use"):
        shipped("nope")


def test_shipped_expressions_are_what_their_generator_makes() -> None:
    tasks = shipped("expressions")
    assert tasks.items == expression_tasks(SHIPPED_SIZE).items and tasks.reward is numeric
    assert (len(tasks.train), len(tasks.dev), len(tasks.test)) == (100, 50, 100)
    assert len({t.input for t in tasks.items}) == len(tasks.items)
    assert expression_tasks(SHIPPED_SIZE).items[:24] == expression_tasks().items[:24]  # grown
    for t in tasks.items:
        assert t.input == f"What is {t.metadata['expression']}?"


def test_shipped_tool_use_set_matches_its_files(tmp_path: Path) -> None:
    tasks = shipped("tool_use")
    assert (len(tasks.train), len(tasks.dev), len(tasks.test)) == (16, 8, 16)
    regenerated = tool_use_tasks(tmp_path)
    assert regenerated.items == tasks.items
    root = tool_use_root()
    for f in (tmp_path / "records").iterdir():
        assert (root / "records" / f.name).read_text() == f.read_text()
    for t in tasks.items:
        values = []
        for name in t.metadata["files"]:
            record = dict(line.split(": ") for line in (root / name).read_text().splitlines())
            values.append(int(record[t.metadata["field"]]))
            assert name in t.input
        assert t.expected == sum(values)
    assert {t.metadata["kind"] for t in tasks.train} == {"lookup", "sum"}


def test_subset_keeps_the_first_tasks_of_each_split() -> None:
    small = shipped("arithmetic").subset(train=3, test=2)
    assert (len(small.train), len(small.dev), len(small.test)) == (3, 50, 2)
    assert small.train == shipped("arithmetic").train[:3]


def test_reasoning_gym_generators_become_task_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader speaks reasoning-gym's API (``create_dataset`` + ``score_answer``); here a
    stand-in package with that API, as reasoning-gym is an optional extra."""

    class Dataset(list):  # type: ignore[type-arg]
        def score_answer(self, answer: str | None, entry: dict) -> float:
            return 1.0 if answer is not None and answer.strip() == entry["answer"] else 0.0

    def create_dataset(name: str, *, size: int, seed: int) -> Dataset:
        return Dataset(
            {"question": f"{name} {i}+{seed}?", "answer": str(i + seed), "metadata": {}}
            for i in range(size)
        )

    monkeypatch.setitem(
        sys.modules, "reasoning_gym", types.SimpleNamespace(create_dataset=create_dataset)
    )
    tasks = reasoning_gym_tasks("sums", size=20, seed=3)
    assert len(tasks.items) == 20 and tasks.name == "rg-sums"
    first = tasks.items[0]
    assert first.input == "sums 0+3?" and tasks.reward("3", first.expected) == 1.0
    assert tasks.reward("4", first.expected) == 0.0
    assert {t.split for t in tasks.items} <= {"train", "dev", "test"}


def test_reasoning_gym_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    with pytest.raises(ConfigError, match="pip install reasoning-gym"):
        reasoning_gym_tasks("leg_counting")


async def test_tool_use_tasks_are_solved_through_the_bundled_environment_server(
    tmp_path: Path,
) -> None:
    """A model that reads the named files with the MCP server's ``read_file`` (and adds up)
    scores 1 on every task; one that answers without looking scores 0."""
    import re
    from typing import Any

    from aworld_graph.checkpoint import TrajectorySaver
    from aworld_graph.meta import evaluate
    from aworld_graph.meta.generate import tool_use_workflow
    from aworld_graph.spec import load_workflow
    from aworld_graph.testing import FunctionModel, tool_call

    def reader(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        question = next(str(m["content"]) for m in messages if m["role"] == "user")
        files = re.findall(r"records/\w+\.txt", question)
        results = [str(m["content"]) for m in messages if m["role"] == "tool"]
        if not results:
            return [tool_call("env__read_file", {"path": f}) for f in files]
        field = (
            "population"
            if "people" in question
            else "schools"
            if "schools" in question
            else "founded"
        )
        values = [int(re.search(rf"{field}: (\d+)", r).group(1)) for r in results]  # type: ignore[union-attr]
        return f"The answer is {sum(values)}."

    tasks = shipped("tool_use").subset(train=6, dev=0, test=0)
    saver = TrajectorySaver(tmp_path / "tool.db")
    workflow = tool_use_workflow(tmp_path)
    ev = await evaluate(
        load_workflow(workflow, model=FunctionModel(reader)),
        tasks.train,
        reward=tasks.reward,
        checkpointer=saver,
    )
    assert ev.mean == 1.0 and ev.llm_calls == 12
    guess = await evaluate(
        load_workflow(workflow, model=FunctionModel(lambda m, t: "The answer is 1000.")),
        tasks.train,
        reward=tasks.reward,
        checkpointer=saver,
        candidate="c001",
    )
    assert guess.mean == 0.0
