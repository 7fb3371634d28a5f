"""Hostile and broken edge conditions (issue 22): deep nesting and private names are
DefinitionErrors when compiled; a condition that fails on the run's state stops the run with an
error naming the edge, recorded in the trajectory, and the run resumes once it is fixed."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Runners, Swarm, edge
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.errors import DefinitionError
from aworld_graph.swarm.conditions import MAX_CHARS, compile_condition
from aworld_graph.swarm.nodes import Node


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not " * 400 + "answer", "nests too deeply"),
        ("- " * 600 + "score", "nests too deeply"),
        ("(" * 250 + "score" + ")" * 250, "nested parentheses"),
        ("len(" * 100 + "answer" + ")" * 100, "nests too deeply"),
        ("[" * 60 + "1" + "]" * 60, "nests too deeply"),
        ("not " * 5000 + "answer", f"at most {MAX_CHARS}"),
        (" or ".join(["score > 1"] * 400), f"at most {MAX_CHARS}"),
    ],
)
def test_deep_or_huge_expressions_are_definition_errors(text: str, says: str) -> None:
    with pytest.raises(DefinitionError, match="^edge a -> b: .*condition") as info:
        compile_condition(text, "edge a -> b")
    assert says in str(info.value)
    assert len(str(info.value)) < 400  # the expression is shortened in the message


@pytest.mark.parametrize(
    "text",
    [
        "context.__class__",
        "context.x.__class__.__mro__",
        "outputs.__dict__ == 1",
        "len(context._private) > 0",
        "__import__",
    ],
)
def test_private_and_dunder_names_are_refused(text: str) -> None:
    with pytest.raises(DefinitionError, match="not allowed"):
        compile_condition(text, "edge a -> b")


def test_ordinary_nesting_still_compiles() -> None:
    assert compile_condition("not not (score >= 0.5)")({"rewards": [{"score": 0.9}]})
    assert compile_condition("(" * 20 + "answer == 'x'" + ")" * 20)({"answer": "x"})


@pytest.mark.parametrize(
    ("text", "state", "kind"),
    [
        ("-score > 1", {}, "TypeError"),  # no score yet
        ("-answer > 1", {"answer": "text"}, "TypeError"),
        ("len(steps) > 1", {"steps": 3}, "TypeError"),
        ("-last < 0", {"messages": [{"role": "user", "content": "hi"}]}, "TypeError"),
    ],
)
def test_a_type_error_names_the_edge_and_the_fix(
    text: str, state: dict[str, Any], kind: str
) -> None:
    condition = compile_condition(text, "edge a -> b")
    with pytest.raises(DefinitionError) as info:
        condition(state)
    message = str(info.value)
    assert message.startswith(f"edge a -> b: condition {text!r} failed on the run's state ({kind}")
    assert "fix the condition" in message and "resume" in message


def test_a_raising_predicate_names_its_edge() -> None:
    def picky(state: Any) -> bool:
        raise KeyError("missing")

    with pytest.raises(DefinitionError, match=r"edge a -> b: condition 'picky' failed .*KeyError"):
        edge("a", "b", picky).condition({})  # type: ignore[union-attr]


calls: list[str] = []


def _first(state: Any) -> dict[str, Any]:
    calls.append("first")
    return {"answer": "text", "context": {"n": "7"}}


def _second(state: Any) -> dict[str, Any]:
    calls.append("second")
    return {"answer": "second ran"}


def _swarm(condition: str) -> Swarm:
    first, second = Node(name="first", fn=_first), Node(name="second", fn=_second)
    return Swarm(first, second, topology=[first], edges=[edge("first", "second", condition)])


@pytest.mark.parametrize("broken", ["-answer > 1", "-context.n > 0", "-last < 0"])
def test_a_failing_condition_is_recorded_and_the_run_resumes_after_the_fix(
    tmp_path: Path, broken: str
) -> None:
    calls.clear()
    db = tmp_path / "runs.db"
    saver = TrajectorySaver(db)
    response = Runners.sync_run(
        input="go", swarm=_swarm(broken), task_id="cond", checkpointer=saver
    )
    assert response.status == "error"
    assert f"edge first -> second: condition {broken!r} failed" in (response.msg or "")
    assert "first__route failed" in response.summary()
    saver.close()
    with sqlite3.connect(db) as conn:
        errors = [r[0] for r in conn.execute("SELECT error FROM trajectory") if r[0]]
    assert any("edge first -> second" in e for e in errors)

    saver = TrajectorySaver(db)
    again = asyncio.run(
        Runners.resume("cond", swarm=_swarm("number(context.n) > 1"), checkpointer=saver)
    )
    saver.close()
    assert again.status == "finished" and again.answer == "second ran"
    assert calls == ["first", "second"]  # the node before the condition did not run again


def test_a_condition_that_keeps_failing_fails_again_on_resume(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "runs.db")
    Runners.sync_run(input="go", swarm=_swarm("-answer > 1"), task_id="c2", checkpointer=saver)
    again = asyncio.run(Runners.resume("c2", swarm=_swarm("-answer > 2"), checkpointer=saver))
    saver.close()
    assert again.status == "error" and "'-answer > 2' failed" in (again.msg or "")
