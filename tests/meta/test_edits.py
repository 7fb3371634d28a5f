"""Topology and sampling edits that can pay off for small models: a critic that checks the
tool's arguments against the question, a critic's rounds raising the judged node's max_steps
with them, sampling parameters as card fields, and self-consistency as a graph rewrite (k
samples and a vote node) kept only on paired evidence that it pays."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Agent, Runners
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.meta import TaskItem, evaluate, materialize
from aworld_graph.meta.candidates import node_of, seed_spec
from aworld_graph.meta.checks import arguments_match_question, majority_vote
from aworld_graph.meta.edits import apply_edit, topology_edits
from aworld_graph.rewards import numeric
from aworld_graph.testing import FunctionModel, tool_call

ROOT = Path(__file__).resolve().parents[2]
MATH, _ = seed_spec(ROOT / "workflows" / "math.yaml")


def _edit(spec: dict[str, Any], kind: str, arg: Any = None) -> dict[str, Any]:
    edit = next(
        e
        for e in topology_edits(spec)
        if e.kind == kind
        and (arg is None or e.arg == arg or (isinstance(e.arg, dict) and e.arg["name"] == arg))
    )
    return apply_edit(spec, edit, version=2)


def _state(question: str, arguments: str | None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    if arguments is not None:
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "_agent": "solver",
                "_turn": "solver#1",
                "tool_calls": [
                    {"id": "1", "function": {"name": "calculator", "arguments": arguments}}
                ],
            }
        )
    messages.append(
        {"role": "assistant", "content": "It is 5.", "_agent": "solver", "_turn": "solver#1"}
    )
    return {"input": question, "messages": messages}


def test_the_argument_check_compares_the_call_with_the_question() -> None:
    q = "What is 61 * 27 + 63?"
    assert arguments_match_question("", _state(q, '{"expression": "61 * 27 + 63"}'))[0] == 1.0
    assert arguments_match_question("", _state(q, '{"expression": "61*27+63"}'))[0] == 1.0
    score, feedback = arguments_match_question("", _state(q, '{"expression": "27 + 63"}'))
    assert score == 0.0 and "does not compute the question's expression 61 * 27 + 63" in feedback
    assert "1710" not in feedback  # it never gives the result away
    paren = "What is (50 + 55) * 18?"  # a lost parenthesis keeps every number
    assert arguments_match_question("", _state(paren, '{"expression": "50 + 55 * 18"}'))[0] == 0.0
    same = '{"expression": "50 * 18 + 55 * 18"}'  # another way to the same value passes
    assert arguments_match_question("", _state(paren, same))[0] == 1.0
    words = "Mia has 14 marbles and buys 3 packs of 6. How many marbles does she have?"
    assert arguments_match_question("", _state(words, '{"expression": "14 + 3 * 6"}'))[0] == 1.0
    score, feedback = arguments_match_question("", _state(words, '{"expression": "14 + 6"}'))
    assert score == 0.0 and "leaves out 3" in feedback
    score, feedback = arguments_match_question("", _state(words, '{"expression": "14.5 + 3 * 6"}'))
    assert score == 0.0 and "uses 14.5" in feedback and "leaves out 14" in feedback
    assert arguments_match_question("", _state(q, None))[0] == 0.0  # no call at all
    assert arguments_match_question("", _state("Say hi.", None))[0] == 1.0  # nothing to check


async def test_an_argument_critic_sends_a_dropped_operand_back_and_the_retry_gets_it_right(
    tmp_path: Path,
) -> None:
    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        last = max(i for i, m in enumerate(messages) if m["role"] == "user")
        turn, results = str(messages[last]["content"]), messages[last + 1 :]
        if results:
            return f"The answer is {results[-1]['content']}."
        expression = re.search(r"What is (.+?)\?", turn).group(1)  # type: ignore[union-attr]
        if "Feedback" not in turn:
            expression = expression.replace("27", "7")  # the first call drops a digit
        return tool_call("calculator", {"expression": expression})

    spec = _edit(MATH, "insert_critic", "tool_args")
    assert [n["name"] for n in spec["nodes"]] == ["solver", "solver_tool_args", "answer_checker"]
    item = TaskItem(id="q", input="What is 61 * 27 + 63?", expected=1710, split="train")
    ev = await evaluate(
        materialize(spec, model=FunctionModel(reply)),
        [item],
        reward=numeric,
        checkpointer=TrajectorySaver(tmp_path / "a.db"),
    )
    assert ev.scores == {"q": 1.0} and ev.llm_calls == 4  # call, answer, call again, answer
    seed = await evaluate(
        materialize(MATH, model=FunctionModel(reply)),
        [item],
        reward=numeric,
        run_id="seed",
        checkpointer=TrajectorySaver(tmp_path / "a.db"),
    )
    assert seed.scores == {"q": 0.0}  # the shipped checker sees nothing wrong


def test_more_rounds_for_a_critic_give_the_judged_node_the_calls_for_them() -> None:
    solver = node_of(MATH, "solver")
    assert solver is not None and solver["max_steps"] == 4  # 2 calls a turn, 2 turns
    three = _edit(MATH, "raise_rounds")
    assert node_of(three, "answer_checker")["max_rounds"] == 3  # type: ignore[index]
    raised = node_of(three, "solver")
    assert raised is not None and raised["max_steps"] == 6 and raised["version"] == 2
    assert three["max_steps"] >= 3 * (2 * 2 + 1)  # and the workflow's step budget
    both = _edit(MATH, "insert_critic", "tool_args")  # 1 + 1 + 2 turns of 2 calls
    assert node_of(both, "solver")["max_steps"] == 8  # type: ignore[index]
    materialize(three)
    materialize(both)


def test_sampling_parameters_are_card_fields_the_search_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aworld_graph.agent import resolve_model
    from aworld_graph.local.model import LocalModel

    for name in ("LLM_BASE_URL", "LLM_MODEL_NAME", "LLM_PROVIDER", "LLM_TEMPERATURE"):
        monkeypatch.delenv(name, raising=False)
    hot = _edit(MATH, "set_temperature", 0.8)
    short = _edit(hot, "set_max_tokens", 64)
    card = node_of(short, "solver")
    assert card is not None and card["model"] == {
        "llm_temperature": 0.8,
        "params": {"max_tokens": 64},
    }
    agent = materialize(short).nodes["solver"]
    assert isinstance(agent, Agent)
    model = resolve_model(agent.conf)  # how an agent without a model object gets one
    assert isinstance(model, LocalModel)
    assert model.temperature == 0.8 and model.params["max_tokens"] == 64
    given = materialize(short, model=LocalModel()).nodes["solver"]  # the embedded model given
    assert isinstance(given, Agent) and isinstance(given.model, LocalModel)
    assert given.model.temperature == 0.8 and given.model.params["max_tokens"] == 64
    assert materialize(MATH, model=LocalModel()).nodes["solver"].model.temperature == 0.0  # type: ignore[union-attr]


def test_the_vote_keeps_the_answer_most_samples_agree_on() -> None:
    def outputs(*answers: str) -> dict[str, Any]:
        names = ["solver"] + [f"solver_s{i}" for i in range(2, len(answers) + 1)]
        return {
            "outputs": {"answer_checker": {"score": 1.0}, **dict(zip(names, answers, strict=True))}
        }

    assert majority_vote(outputs("It is 56.", "The answer is 55.", "55")) == {
        "output": "The answer is 55."
    }
    assert majority_vote(outputs("It is 56.", "55", "57")) == {
        "output": "It is 56."
    }  # a tie: the first
    assert majority_vote(outputs("1,710", "1710.0", "12")) == {"output": "1,710"}
    assert majority_vote({"outputs": {"solver": "1"}}) == {}


async def test_self_consistency_is_k_samples_and_a_vote(tmp_path: Path) -> None:
    spec = _edit(MATH, "self_consistency")
    assert spec["topology"] == [{"parallel": ["solver", "solver_s2", "solver_s3"]}, "solver_vote"]
    names = [n["name"] for n in spec["nodes"]]
    assert names == ["solver", "solver_s2", "solver_s3", "solver_vote"]  # its critic goes
    assert node_of(spec, "solver_s2")["model"]["llm_temperature"] == 0.7  # type: ignore[index]
    assert node_of(spec, "solver") == node_of(MATH, "solver")  # the first sample is the node
    count = itertools.count()

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user" and tools:
            return tool_call("calculator", {"expression": "17 * 3 + 4"})
        return "The answer is 56." if next(count) == 0 else "The answer is 55."

    response = await Runners.run(
        "What is 17 * 3 + 4?", swarm=materialize(spec, model=FunctionModel(reply))
    )
    assert response.status == "finished" and response.answer == "The answer is 55."
    assert set(response.state["outputs"]) == {"solver", "solver_s2", "solver_s3", "solver_vote"}
    assert not any(e.kind == "self_consistency" for e in topology_edits(spec))  # once


def test_self_consistency_is_kept_only_on_paired_evidence_that_it_pays() -> None:
    from aworld_graph.meta import Candidate
    from aworld_graph.meta import synthetic as syn
    from aworld_graph.meta.candidates import Evaluation
    from aworld_graph.meta.search import verdict

    tasks = syn.synthetic_tasks(train=20, dev=0, test=0)
    ids = [t.id for t in tasks.train]

    def cand(cid: str, operator: str, right: int) -> Candidate:
        c = Candidate(id=cid, spec=MATH, parent="c000", operator=operator, status="pending")
        scores = [1.0 if i < right else 0.0 for i in range(20)]
        c.evals["train"] = Evaluation(
            candidate=cid,
            split="train",
            scores=dict(zip(ids, scores, strict=True)),
            mean=right / 20,
        )
        return c

    parent = cand("c000", "seed", 4)
    a_little = cand("c001", "self_consistency", 5)  # +1 task of 20: no evidence
    status, note = verdict(a_little, parent, tasks.train)
    assert status == "rejected" and "P(better)" in note
    assert verdict(cand("c002", "instructions", 5), parent, tasks.train)[0] == "accepted"
    a_lot = cand("c003", "self_consistency", 12)  # +8 of 20
    assert verdict(a_lot, parent, tasks.train)[0] == "accepted"
