"""Proposals that need no optimizer model: instruction patterns for the node's role, chosen by
what the failing runs show, then mutation and crossover of earlier winners; random search over
the same operators as a baseline, and the plot of reward against rollouts for both."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.export import load_run
from aworld_graph.meta import (
    Candidate,
    OperatorContext,
    PatternPrompt,
    default_operators,
    evaluate,
    materialize,
    strong_optimizer,
    write_comparison,
)
from aworld_graph.meta import synthetic as syn
from aworld_graph.meta.candidates import node_of
from aworld_graph.meta.instructions import PATTERNS, diagnose, sentences
from aworld_graph.testing import FunctionModel
from tests.meta.helpers import run_synthetic


async def _ctx(tmp_path: Path, spec: dict[str, Any]) -> OperatorContext:
    tasks = syn.synthetic_tasks(train=10, dev=0, test=0)
    saver = TrajectorySaver(tmp_path / "i.db")
    seed = Candidate(id="c000", spec=spec, status="seed")
    seed.evals["train"] = await evaluate(
        materialize(spec, model=syn.student_model()),
        tasks.train,
        reward=tasks.reward,
        run_id="r",
        checkpointer=saver,
    )
    return OperatorContext(
        run_id="r",
        iteration=1,
        parent=seed,
        candidates=[seed],
        tasks=tasks,
        saver=saver,
        rng=random.Random(0),
    )


async def test_the_first_idea_is_the_pattern_the_failing_runs_call_for(tmp_path: Path) -> None:
    ctx = await _ctx(tmp_path, syn.seed_spec_dict())  # "Answer the question.": no tool calls
    ev = ctx.parent.evals["train"]
    failing = [t for t, s in ev.scores.items() if s < 1]
    run = load_run(ctx.saver, ev.threads[failing[0]])
    assert run is not None and "use_tool" in diagnose(run, "solver", run.input)
    op = PatternPrompt()
    made = []
    for _ in range(3):
        proposal = await op.propose(ctx)
        assert proposal is not None and proposal.spec is not None
        made.append(proposal)
        ctx.candidates.append(
            Candidate(
                id=f"c{len(ctx.candidates):03d}",
                spec=proposal.spec,
                parent="c000",
                operator=proposal.operator,
                target=proposal.target,
                key=proposal.key,
            )
        )
    prompts = [node_of(p.spec, "solver")["system_prompt"] for p in made]  # type: ignore[arg-type, index]
    assert prompts[0] == "Answer the question. Use the calculator tool for every computation."
    assert sentences(prompts[1])[0] == PATTERNS["use_tool"][0].format(tool="calculator")
    assert "short imperative prompt" in made[1].change and len(sentences(prompts[1])) == 4
    assert len(set(prompts)) == 3 and all(p.operator == "instructions" for p in made)
    solver = node_of(made[0].spec, "solver")  # type: ignore[arg-type]
    assert solver is not None and solver["version"] == 2 and solver["operator"] == "instructions"


def test_the_diagnosis_reads_the_call_the_result_and_the_answer() -> None:
    from aworld_graph.export.runs import Run

    def run(arguments: str, result: str, answer: str) -> Run:
        call = {"id": "1", "function": {"name": "calculator", "arguments": arguments}}
        return Run(
            thread_id="t",
            values={
                "messages": [
                    {"role": "assistant", "_agent": "s", "content": "", "tool_calls": [call]},
                    {"role": "tool", "_agent": "s", "tool_call_id": "1", "content": result},
                    {"role": "assistant", "_agent": "s", "content": answer},
                ]
            },
        )

    q = "What is 61 * 27 + 63?"
    assert diagnose(run('{"expression": "61 * 27 + 63"}', "1710", "1710"), "s", q) == []
    assert diagnose(run('{"expression": "61 * 7 + 63"}', "490", "490"), "s", q) == ["arguments"]
    assert diagnose(run('{"expression": "61 * 27 + 63"}', "1710", "171"), "s", q) == ["copy_result"]
    assert "number_only" in diagnose(
        run('{"expression": "61*27+63"}', "1710", "1710 is 61 times 27 plus 63"), "s", q
    )


async def test_crossover_and_mutation_of_winners(tmp_path: Path) -> None:
    ctx = await _ctx(tmp_path, syn.seed_spec_dict())
    for i, prompt in enumerate(
        ["Use the calculator tool. Be brief.", "Answer with the number only."]
    ):
        spec = syn.seed_spec_dict()
        spec["nodes"][0]["system_prompt"] = prompt
        winner = Candidate(id=f"c00{i + 1}", spec=spec, parent="c000", status="accepted")
        winner.evals["train"] = ctx.parent.evals["train"]
        ctx.candidates.append(winner)
    ideas = PatternPrompt()._ideas(ctx, "solver", "Answer the question.", "calculator")
    hows = [how for _, how in ideas]
    assert hows[:3] == [
        "pattern added: 'Use the calculator tool for every computation.'",
        "short imperative prompt from the role's patterns",
        "crossover of the two best prompts",
    ]
    assert all(how.startswith("mutation") for how in hows[3:])
    # the two best (all tied here: in pool order, the seed and c001), their sentences joined
    assert sentences(ideas[2][0]) == [
        "Answer the question.",
        "Use the calculator tool.",
        "Be brief.",
    ]


def test_the_reflective_rewrite_joins_only_with_a_model_that_can_do_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("LLM_BASE_URL", "LLM_MODEL_NAME", "LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    assert not strong_optimizer(None)  # the embedded model
    assert [op.name for op in default_operators()] == ["instructions", "demos", "topology"]
    strong = default_operators(FunctionModel(lambda m, t: "<prompt>x</prompt>"))
    assert [op.name for op in strong] == ["rewrite_prompt", "instructions", "demos", "topology"]
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("LLM_MODEL_NAME", "big")
    assert strong_optimizer(None)


async def test_patterns_without_a_teacher_reach_the_synthetic_optimum(tmp_path: Path) -> None:
    result = await run_synthetic(tmp_path, ("instructions", "demos", "topology"))
    assert (result.seed.score("test") or 0) < 0.3 and (result.best.score("test") or 0) >= 0.85
    assert result.comparison is not None and result.comparison.low > 0
    assert {"instructions", "demos", "insert_critic"} <= {c.operator for c in result.lineage()}


async def test_random_search_runs_the_same_operators_at_the_same_budget_and_is_plotted(
    tmp_path: Path,
) -> None:
    from aworld_graph.meta import Budget

    budget = Budget(llm_calls=900, iterations=8)
    names = ("instructions", "demos", "topology")
    guided = await run_synthetic(tmp_path / "g", names, budget=budget)
    rand = await run_synthetic(tmp_path / "r", names, budget=budget, search="random")
    assert rand.run_id != guided.run_id and rand.spent.llm_calls <= 900
    assert {c.operator for c in rand.candidates[1:]} <= {
        "instructions",
        "demos",
        *(e for e in ("insert_critic", "raise_rounds", "set_temperature", "set_max_tokens")),
        "remove_tool",
        "drop_node",
        "self_consistency",
    }
    written = write_comparison({"search": guided, "random search": rand}, tmp_path / "out")
    md, svg, data = written
    assert md.name == "search-vs-random.md" and "| random search |" in md.read_text()
    text = svg.read_text()
    assert text.startswith("<svg") and "random search" in text and "rollouts" in text
    assert "best dev score vs rollouts" in text
