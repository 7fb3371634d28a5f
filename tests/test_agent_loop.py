"""The agent loop: LLM node ⇄ tools node, with the library's fakes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aworld_graph import Agent, ModelRetry, Runners, TaskConfig, tool
from aworld_graph.errors import UnexpectedModelCall
from aworld_graph.model import ModelProfile
from aworld_graph.testing import FunctionModel, ScriptedModel, tool_call

executed: list[str] = []


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    executed.append(expression)
    allowed = set("0123456789+-*/() ")
    if not set(expression) <= allowed:
        raise ModelRetry(f"only digits and + - * / ( ) are allowed, got {expression!r}")
    return str(eval(expression))  # test tool on a checked alphabet


@tool
def fails(x: int) -> int:
    """Always fails."""
    raise RuntimeError("disk on fire")


@pytest.fixture(autouse=True)
def _reset() -> None:
    executed.clear()


async def test_tool_call_then_answer_records_every_step(saver: Any) -> None:
    model = ScriptedModel([tool_call("calculator", {"expression": "17*23"}), "The answer is 391."])
    agent = Agent(name="solver", system_prompt="Use the calculator.", tools=[calculator], model=model)
    response = await Runners.run("What is 17*23?", agent=agent, checkpointer=saver)
    model.assert_consumed()
    assert response.success and response.answer == "The answer is 391."
    assert response.llm_calls == 2 and response.usage["total_tokens"] > 0
    first, second = response.trajectory
    assert first["action"]["tool_calls"][0]["function"]["name"] == "calculator"
    assert first["reward"]["tool_outputs"][0]["content"] == "391"
    assert first["action"]["is_agent_finished"] is False
    assert second["action"]["is_agent_finished"] is True and second["meta"]["pre_agent"] == "solver"
    assert all(item["meta"]["checkpoint_id"] for item in response.trajectory)
    # the model saw the system prompt, the question and the tool result
    seen = model.calls[1].messages
    assert seen[0] == {"role": "system", "content": "Use the calculator."}
    assert seen[-1]["role"] == "tool" and seen[-1]["content"] == "391"


async def test_validation_error_and_model_retry_go_back_to_the_model(saver: Any) -> None:
    model = ScriptedModel(
        [
            tool_call("calculator", {"expr": "1+1"}),
            tool_call("calculator", {"expression": "import os"}),
            tool_call("fails", {"x": 1}),
            "gave up",
        ]
    )
    agent = Agent(name="a", tools=[calculator, fails], model=model)
    response = await Runners.run("?", agent=agent, checkpointer=saver)
    outputs = [item["reward"]["tool_outputs"][0] for item in response.trajectory[:3]]
    assert all(o["is_error"] for o in outputs)
    assert "Invalid arguments for tool 'calculator'" in outputs[0]["content"] and "expression" in outputs[0]["content"]
    assert "only digits" in outputs[1]["content"]
    assert "disk on fire" in outputs[2]["content"]
    assert response.answer == "gave up"


async def test_unknown_tool_lists_the_known_ones(saver: Any) -> None:
    model = ScriptedModel([tool_call("search_web", {"q": "x"}), "ok"])
    response = await Runners.run("?", agent=Agent(name="a", tools=[calculator], model=model), checkpointer=saver)
    content = response.trajectory[0]["reward"]["tool_outputs"][0]["content"]
    assert "Unknown tool 'search_web'" in content and "calculator" in content


async def test_parallel_tool_calls_each_get_their_tool_message(saver: Any) -> None:
    model = ScriptedModel(
        [[tool_call("calculator", {"expression": "1+1"}, id="c1"), tool_call("calculator", {"expression": "2+2"}, id="c2")], "2 and 4"]
    )
    response = await Runners.run("?", agent=Agent(name="a", tools=[calculator], model=model), checkpointer=saver)
    tool_msgs = [m for m in response.state["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_msgs] == [("c1", "2"), ("c2", "4")]


async def test_repeated_identical_call_is_answered_from_the_earlier_result(saver: Any) -> None:
    model = ScriptedModel(
        [tool_call("calculator", {"expression": "17*23"}), tool_call("calculator", {"expression": "17 * 23".replace(" ", "")}), "391"]
    )
    response = await Runners.run("17*23?", agent=Agent(name="a", tools=[calculator], model=model), checkpointer=saver)
    assert executed == ["17*23"]
    second = response.trajectory[1]["reward"]["tool_outputs"][0]
    assert second["repeated"] is True and "do not call it again" in second["content"]
    assert response.answer == "391"


async def test_agent_max_steps_stops_the_loop_without_success(saver: Any) -> None:
    model = FunctionModel(lambda messages, tools: tool_call("calculator", {"expression": f"{len(messages)}+1"}))
    agent = Agent(name="looper", tools=[calculator], model=model, max_steps=3)
    response = await Runners.run("loop forever", agent=agent, checkpointer=saver)
    assert response.success is False and response.status == "max_steps"
    assert "max_steps" in (response.msg or "")
    assert response.llm_calls == 3
    assert response.trajectory[-1]["meta"]["kind"] == "limit"


async def test_task_max_steps_bounds_the_run(saver: Any) -> None:
    model = FunctionModel(lambda messages, tools: tool_call("calculator", {"expression": f"{len(messages)}+1"}))
    agent = Agent(name="looper", tools=[calculator], model=model, max_steps=100)
    response = await Runners.run("loop", agent=agent, conf=TaskConfig(max_steps=4), checkpointer=saver)
    assert response.status == "max_steps" and response.llm_calls == 2


async def test_text_profile_renders_tool_results_as_text_and_stops_offering_tools(saver: Any) -> None:
    model = ScriptedModel(
        [tool_call("calculator", {"expression": "17*23"}), "391"],
        profile=ModelProfile(tool_results="text"),
    )
    await Runners.run("What is 17*23?", agent=Agent(name="a", tools=[calculator], model=model), checkpointer=saver)
    first, second = model.calls
    assert first.tool_names == ["calculator"]
    assert second.tools == []
    assert all(m["role"] in ("system", "user", "assistant") for m in second.messages)
    assert second.messages[-2]["content"] == 'calculator({"expression": "17*23"})'
    assert second.messages[-1] == {
        "role": "user",
        "content": "The calculator tool returned: 391. Reply with the final answer only.",
    }


async def test_scripted_model_fails_loudly_on_an_extra_call(saver: Any) -> None:
    model = ScriptedModel([tool_call("calculator", {"expression": "1+1"})])
    response = await Runners.run("?", agent=Agent(name="a", tools=[calculator], model=model), checkpointer=saver)
    assert response.status == "error" and "was not scripted" in (response.msg or "")
    assert response.trajectory[-1]["meta"]["kind"] == "error"
    with pytest.raises(UnexpectedModelCall):
        await model.complete([])


def test_scripted_model_reports_unconsumed_steps() -> None:
    model = ScriptedModel(["a", "b"])
    with pytest.raises(AssertionError, match="2 scripted replies unused"):
        model.assert_consumed()


def test_tool_schema_comes_from_type_hints() -> None:
    @tool(name="lookup", description="Find things.")
    def lookup(query: str, limit: int = 3, exact: bool = False) -> list[str]:
        return []

    schema = lookup.spec.openai()["function"]
    assert schema["name"] == "lookup" and schema["description"] == "Find things."
    assert schema["parameters"]["required"] == ["query"]
    assert {k: v["type"] for k, v in schema["parameters"]["properties"].items()} == {
        "query": "string", "limit": "integer", "exact": "boolean",
    }


async def test_function_model_sees_tools_and_history(saver: Any) -> None:
    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return f"done: {messages[-1]['content']}"
        return tool_call(tools[0]["function"]["name"], {"expression": "6*7"})

    model = FunctionModel(reply)
    response = await Runners.run("6*7", agent=Agent(name="a", tools=[calculator], model=model), checkpointer=saver)
    assert response.answer == "done: 42"
    assert json.loads(response.trajectory[0]["action"]["tool_calls"][0]["function"]["arguments"]) == {"expression": "6*7"}
