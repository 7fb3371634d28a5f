"""The span tree of a run and its GenAI attributes, read from the SDK's in-memory exporter."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from opentelemetry.trace import SpanKind, StatusCode

from aworld_graph import (
    Agent,
    AgentConfig,
    Critic,
    HandoffSwarm,
    Human,
    Runners,
    Swarm,
    TeamSwarm,
    tracing,
)
from aworld_graph.errors import ModelError
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call
from tests.fake_openai import FakeOpenAI, calls, text
from tests.tracing.conftest import Spans, trajectory_rows

JOIN = ("aworld_graph.thread_id", "aworld_graph.step", "aworld_graph.parent_checkpoint_id")


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def explode(reason: str) -> str:
    """A tool that always fails."""
    raise RuntimeError(f"cannot do {reason}")


def test_a_tool_run_is_one_tree_with_genai_attributes_joined_to_the_trajectory(
    spans: Spans, fake_openai: FakeOpenAI, saver: Any, tmp_path: Path
) -> None:
    fake_openai.add(calls(("add", {"a": 2, "b": 3})), text("It is 5."))
    agent = Agent(
        name="calc",
        tools=[add],
        conf=AgentConfig(
            llm_base_url=fake_openai.url, llm_model_name="fake-model", llm_temperature=0.2
        ),
    )
    response = Runners.sync_run("2+3?", agent=agent, task_id="t-tool", checkpointer=saver)
    assert response.answer == "It is 5."
    assert spans.tree() == [
        "invoke_agent calc",
        "  invoke_agent calc",
        "    chat fake-model",
        "  invoke_agent calc",
        "    execute_tool add",
        "  invoke_agent calc",
        "    chat fake-model",
    ]
    root = spans.all()[0]
    assert root.attributes is not None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "calc"
    assert root.attributes["gen_ai.conversation.id"] == "t-tool"
    assert root.attributes["aworld_graph.checkpoint_id"] == response.checkpoint_id
    assert root.attributes["aworld_graph.status"] == "finished"

    chat = spans.named("chat fake-model")[0]
    attrs = dict(chat.attributes or {})
    assert chat.kind == SpanKind.CLIENT
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "fake-model"
    assert attrs["gen_ai.request.temperature"] == 0.2
    assert attrs["gen_ai.response.model"] == "fake-model"
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    assert attrs["server.address"] == "127.0.0.1" and attrs["server.port"] > 0
    assert "gen_ai.input.messages" not in attrs  # content is off by default

    tool = spans.one("execute_tool add")
    tattrs = dict(tool.attributes or {})
    assert tattrs["gen_ai.operation.name"] == "execute_tool"
    assert tattrs["gen_ai.tool.name"] == "add" and tattrs["gen_ai.tool.type"] == "function"
    call_id = response.state["messages"][1]["tool_calls"][0]["id"]
    assert tattrs["gen_ai.tool.call.id"] == call_id
    assert "gen_ai.tool.call.arguments" not in tattrs
    assert tool.status.status_code == StatusCode.UNSET

    # every span names the trajectory row of its step: same thread, step and parent checkpoint
    rows = {
        (r["thread_id"], r["step"], r["parent_checkpoint_id"]): r
        for r in trajectory_rows(tmp_path / "runs.db")
    }
    for span in spans.all()[1:]:
        key = tuple((span.attributes or {})[k] for k in JOIN)
        assert key in rows, (span.name, key)
        node = (span.attributes or {})["aworld_graph.node"]
        assert json.loads(rows[key]["nodes"]) == [node]
    saved = [e for e in root.events if e.name == "aworld_graph.checkpoint"]
    assert [(e.attributes or {})["aworld_graph.checkpoint_id"] for e in saved] == [
        r["checkpoint_id"] for r in trajectory_rows(tmp_path / "runs.db")
    ]


def test_content_is_recorded_only_when_asked(spans: Spans) -> None:
    tracing.configure(tracer_provider=spans.provider, capture_content=True)
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 1}), "two"])
    agent = Agent(name="calc", system_prompt="Be exact.", tools=[add], model=model)
    Runners.sync_run("1+1?", agent=agent)
    first, second = spans.named("chat scripted-model")
    attrs = dict(first.attributes or {})
    assert json.loads(str(attrs["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "Be exact."}
    ]
    assert json.loads(str(attrs["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "1+1?"}]}
    ]
    out = json.loads(str(attrs["gen_ai.output.messages"]))
    assert out[0]["parts"][0]["type"] == "tool_call" and out[0]["parts"][0]["arguments"] == {
        "a": 1,
        "b": 1,
    }
    assert json.loads(str(attrs["gen_ai.tool.definitions"]))[0]["function"]["name"] == "add"
    tool = dict(spans.one("execute_tool add").attributes or {})
    assert json.loads(str(tool["gen_ai.tool.call.arguments"])) == {"a": 1, "b": 1}
    assert tool["gen_ai.tool.call.result"] == "2"
    last = json.loads(str((second.attributes or {})["gen_ai.output.messages"]))
    assert last == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "two"}],
            "finish_reason": "stop",
        }
    ]


def test_a_handoff_swarm_shows_each_agent_and_the_handoff(spans: Spans, saver: Any) -> None:
    triage = Agent(
        name="triage", model=ScriptedModel([tool_call("transfer_to_expert", {}, id="h1")])
    )
    expert = Agent(name="expert", model=ScriptedModel(["the expert answer"]))
    desk = HandoffSwarm(triage, expert, topology=[(triage, expert)], name="desk")
    response = Runners.sync_run("help", swarm=desk, checkpointer=saver)
    assert response.answer == "the expert answer"
    assert spans.tree() == [
        "invoke_workflow desk",
        "  invoke_agent triage",
        "    chat scripted-model",
        "  invoke_agent triage",
        "    execute_tool transfer_to_expert",
        "  invoke_agent expert",
        "    chat scripted-model",
    ]
    root = spans.one("invoke_workflow desk")
    assert (root.attributes or {})["gen_ai.workflow.name"] == "desk"
    assert (root.attributes or {})["gen_ai.operation.name"] == "invoke_workflow"
    handoff = dict(spans.one("execute_tool transfer_to_expert").attributes or {})
    assert handoff["aworld_graph.tool.kind"] == "handoff"
    assert handoff["aworld_graph.handoff.target"] == "expert"
    tools_step = spans.named("invoke_agent triage")[1]
    assert (tools_step.attributes or {})["aworld_graph.node"] == "triage__tools"
    assert (tools_step.attributes or {})["aworld_graph.handoff.target"] == "expert"
    turns = [(s.attributes or {})["aworld_graph.turn"] for s in spans.named("invoke_agent triage")]
    assert turns == ["triage#1", "triage#1"]


def test_a_critic_loop_records_each_verdict(spans: Spans, saver: Any) -> None:
    drafts = iter(["", "a haiku"])
    writer = Agent(name="writer", model=FunctionModel(lambda messages, tools: next(drafts)))
    critic = Critic(
        name="critic",
        judges=writer,
        threshold=0.5,
        scorer=lambda answer, state: (1.0, "fine") if answer else (0.0, "write something"),
    )
    response = Runners.sync_run(
        "autumn", swarm=Swarm(writer, critic, name="loop"), checkpointer=saver
    )
    assert response.answer == "a haiku"
    assert spans.tree() == [
        "invoke_workflow loop",
        "  invoke_agent writer",
        "    chat function-model",
        "  evaluate critic",
        "  invoke_agent writer",
        "    chat function-model",
        "  evaluate critic",
    ]
    verdicts = [dict(s.attributes or {}) for s in spans.named("evaluate critic")]
    assert [
        (v["gen_ai.evaluation.score.value"], v["gen_ai.evaluation.score.label"]) for v in verdicts
    ] == [(0.0, "retry"), (1.0, "pass")]
    assert all(v["gen_ai.evaluation.name"] == "critic" for v in verdicts)
    assert verdicts[0]["aworld_graph.evaluation.judged"] == "writer"
    assert "gen_ai.evaluation.explanation" not in verdicts[0]  # feedback is content
    event = spans.named("evaluate critic")[0].events[0]
    assert event.name == "gen_ai.evaluation.result"
    assert (event.attributes or {})["gen_ai.evaluation.score.label"] == "retry"

    spans.clear()
    tracing.configure(tracer_provider=spans.provider, capture_content=True)
    drafts = iter(["", "a haiku"])
    Runners.sync_run("autumn", swarm=Swarm(writer, critic, name="loop"), checkpointer=saver)
    first = dict(spans.named("evaluate critic")[0].attributes or {})
    assert first["gen_ai.evaluation.explanation"] == "write something"


def test_an_llm_judge_call_is_a_chat_span_under_its_critic(spans: Spans) -> None:
    writer = Agent(name="writer", model=ScriptedModel(["draft"]))
    judge = Critic(
        name="judge",
        judges=writer,
        system_prompt="Score it.",
        model=ScriptedModel(['{"score": 0.9, "feedback": "good"}'], name="judge-model"),
    )
    Runners.sync_run("x", swarm=Swarm(writer, judge, name="judged"))
    chat = spans.one("chat judge-model")
    parent = spans.parent(chat)
    assert parent is not None and parent.name == "evaluate judge"
    assert (chat.attributes or {})["aworld_graph.step"] == (parent.attributes or {})[
        "aworld_graph.step"
    ]
    assert (parent.attributes or {})["gen_ai.evaluation.score.value"] == 0.9


def test_a_failing_tool_is_an_error_span_and_the_run_goes_on(spans: Spans) -> None:
    model = ScriptedModel([tool_call("explode", {"reason": "x"}), "sorry"])
    response = Runners.sync_run("go", agent=Agent(name="a", tools=[explode], model=model))
    assert response.answer == "sorry"
    tool = spans.one("execute_tool explode")
    assert tool.status.status_code == StatusCode.ERROR
    assert (tool.attributes or {})["error.type"] == "tool_error"
    assert spans.all()[0].status.status_code == StatusCode.UNSET  # the run itself finished


def test_a_failing_model_call_marks_chat_step_and_run_and_joins_the_error_row(
    spans: Spans, saver: Any, tmp_path: Path
) -> None:
    model = ScriptedModel([ModelError("endpoint down")])
    response = Runners.sync_run("go", agent=Agent(name="a", model=model), checkpointer=saver)
    assert response.status == "error"
    chat, step, run = (
        spans.one("chat scripted-model"),
        *spans.named("invoke_agent a")[1:],
        spans.all()[0],
    )
    for span in (chat, step, run):
        assert span.status.status_code == StatusCode.ERROR, span.name
    assert (chat.attributes or {})["error.type"] == "ModelError"
    assert (run.attributes or {})["error.type"] == "ModelError"
    errors = [r for r in trajectory_rows(tmp_path / "runs.db") if r["source"] == "error"]
    key = tuple((chat.attributes or {})[k] for k in JOIN)
    assert [(r["thread_id"], r["step"], r["parent_checkpoint_id"]) for r in errors] == [key]


def test_a_human_interrupt_and_its_answer_are_events_on_the_run(spans: Spans, saver: Any) -> None:
    drafter = Agent(name="drafter", model=ScriptedModel(["a plan"]))
    swarm = Swarm(drafter, Human(name="approval"), name="review")
    paused = Runners.sync_run("plan", swarm=swarm, task_id="h-1", checkpointer=saver)
    assert paused.status == "interrupted"
    (asked,) = [e for e in spans.one("invoke_workflow review").events if "human" in e.name]
    assert asked.name == "aworld_graph.human.interrupt"
    attrs = dict(asked.attributes or {})
    assert attrs["aworld_graph.node"] == "approval"
    assert attrs["aworld_graph.parent_checkpoint_id"] == paused.checkpoint_id
    assert "aworld_graph.interrupt.value" not in attrs

    spans.clear()
    import asyncio

    done = asyncio.run(Runners.resume("h-1", swarm=swarm, value="approve", checkpointer=saver))
    assert done.status == "finished"
    run = spans.one("invoke_workflow review")
    assert [e.name for e in run.events if "human" in e.name] == ["aworld_graph.human.resume"]
    assert (run.attributes or {})["aworld_graph.parent_checkpoint_id"] == paused.checkpoint_id


def test_a_delegated_member_runs_inside_its_leaders_tool_span(spans: Spans) -> None:
    leader = Agent(
        name="leader",
        model=ScriptedModel([tool_call("ask_member", {"request": "find"}, id="d1"), "all done"]),
    )
    member = Agent(name="member", model=ScriptedModel(["found it"]))
    Runners.sync_run("work", swarm=TeamSwarm(leader, member, name="team"), task_id="team-1")
    assert spans.tree() == [
        "invoke_workflow team",
        "  invoke_agent leader",
        "    chat scripted-model",
        "  invoke_agent leader",
        "    execute_tool ask_member",
        "      invoke_agent member",
        "        invoke_agent member",
        "          chat scripted-model",
        "  invoke_agent leader",
        "    chat scripted-model",
    ]
    delegate = dict(spans.one("execute_tool ask_member").attributes or {})
    assert delegate["aworld_graph.delegate.target"] == "member"
    sub_run = spans.named("invoke_agent member")[0]
    assert (sub_run.attributes or {})["aworld_graph.thread_id"] == delegate[
        "aworld_graph.delegate.thread_id"
    ]
    assert str(delegate["aworld_graph.delegate.thread_id"]).startswith("team-1.")
    assert len({s.context.trace_id for s in spans.all()}) == 1


def test_an_mcp_tool_span_names_the_server_and_its_own_tool_name(
    spans: Spans, tmp_path: Path
) -> None:
    mcp_config = {
        "mcpServers": {
            "env": {
                "command": sys.executable,
                "args": ["-m", "aworld_graph.environment.server", "--root", str(tmp_path)],
            }
        }
    }
    model = ScriptedModel([tool_call("env__calculator", {"expression": "6*7"}), "42"])
    agent = Agent(name="mathy", model=model, mcp_config=mcp_config, mcp_servers=["env"])
    assert Runners.sync_run("6*7?", agent=agent).answer == "42"
    tool = dict(spans.one("execute_tool calculator").attributes or {})
    assert tool["gen_ai.tool.name"] == "calculator"
    assert tool["aworld_graph.tool.server"] == "env"
    assert tool["aworld_graph.tool.called_as"] == "env__calculator"
    assert tool["gen_ai.tool.type"] == "extension"
