"""Outputs: node-card versions with lineage, the best workflow (it loads and is the best), and the
report (table, SVG plot, JSON)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.meta import OptimizeResult, evaluate, write_outputs
from aworld_graph.meta import synthetic as syn
from aworld_graph.spec import load_workflow
from tests.meta.helpers import ROOT, run_synthetic


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> OptimizeResult:
    import asyncio

    root = tmp_path_factory.mktemp("report")
    return asyncio.run(run_synthetic(root, selection="pareto", out=root))


def _load(path: Path) -> dict:  # type: ignore[type-arg]
    return yaml.safe_load(path.read_text())


async def test_the_written_workflow_is_the_best_candidate(
    result: OptimizeResult, tmp_path: Path
) -> None:
    workflow = result.outputs[0]
    assert workflow.parent.name == "workflows" and workflow.name == "synthetic.v2.yaml"
    text = workflow.read_text()
    assert text.startswith(
        f"# Written by `aworld-graph optimize` (run {result.run_id}, candidate {result.best.id})"
    )
    swarm = load_workflow(workflow, model=syn.student_model())
    assert sorted(swarm.nodes) == ["solver", "solver_tool_check"]
    assert _load(workflow)["version"] == 2
    tasks = syn.synthetic_tasks()
    ev = await evaluate(
        swarm, tasks.test, reward=tasks.reward, checkpointer=TrajectorySaver(tmp_path / "w.db")
    )
    assert ev.mean == result.best.score("test")
    assert ev.mean >= 0.9  # this run selects parents from the Pareto front: it gets there too


def test_card_versions_carry_version_parent_score_and_operator(result: OptimizeResult) -> None:
    cards = {p.name: _load(p) for p in result.outputs if p.parent.name == "nodes"}
    chain = result.lineage()
    made = {
        (n["name"], n["version"]): (c, result.candidate(c.parent))  # type: ignore[arg-type]
        for c in chain[1:]
        for n in c.spec["nodes"]
        if (before := result.candidate(c.parent).node(n["name"])) is None  # type: ignore[arg-type]
        or before["version"] != n["version"]
    }
    assert {f"{name}.v{version}.yaml" for name, version in made} == set(cards)
    for card in cards.values():
        maker, parent = made[(card["name"], card["version"])]
        assert list(card)[:3] == ["kind", "name", "version"]
        assert card["operator"] == maker.operator
        assert card["score"] == round(maker.score("train"), 4)  # type: ignore[arg-type]
        before = parent.node(card["name"])
        assert card.get("parent") == (f"{card['name']}@{before['version']}" if before else None)
    newest = max((c for c in cards.values() if c["name"] == "solver"), key=lambda c: c["version"])
    assert newest["demos"] and "calculator" in newest["system_prompt"]
    critic = cards["solver_tool_check.v1.yaml"]
    assert (critic["kind"], critic["judges"], critic["operator"]) == (
        "critic",
        "solver",
        "insert_critic",
    )


def test_report_has_a_row_per_iteration_a_plot_and_json(result: OptimizeResult) -> None:
    md, svg, js = result.outputs[-3:]
    text = md.read_text()
    assert f"best `{result.best.id}`" in text and "paired bootstrap" in text
    assert f"![score per iteration]({svg.name})" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == len(result.steps) + 1
    assert "| 0 | seed | c000 |" in text
    tree = ET.fromstring(svg.read_text())
    ns = "{http://www.w3.org/2000/svg}"
    dots = [c for c in tree.iter(f"{ns}circle") if c.find(f"{ns}title") is not None]
    assert len(dots) == len([c for c in result.candidates if c.score("train") is not None])
    data = json.loads(js.read_text())
    assert data["best"]["id"] == result.best.id and len(data["iterations"]) == len(result.steps) + 1
    calls = [r["llm_calls"] for r in data["iterations"]]
    assert calls == sorted(calls) and calls[-1] <= result.spent.llm_calls


def test_writing_again_changes_nothing(result: OptimizeResult, tmp_path: Path) -> None:
    first = write_outputs(result, tmp_path)
    contents = {p: p.read_text() for p in first}
    second = write_outputs(result, tmp_path)
    assert second == first and {p: p.read_text() for p in second} == contents


async def test_in_a_project_layout_unchanged_cards_are_referenced_and_originals_kept(
    tmp_path: Path,
) -> None:
    for part in ("workflows/math.yaml", "nodes/solver.yaml", "nodes/answer_checker.yaml"):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part, tmp_path / part)
    originals = {p: p.read_text() for p in (tmp_path / "workflows").iterdir()}
    from aworld_graph.meta import Budget, default_operators, optimize

    result = await optimize(
        tmp_path / "workflows" / "math.yaml",
        syn.synthetic_tasks(8, 4, 4),
        out=tmp_path,
        budget=Budget(iterations=1),
        operators=default_operators(names=("demos",)),
        model=syn.student_model(),
        db=tmp_path / "runs.db",
    )
    assert result.best.operator == "demos"
    assert all(p.read_text() == text for p, text in originals.items())
    workflow = tmp_path / "workflows" / "math.v2.yaml"
    assert result.outputs[0] == workflow
    assert _load(workflow)["nodes"] == [{"card": "../nodes/solver.v2.yaml"}, "answer_checker"]
    solver = _load(tmp_path / "nodes" / "solver.v2.yaml")
    assert (solver["version"], solver["parent"], solver["operator"]) == (2, "solver@1", "demos")
    assert solver["system_prompt"] == _load(tmp_path / "nodes" / "solver.yaml")["system_prompt"]
    swarm = load_workflow(workflow)
    assert swarm.info["cards"]["answer_checker"]["version"] == 1
    assert swarm.info["cards"]["solver"]["operator"] == "demos"
