"""Demonstrations that carry the tool call (question → call → result → answer): mined from
successful runs, written into the node card, shown to the agent as turns of its own (native
tool-call messages, or text for models that read tools as text), and kept only when they raise
the training score on the tasks that are not themselves demonstrations."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import yaml

from aworld_graph import Agent, Runners
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.meta import Candidate, MineDemos, OperatorContext, evaluate, materialize
from aworld_graph.meta import synthetic as syn
from aworld_graph.meta.candidates import node_of
from aworld_graph.model import ModelProfile
from aworld_graph.spec import load_workflow, swarm_to_dict
from aworld_graph.testing import FunctionModel

DEMO = {
    "input": "Compute 12 * 3 + 4.",
    "tool_calls": [
        {"name": "calculator", "arguments": {"expression": "12 * 3 + 4"}, "result": "40"}
    ],
    "output": "The result is 40.",
}


def _recorder(seen: list[list[dict[str, Any]]]) -> FunctionModel:
    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return "The result is 7."

    return FunctionModel(reply)


async def test_a_demo_with_a_tool_call_is_shown_as_the_call_its_result_and_the_answer() -> None:
    seen: list[list[dict[str, Any]]] = []
    agent = Agent(name="solver", tools=[], demos=[DEMO], model=_recorder(seen))
    await Runners.run("Compute 3 + 4.", agent=agent)
    system, question, call, result, answer, task = seen[0]
    assert system["role"] == "system" and question == {"role": "user", "content": DEMO["input"]}
    (tc,) = call["tool_calls"]
    assert call["role"] == "assistant" and tc["function"]["name"] == "calculator"
    assert json.loads(tc["function"]["arguments"]) == {"expression": "12 * 3 + 4"}
    assert '"expression": "12 * 3 + 4"' in tc["function"]["arguments"]  # plain JSON, unescaped
    assert result == {"role": "tool", "tool_call_id": tc["id"], "content": "40"}
    assert answer == {"role": "assistant", "content": "The result is 40."}
    assert task["content"] == "Compute 3 + 4."


async def test_for_a_text_mode_model_the_demo_call_stays_a_call_for_its_template() -> None:
    """A model profile that reads tools as text has its conversation rewritten as text; a demo's
    call stays a tool-call message, which the model's chat template renders as it renders a call
    (rewritten as assistant text, it would teach the model to answer in text)."""
    seen: list[list[dict[str, Any]]] = []
    model = _recorder(seen)
    model.profile = ModelProfile(tool_results="text")
    agent = Agent(name="solver", demos=[DEMO, {"input": "2+2?", "output": "4"}], model=model)
    await Runners.run("Compute 3 + 4.", agent=agent)
    roles = [m["role"] for m in seen[0][1:]]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant", "user"]
    assert seen[0][2]["tool_calls"][0]["function"]["name"] == "calculator"
    assert seen[0][-1]["content"] == "Compute 3 + 4."


def test_the_card_field_round_trips(tmp_path: Path) -> None:
    spec = syn.seed_spec_dict()
    spec["nodes"][0]["demos"] = [DEMO, {"input": "2+2?", "output": "4"}]
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    swarm = load_workflow(path)
    solver = swarm.nodes["solver"]
    assert isinstance(solver, Agent) and solver.demos == spec["nodes"][0]["demos"]
    assert swarm_to_dict(swarm)["nodes"][0]["demos"] == spec["nodes"][0]["demos"]


async def test_mined_demos_carry_the_call_and_its_result(tmp_path: Path) -> None:
    spec = syn.oracle_spec()
    del spec["nodes"][0]["demos"]
    tasks = syn.synthetic_tasks(train=10, dev=0, test=0)
    saver = TrajectorySaver(tmp_path / "d.db")
    seed = Candidate(id="c000", spec=spec, status="seed")
    seed.evals["train"] = await evaluate(
        materialize(spec, model=syn.student_model()),
        tasks.train,
        reward=tasks.reward,
        run_id="r",
        checkpointer=saver,
    )
    ctx = OperatorContext(
        run_id="r",
        iteration=1,
        parent=seed,
        candidates=[seed],
        tasks=tasks,
        saver=saver,
        rng=random.Random(0),
    )
    proposal = await MineDemos(k=2).propose(ctx)
    assert proposal is not None and proposal.spec is not None
    demos = node_of(proposal.spec, "solver")["demos"]  # type: ignore[index]
    by_input = {t.input: t for t in tasks.train}
    for d in demos:
        (call,) = d["tool_calls"]
        expression = by_input[d["input"]].input.removeprefix("Compute ").rstrip(".")
        assert call == {
            "name": "calculator",
            "arguments": {"expression": expression},
            "result": str(by_input[d["input"]].expected),
        }
        assert d["output"] == f"The result is {by_input[d['input']].expected}."
    assert "2 with tool calls" in proposal.change
    plain = await MineDemos(k=2, with_calls=False).propose(ctx)
    assert plain is not None and plain.spec is not None
    assert all("tool_calls" not in d for d in node_of(plain.spec, "solver")["demos"])  # type: ignore[index]


def test_a_demo_set_is_kept_only_when_it_raises_the_score_on_the_other_tasks() -> None:
    from aworld_graph.meta.candidates import Evaluation
    from aworld_graph.meta.search import verdict

    tasks = syn.synthetic_tasks(train=4, dev=0, test=0)
    ids = [t.id for t in tasks.train]

    def cand(cid: str, scores: list[float], demos: list[int]) -> Candidate:
        spec = syn.seed_spec_dict()
        spec["nodes"][0]["demos"] = [{"input": tasks.train[i].input, "output": "x"} for i in demos]
        c = Candidate(id=cid, spec=spec, parent="c000", status="pending", operator="demos")
        ev = Evaluation(candidate=cid, split="train", scores=dict(zip(ids, scores, strict=True)))
        ev.mean = sum(scores) / len(scores)
        c.evals["train"] = ev
        return c

    parent = cand("c000", [0, 0, 1, 0], [])
    copied = cand("c001", [1, 1, 1, 0], [0, 1])  # right only on its own demonstrations' tasks
    status, note = verdict(copied, parent, tasks.train)
    assert status == "rejected" and "+0.000 on the 2 tasks that are not demonstrations" in note
    helped = cand("c002", [1, 0, 1, 1], [0])  # right on a task it was not shown, too
    status, note = verdict(helped, parent, tasks.train)
    assert status == "accepted" and "on the 3 tasks" in note
