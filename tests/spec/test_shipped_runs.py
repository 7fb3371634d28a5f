"""Every shipped workflow runs, with scripted models standing in for the LLM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import aworld_graph.cli.spec  # noqa: F401  (registers validate / schema)
from aworld_graph import Runners
from aworld_graph.cli import main
from aworld_graph.spec import load_workflow
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call
from tests.fake_openai import FakeOpenAI, calls, text

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # shipped workflows name paths (and the MCP server root) from here


def order(response: Any) -> list[str]:
    return [r["node"] for r in response.state["trace"] if not r.get("thread_id")]


def last_user_text(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


async def test_math_solver_retries_until_the_critic_sees_the_calculators_result(saver: Any) -> None:
    seen: list[str] = []

    def second_try(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        seen.append(last_user_text(messages))
        return "Sorry: 17*23 = 391"

    solver = ScriptedModel(
        [tool_call("calculator", {"expression": "17*23"}), "17*23 = 409", second_try]
    )
    swarm = load_workflow("workflows/math.yaml", models={"solver": solver})
    response = await Runners.run("What is 17*23?", swarm=swarm, checkpointer=saver)
    assert response.answer == "Sorry: 17*23 = 391"
    assert [r["status"] for r in response.state["rewards"]] == ["retry", "pass"]
    assert "does not state the result the calculator returned" in seen[0]
    assert order(response) == [
        "solver",
        "solver__tools",
        "solver",
        "answer_checker",
        "solver",
        "answer_checker",
    ]
    assert any(m["role"] == "tool" and m["content"] == "391" for m in response.state["messages"])


async def test_math_critic_asks_for_a_number_when_there_is_none(saver: Any) -> None:
    solver = ScriptedModel(["I am not sure.", "I still do not know."])
    swarm = load_workflow("workflows/math.yaml", models={"solver": solver})
    response = await Runners.run("What is 17*23?", swarm=swarm, checkpointer=saver)
    assert [r["status"] for r in response.state["rewards"]] == [
        "retry",
        "max_rounds",
    ]  # max_rounds: 2
    assert response.answer == "I still do not know."


async def test_research_team_hands_off_and_searches_files_over_mcp(saver: Any) -> None:
    swarm = load_workflow(
        "workflows/research.yaml",
        models={
            "triage": ScriptedModel([tool_call("transfer_to_searcher", {})]),
            "searcher": ScriptedModel(
                [
                    tool_call(
                        "env__search_files",
                        {"pattern": "class TrajectorySaver", "path": "aworld_graph"},
                    ),
                    tool_call("transfer_to_writer", {}),
                ]
            ),
            "writer": ScriptedModel(["The checkpointer stores every transition."]),
        },
    )
    response = await Runners.run(
        "What does the checkpointer store?", swarm=swarm, checkpointer=saver
    )
    assert order(response) == [
        "triage",
        "triage__tools",
        "searcher",
        "searcher__tools",
        "searcher",
        "searcher__tools",
        "writer",
    ]
    search = [m["content"] for m in response.state["messages"] if m["role"] == "tool"][1]
    assert "class TrajectorySaver" in search and "checkpoint/" in search  # a real file hit
    assert response.answer == "The checkpointer stores every transition."


async def test_analysis_fans_out_to_three_analysts_and_joins_once(saver: Any) -> None:
    def analyst(name: str) -> FunctionModel:
        return FunctionModel(lambda m, t: f"{name} view")

    summarizer_saw: list[str] = []

    def summarize(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        summarizer_saw.append(last_user_text(messages))
        return "go"

    swarm = load_workflow(
        "workflows/analysis.yaml",
        models={
            "market_analyst": analyst("market"),
            "risk_analyst": analyst("risk"),
            "tech_analyst": analyst("tech"),
            "summarizer": FunctionModel(summarize),
        },
    )
    response = await Runners.run("A drone bakery", swarm=swarm, checkpointer=saver)
    nodes = order(response)
    assert sorted(nodes[:3]) == ["market_analyst", "risk_analyst", "tech_analyst"]
    assert nodes[3:] == ["summarizer"] and response.answer == "go"
    assert all(f"{v} view" in summarizer_saw[0] for v in ("market", "risk", "tech"))


async def test_team_lead_delegates_to_members_and_composes(saver: Any) -> None:
    lead = ScriptedModel(
        [
            [
                tool_call("ask_researcher", {"request": "facts about bees"}),
                tool_call("ask_writer", {"request": "a note from the facts"}),
            ],
            lambda m, t: "Note: " + " / ".join(x["content"] for x in m if x["role"] == "tool"),
        ]
    )
    swarm = load_workflow(
        "workflows/team.yaml",
        models={
            "lead": lead,
            "researcher": FunctionModel(lambda m, t: "bees make honey"),
            "writer": FunctionModel(lambda m, t: "a note on honey"),
        },
    )
    response = await Runners.run("Write a note about bees", swarm=swarm, checkpointer=saver)
    assert response.answer == "Note: bees make honey / a note on honey"
    assert {r["agent"] for r in response.state["trace"] if r.get("thread_id")} == {
        "researcher",
        "writer",
    }


async def test_approval_publishes_on_approve_and_revises_otherwise(saver: Any) -> None:
    swarm = load_workflow(
        "workflows/approval.yaml",
        models={
            "drafter": ScriptedModel(["1. Book a room"]),
            "reviser": FunctionModel(lambda m, t: "1. Book a room 2. Order food"),
            "publisher": FunctionModel(lambda m, t: "Announced: " + last_user_text(m)),
        },
    )
    paused = await Runners.run("Plan an offsite", swarm=swarm, task_id="appr-1", checkpointer=saver)
    assert (
        paused.status == "interrupted"
        and paused.interrupts[0]["value"]["answer"] == "1. Book a room"
    )
    again = await Runners.resume("appr-1", swarm=swarm, value="please add food", checkpointer=saver)
    assert again.status == "interrupted" and order(again)[-2:] == ["approval", "reviser"]
    assert again.interrupts[0]["value"]["answer"] == "1. Book a room 2. Order food"  # asked again
    done = await Runners.resume("appr-1", swarm=swarm, value="Approve", checkpointer=saver)
    assert done.success and order(done)[-1] == "publisher"
    assert done.answer.startswith("Announced:")


async def test_the_publisher_repeating_the_approved_plan_repeats_nothing_after_it(
    saver: Any,
) -> None:
    """A small model often repeats the result it was shown as its answer. The publisher's
    request ends with the approved plan, the person's reply coming before the results, so
    such a repeat is the plan and nothing of the request after it (no ``[approval]``)."""
    plan = "1. Book a room by the lake\n2. Order food"

    def repeat(messages: list[dict[str, Any]], tools: Any) -> str:
        return last_user_text(messages).split("[drafter]\n", 1)[1]

    swarm = load_workflow(
        "workflows/approval.yaml",
        models={"drafter": ScriptedModel([plan]), "publisher": FunctionModel(repeat)},
    )
    await Runners.run("Plan an offsite", swarm=swarm, task_id="appr-2", checkpointer=saver)
    done = await Runners.resume("appr-2", swarm=swarm, value="approve", checkpointer=saver)
    assert done.success and order(done)[-1] == "publisher"
    assert done.answer == plan
    request = last_user_text(done.state["messages"])
    assert request == (
        "Plan an offsite\n\nA person replied at approval: approve\n\n"
        f"Results from earlier steps:\n[drafter]\n{plan}"
    )


def test_cli_runs_a_workflow_file_and_records_it(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", fake_openai.url)
    monkeypatch.setenv("LLM_MODEL_NAME", "fake-model")
    fake_openai.add(calls(("calculator", {"expression": "6*7"})), text("The answer is 42."))
    db = tmp_path / "runs.db"
    result = CliRunner().invoke(
        main, ["run", "workflows/math.yaml", "--input", "6*7?", "--db", str(db), "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["answer"] == "The answer is 42." and payload["status"] == "finished"
    from aworld_graph.checkpoint import TrajectorySaver

    saver = TrajectorySaver(str(db))
    latest = saver.get_tuple(
        {"configurable": {"thread_id": payload["thread_id"], "checkpoint_ns": ""}}
    )
    assert latest is not None
    assert latest.metadata["target"] == "workflows/math.yaml"
    assert (
        latest.metadata["workflow"] == "workflows/math.yaml"
        and latest.metadata["workflow_version"] == 1
    )


def test_max_steps_on_the_command_line_wins_over_the_workflow_file(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """math.yaml says max_steps: 16; --max-steps 1 stops the run after the first LLM step."""
    monkeypatch.setenv("LLM_BASE_URL", fake_openai.url)
    monkeypatch.setenv("LLM_MODEL_NAME", "fake-model")
    fake_openai.add(calls(("calculator", {"expression": "6*7"})), text("The answer is 42."))
    args = ["run", "workflows/math.yaml", "--input", "6*7?", "--db", str(tmp_path / "r.db")]
    result = CliRunner().invoke(main, [*args, "--max-steps", "1", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["status"] == "max_steps" and "max_steps=1" in payload["msg"]
    assert len(fake_openai.requests) == 1
    for bad in ("0", "-3"):
        result = CliRunner().invoke(main, [*args, "--max-steps", bad])
        assert result.exit_code != 0
        assert (
            f"TaskConfig.max_steps must be a whole number of at least 1, got {bad}" in result.output
        )
        assert "Traceback" not in result.output
    assert len(fake_openai.requests) == 1


def passes_the_second_draft(output: str, state: Any) -> float:
    """A scorer for the YAML critic below: only ``draft 2`` passes."""
    return 1.0 if output == "draft 2" else 0.0


async def test_a_judged_nodes_yaml_edge_leaves_through_its_critic(
    tmp_path: Path, saver: Any
) -> None:
    path = tmp_path / "judged.yaml"
    path.write_text(
        "name: judged\n"
        "nodes:\n"
        "  - {kind: agent, name: s}\n"
        "  - {kind: critic, name: crit, judges: s, threshold: 0.5,\n"
        "     scorer: 'tests.spec.test_shipped_runs:passes_the_second_draft'}\n"
        "  - {kind: agent, name: p}\n"
        "topology: [s]\n"
        "edges:\n"
        "  - {from: s, to: p, when: 'len(answer) > 0'}\n"
    )
    publish = FunctionModel(lambda m, t: "published")
    swarm = load_workflow(path, models={"s": ScriptedModel(["draft 1", "draft 2"]), "p": publish})
    response = await Runners.run("x", swarm=swarm, checkpointer=saver)
    assert order(response) == ["s", "crit", "s", "crit", "p"]
    assert len(publish.calls) == 1 and "[s]\ndraft 2" in publish.calls[0].messages[-1]["content"]
