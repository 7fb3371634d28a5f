"""The search on the synthetic benchmark: it reaches the best achievable reward from a weak seed
within its budget, every operator contributes (ablations), and a crashed run resumes."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aworld_graph.checkpoint import open_store
from aworld_graph.errors import ConfigError
from aworld_graph.meta import Budget, OptimizeResult
from aworld_graph.meta import synthetic as syn
from aworld_graph.meta.demos import demo_inputs
from aworld_graph.meta.store import MetaStore
from tests.meta.helpers import BUDGET, OPERATORS, ROOT, run_synthetic


@dataclass
class Bench:
    oracle: float
    full: OptimizeResult
    ablations: dict[str, OptimizeResult]
    full_calls: int


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Bench:
    async def go() -> Bench:
        root = tmp_path_factory.mktemp("bench")
        tasks = syn.synthetic_tasks()
        oracle = await syn.oracle_score(tasks, root / "oracle.db")
        student = syn.student_model()
        full = await run_synthetic(root / "full", model=student)
        ablations = {}
        for left_out in OPERATORS:
            names = tuple(n for n in OPERATORS if n != left_out)
            ablations[left_out] = await run_synthetic(root / f"without-{left_out}", names)
        return Bench(oracle=oracle, full=full, ablations=ablations, full_calls=len(student.calls))

    return asyncio.run(go())


def test_from_a_weak_seed_the_optimizer_reaches_90_percent_of_the_best_within_budget(
    bench: Bench,
) -> None:
    full = bench.full
    seed_test, best_test = full.seed.score("test"), full.best.score("test")
    assert bench.oracle >= 0.9  # the best this world allows
    assert seed_test is not None and seed_test < 0.5 * bench.oracle  # a weak seed
    assert best_test is not None and best_test >= 0.9 * bench.oracle
    assert full.comparison is not None and full.comparison.low > 0  # held-out gain, paired
    assert full.spent.llm_calls <= BUDGET.llm_calls and full.spent.iterations <= BUDGET.iterations
    used = {c.operator for c in full.lineage()[1:]}
    assert {"rewrite_prompt", "demos", "insert_critic"} <= used  # every operator is on the path


@pytest.mark.parametrize("left_out", OPERATORS)
def test_each_operator_contributes(bench: Bench, left_out: str) -> None:
    ablated = bench.ablations[left_out]
    score = ablated.best.score("test")
    assert score is not None
    assert score < bench.full.best.score("test")  # type: ignore[operator]
    assert score < 0.9 * bench.oracle  # without it the bar is out of reach
    assert ablated.spent.llm_calls <= BUDGET.llm_calls


def test_dev_confirms_and_test_reports(bench: Bench) -> None:
    full = bench.full
    best = full.best
    assert "dev" in best.evals and "test" in best.evals and "test" in full.seed.evals
    confirmed = [
        c for c in full.candidates if "dev" in c.evals and c.status in ("seed", "accepted")
    ]
    assert best.score("dev") == max(c.score("dev") for c in confirmed)  # type: ignore[type-var]
    assert all("test" not in c.evals for c in full.candidates if c not in (best, full.seed))
    for c in full.candidates:  # the gain is measured on the tasks that are not demonstrations
        if c.status not in ("accepted", "rejected"):
            continue
        parent = full.candidate(c.parent)  # type: ignore[arg-type]
        kept = [t.id for t in full.tasks.train if t.input not in demo_inputs(c.spec)]
        gain = sum(c.evals["train"].scores[t] - parent.evals["train"].scores[t] for t in kept)
        assert (gain > 0) == (c.status == "accepted"), c.id


@pytest.mark.parametrize("after", [150, 420])  # mid-search; in the final test evaluation
async def test_a_killed_optimization_resumes_where_it_stopped(
    tmp_path: Path, bench: Bench, after: int
) -> None:
    """A process running the optimization dies in the middle of an evaluation; running the same
    optimization again finishes it with the same result, redoing only what was in flight."""
    reference = bench.full
    crashed = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.meta._crash",
        str(tmp_path / "crash"),
        str(after),
        cwd=ROOT,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(crashed.communicate(), 120)
    assert crashed.returncode == 3, stderr.decode()
    with open_store(tmp_path / "crash" / "runs.db", create=False) as saver:
        store = MetaStore(saver)
        (run_id,) = store.runs()
        assert store.run(run_id)["status"] == "running"  # type: ignore[index]
        before = len(store.candidates(run_id))
    events: list[dict[str, Any]] = []
    second = syn.student_model()
    resumed = await run_synthetic(tmp_path / "crash", model=second, on_event=events.append)
    assert (
        events[0]["event"] == "start" and events[0]["resumed"] and events[0]["candidates"] == before
    )
    assert resumed.run_id == run_id == reference.run_id
    assert [(c.id, c.status, c.score("train"), c.score("dev")) for c in resumed.candidates] == [
        (c.id, c.status, c.score("train"), c.score("dev")) for c in reference.candidates
    ]
    assert resumed.best.id == reference.best.id
    assert resumed.best.score("test") == reference.best.score("test")
    redone = after - 1 + len(second.calls) - bench.full_calls
    assert 0 <= redone <= 8  # only the steps in flight at the kill ran again
    again = syn.student_model()
    repeat = await run_synthetic(tmp_path / "crash", model=again)
    assert again.calls == [] and repeat.best.id == reference.best.id  # a finished run is only read


async def test_the_budget_stops_the_search_and_keeps_room_for_the_test(tmp_path: Path) -> None:
    result = await run_synthetic(tmp_path, budget=Budget(llm_calls=300))
    assert result.stop_reason.startswith("budget: calls")
    assert result.spent.llm_calls <= 300
    assert "test" in result.best.evals


def test_budget_parsing() -> None:
    b = Budget.parse("calls=400, tokens=2e5,time=20m,iterations=7")
    assert (b.llm_calls, b.tokens, b.seconds, b.iterations) == (400, 200000, 1200.0, 7)
    assert Budget.parse("250").llm_calls == 250 and Budget.parse("time=90").seconds == 90
    assert str(Budget.parse("calls=10,time=1h")) == "calls=10,time=3600s"
    for bad, words in [
        ("cost=3", "unknown limit 'cost'"),
        ("calls=many", "not a number"),
        ("", "sets no limit"),
    ]:
        with pytest.raises(ConfigError, match=words):
            Budget.parse(bad)


async def test_an_optimizer_agent_that_only_repeats_itself_is_not_asked_forever(
    tmp_path: Path,
) -> None:
    from aworld_graph.meta import default_operators, optimize
    from aworld_graph.testing import FunctionModel

    def echo(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        current = str(messages[-1]["content"]).split("<prompt>\n", 1)[1].split("\n</prompt>", 1)[0]
        return f"<prompt>{current}</prompt>"

    teacher = FunctionModel(echo)
    result = await optimize(
        syn.write_seed(tmp_path),
        syn.synthetic_tasks(8, 4, 4),
        budget=Budget(iterations=20),
        operators=default_operators(teacher, names=("rewrite_prompt",)),
        model=syn.student_model(),
        db=tmp_path / "runs.db",
    )
    assert len(teacher.calls) == 4  # RewritePrompt.max_attempts, each with other failing runs
    assert [s.outcome for s in result.steps] == ["invalid"] * 4 + ["skipped"]
    assert result.stop_reason.startswith("nothing left to try")
    assert len({c.messages[-1]["content"] for c in teacher.calls}) == 4
