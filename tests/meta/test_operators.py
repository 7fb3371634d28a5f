"""Rewrite operators: the optimizer agent's prompt rewrite, mined demonstrations, topology edits."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.export import load_run
from aworld_graph.meta import (
    Candidate,
    EditTopology,
    MineDemos,
    OperatorContext,
    RewritePrompt,
    evaluate,
    materialize,
)
from aworld_graph.meta import synthetic as syn
from aworld_graph.meta.candidates import node_of, seed_spec
from aworld_graph.meta.edits import DEFAULT_CRITICS, apply_edit, topology_edits
from aworld_graph.testing import FunctionModel

ROOT = Path(__file__).resolve().parents[2]


def _spec_with_calculator_and_critic() -> dict[str, Any]:
    spec = syn.oracle_spec()
    solver = spec["nodes"][0]
    solver["system_prompt"] = "Use the calculator for every computation."
    del solver["demos"]
    return spec


async def _context(
    tmp_path: Path, spec: dict[str, Any], n: int = 12, **extra: Any
) -> OperatorContext:
    saver = TrajectorySaver(tmp_path / "ops.db")
    tasks = syn.synthetic_tasks(train=n, dev=4, test=0)
    parent = Candidate(id="c000", spec=spec, status="seed")
    for split in ("train", "dev"):
        parent.evals[split] = await evaluate(
            materialize(spec, model=syn.student_model()),
            tasks.split(split),
            reward=tasks.reward,
            candidate="c000",
            split=split,
            run_id="r",
            checkpointer=saver,
        )
    return OperatorContext(
        run_id="r",
        iteration=1,
        parent=parent,
        candidates=[parent],
        tasks=tasks,
        saver=saver,
        rng=random.Random(0),
        **extra,
    )


async def test_the_optimizer_agent_reads_failing_runs_and_critic_feedback(tmp_path: Path) -> None:
    ctx = await _context(tmp_path, _spec_with_calculator_and_critic())
    ev = ctx.parent.evals["train"]
    failing = [t for t, s in ev.scores.items() if s < 1]
    assert failing, "the student must fail some tasks"
    seen: list[str] = []

    def optimizer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        seen.append(str(messages[-1]["content"]))
        assert messages[0]["role"] == "system" and "<prompt>" in str(messages[0]["content"])
        return "<prompt>\nUse the calculator. Copy its result exactly.\n</prompt>"

    proposal = await RewritePrompt(model=FunctionModel(optimizer)).propose(ctx)
    assert proposal is not None and proposal.spec is not None
    (text,) = seen
    items = {t.id: t for t in ctx.tasks.train}
    shown = [t for t in failing if items[t].input in text]
    assert shown and len(shown) <= 4
    assert f"Expected answer: {items[shown[0]].expected}" in text
    assert (
        "Current system prompt:\n<prompt>\nUse the calculator for every computation.\n</prompt>"
        in text
    )
    assert "Its tools: calculator" in text and "called calculator(" in text
    assert (
        "Critic solver_tool_check on solver (score 0.0): The answer does not state the result"
        in text
    )
    assert f"{len(failing)} runs failed" in text
    solver = node_of(proposal.spec, "solver")
    assert solver is not None
    assert solver["system_prompt"] == "Use the calculator. Copy its result exactly."
    assert (solver["version"], solver["parent"], solver["operator"]) == (
        2,
        "solver@1",
        "rewrite_prompt",
    )
    assert proposal.cost["llm_calls"] == 1 and proposal.cost["tokens"] > 0
    assert node_of(ctx.parent.spec, "solver")["version"] == 1  # the parent is untouched
    run = load_run(ctx.saver, "meta-r-i001-optimizer")  # the optimizer's own run is a trajectory
    assert run is not None and run.answer is not None and "<prompt>" in run.answer


async def test_an_unusable_or_repeated_rewrite_is_an_attempt_without_a_child(
    tmp_path: Path,
) -> None:
    ctx = await _context(tmp_path, _spec_with_calculator_and_critic())
    empty = await RewritePrompt(model=FunctionModel(lambda m, t: "<prompt></prompt>")).propose(ctx)
    assert empty is not None and empty.spec is None and "no usable prompt" in empty.note
    assert empty.cost["llm_calls"] == 1
    tried = copy.deepcopy(ctx.parent.spec)
    node_of(tried, "solver")["system_prompt"] = "Same again."
    ctx.candidates.append(
        Candidate(id="c001", spec=tried, parent="c000", operator="rewrite_prompt", target="solver")
    )
    ctx.iteration = 2
    again = await RewritePrompt(
        model=FunctionModel(lambda m, t: "<prompt>Same again.</prompt>")
    ).propose(ctx)
    assert again is not None and again.spec is None and "already tried" in again.note


async def test_rewrite_has_nothing_to_do_when_nothing_fails(tmp_path: Path) -> None:
    ctx = await _context(tmp_path, syn.oracle_spec(), n=4)
    assert ctx.parent.evals["train"].mean == 1.0
    model = FunctionModel(lambda m, t: "unused")
    assert await RewritePrompt(model=model).propose(ctx) is None and model.calls == []


async def test_demonstrations_come_from_successful_training_runs_only(tmp_path: Path) -> None:
    spec = _spec_with_calculator_and_critic()
    ctx = await _context(tmp_path, spec)
    ev = ctx.parent.evals["train"]
    winners = {
        ctx.tasks.split("train")[i].input for i, t in enumerate(ev.scores) if ev.scores[t] == 1.0
    }
    dev_inputs = {t.input for t in ctx.tasks.dev}
    op = MineDemos(k=3)
    proposal = await op.propose(ctx)
    assert proposal is not None and proposal.spec is not None and proposal.operator == "demos"
    demos = node_of(proposal.spec, "solver")["demos"]
    assert len(demos) == 3 and len({d["input"] for d in demos}) == 3
    for d in demos:
        assert d["input"] in winners and d["input"] not in dev_inputs
        assert d["output"].startswith("The result is ")
    assert node_of(proposal.spec, "solver")["operator"] == "demos"
    ctx.candidates.append(
        Candidate(
            id="c001",
            spec=proposal.spec,
            parent="c000",
            operator="demos",
            target="solver",
            key=proposal.key,
        )
    )
    second = await op.propose(ctx)
    assert second is not None and second.key != proposal.key
    assert {d["input"] for d in node_of(second.spec, "solver")["demos"]} != {
        d["input"] for d in demos
    }


async def test_no_demonstrations_without_a_successful_run(tmp_path: Path) -> None:
    spec = syn.seed_spec_dict()
    spec["nodes"][0]["max_steps"] = 1
    ctx = await _context(tmp_path, spec, n=4)
    for ev in ctx.parent.evals.values():
        ev.scores = dict.fromkeys(ev.scores, 0.0)
    assert await MineDemos().propose(ctx) is None


def test_topology_edits_of_the_shipped_workflows_are_valid_or_refused() -> None:
    math_spec, origins = seed_spec(ROOT / "workflows" / "math.yaml")
    assert origins == {
        "solver": "nodes/solver.yaml",
        "answer_checker": "nodes/answer_checker.yaml",
    } or all(v.endswith(f"nodes/{k}.yaml") for k, v in origins.items())
    kinds = [(e.kind, e.node, e.arg) for e in topology_edits(math_spec, models=["big"])]
    assert [(k, n, a if not isinstance(a, dict) else a["name"]) for k, n, a in kinds] == [
        ("insert_critic", "solver", "tool_args"),  # it has a tool check already, not this one
        ("insert_critic", "solver", "judge"),
        ("raise_rounds", "answer_checker", 3),
        ("swap_model", "solver", "big"),
        ("set_temperature", "solver", 0.4),
        ("set_temperature", "solver", 0.8),
        ("set_max_tokens", "solver", 64),
        ("set_max_tokens", "solver", 128),
        ("set_max_tokens", "solver", 512),
        ("remove_tool", "solver", "calculator"),
        ("drop_node", "answer_checker", None),
        ("self_consistency", "solver", 3),
    ]
    for edit in topology_edits(math_spec, models=["big"]):
        materialize(apply_edit(math_spec, edit, version=2))  # each one loads
    drop = next(e for e in topology_edits(math_spec) if e.kind == "drop_node")
    dropped = apply_edit(math_spec, drop, version=2)
    assert [n["name"] for n in dropped["nodes"]] == ["solver"] and dropped["topology"] == ["solver"]
    assert materialize(dropped).edges == []

    research, _ = seed_spec(ROOT / "workflows" / "research.yaml")
    edits = {e.description: e for e in topology_edits(research)}
    added = apply_edit(research, edits["add handoff writer -> triage"], version=2)
    assert "writer -> triage" in added["topology"]
    assert ("writer", "triage", "handoff") in [
        (e.source, e.target, e.kind) for e in materialize(added).edges
    ]
    removed = apply_edit(research, edits["remove handoff triage -> writer"], version=2)
    assert "triage -> writer" not in removed["topology"]
    materialize(removed)
    with pytest.raises(Exception, match="unreachable"):
        materialize(apply_edit(research, edits["remove handoff triage -> searcher"], version=2))
    assert not any(
        e.kind == "insert_critic" for e in edits.values()
    )  # handoff swarms hold agents only

    analysis, _ = seed_spec(ROOT / "workflows" / "analysis.yaml")
    drop = next(e for e in topology_edits(analysis) if e.description == "drop node risk_analyst")
    smaller = apply_edit(analysis, drop, version=2)
    assert smaller["topology"] == [{"parallel": ["market_analyst", "tech_analyst"]}, "summarizer"]
    assert materialize(smaller).joins == {"summarizer": ["market_analyst", "tech_analyst"]}


def test_critic_insertion_splices_a_loop_after_the_node() -> None:
    spec = {
        "name": "two",
        "build_type": "workflow",
        "nodes": [
            {"kind": "agent", "name": "a", "tools": ["calculator"]},
            {"kind": "agent", "name": "b"},
        ],
        "topology": ["a", "b"],
    }
    edits = [e for e in topology_edits(spec) if e.kind == "insert_critic"]
    assert [e.description for e in edits] == [
        "insert critic a_tool_check after a",
        "insert critic a_tool_args after a",
        "insert critic a_judge after a",
        "insert critic b_judge after b",  # the tool checks need an agent with tools
    ]
    swarm = materialize(apply_edit(spec, edits[0], version=2))
    flow = {(e.source, e.target, e.kind) for e in swarm.edges}
    assert flow == {
        ("a", "a_tool_check", "flow"),
        ("a_tool_check", "b", "flow"),
        ("a_tool_check", "a", "critic"),
    }
    critic = swarm.nodes["a_tool_check"]
    assert critic.max_rounds == DEFAULT_CRITICS[0]["max_rounds"]
    assert swarm.info["cards"]["a_tool_check"]["operator"] == "insert_critic"


async def test_model_and_tool_swaps_take_effect(tmp_path: Path) -> None:
    small, big = (
        FunctionModel(lambda m, t: "small says 1"),
        FunctionModel(lambda m, t: "big says 2"),
    )
    spec = {"name": "one", "build_type": "workflow", "nodes": [{"kind": "agent", "name": "a"}]}
    edits = {e.kind: e for e in topology_edits(spec, models=["big"], tools=["calculator"])}
    swapped = apply_edit(spec, edits["swap_model"], version=2)
    assert swapped["nodes"][0]["model"] == {"llm_model_name": "big"}
    swarm = materialize(swapped, model=small, pool={"big": big})
    assert swarm.nodes["a"].model is big
    assert materialize(spec, model=small, pool={"big": big}).nodes["a"].model is small
    tooled = materialize(apply_edit(spec, edits["add_tool"], version=3))
    assert [t.name for t in tooled.nodes["a"].tools] == ["calculator"]
    assert tooled.info["cards"]["a"]["version"] == 3


async def test_topology_operator_skips_tried_and_invalid_edits(tmp_path: Path) -> None:
    research, _ = seed_spec(ROOT / "workflows" / "research.yaml")
    parent = Candidate(id="c000", spec=research, status="seed")
    ctx = OperatorContext(
        run_id="r",
        iteration=1,
        parent=parent,
        candidates=[parent],
        tasks=syn.synthetic_tasks(2, 0, 0),
        saver=TrajectorySaver(tmp_path / "t.db"),
        rng=random.Random(0),
    )
    op = EditTopology(kinds=["remove_handoff"])
    made = []
    while (p := await op.propose(ctx)) is not None:
        made.append(p.change)
        ctx.candidates.append(
            Candidate(id=f"c{len(ctx.candidates):03d}", spec=p.spec, parent="c000", key=p.key)
        )
    assert made == ["remove handoff searcher -> writer", "remove handoff triage -> writer"]
