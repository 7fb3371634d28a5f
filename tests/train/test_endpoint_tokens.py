"""Token ids from an OpenAI-compatible endpoint: vLLM's fields are read, OpenAI's logprobs
without ids are marked unavailable (never re-tokenized), and the fields leave ``raw``; an
endpoint that refuses ``return_token_ids`` is asked again without it, and the record says so."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aworld_graph import Agent, AgentConfig, Runners
from aworld_graph.errors import ModelError
from aworld_graph.model import ModelResponse, OpenAIModel, recording_tokens
from aworld_graph.train import UntrainableRun, flatten
from tests.fake_openai import FakeOpenAI, status, text
from tests.server.conftest import LiveServer


def _reply(with_ids: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": "4"},
        "finish_reason": "stop",
        "logprobs": {
            "content": [
                {"token": "4", "logprob": -0.25, "bytes": [52], "top_logprobs": []},
                {"token": "<|im_end|>", "logprob": -0.5, "bytes": [], "top_logprobs": []},
            ]
        },
    }
    reply: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "served-model",
        "choices": [choice],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    if with_ids:  # vLLM with return_token_ids
        reply["prompt_token_ids"] = [11, 12, 13]
        choice["token_ids"] = [19, 2]
    return reply


def _run(with_ids: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    requests: list[dict[str, Any]] = []

    async def chat(request: Request) -> JSONResponse:
        requests.append(await request.json())
        return JSONResponse(_reply(with_ids))

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with LiveServer(app) as server:
        conf = AgentConfig(
            llm_base_url=f"{server.url}/v1", llm_model_name="served-model", record_tokens=True
        )
        response = Runners.sync_run(
            input="2+2?", agent=Agent(name="a", system_prompt="s", conf=conf)
        )
    record = next(r for r in response.state["trace"] if r["kind"] == "llm")
    return record, requests


def test_vllm_token_ids_are_recorded_as_sampled() -> None:
    record, requests = _run(with_ids=True)
    assert requests[0]["logprobs"] is True and requests[0]["return_token_ids"] is True
    assert record["tokens"] == {
        "prompt_ids": [11, 12, 13],
        "completion_ids": [19, 2],
        "logprobs": [-0.25, -0.5],
        "tokenizer": "served-model",
    }
    assert "prompt_token_ids" not in record["raw"]
    assert "token_ids" not in record["raw"]["choices"][0]
    assert record["content"] == "4"


def test_logprobs_without_ids_are_marked_unavailable() -> None:
    record, _ = _run(with_ids=False)
    tokens = record["tokens"]
    assert tokens["available"] is False
    assert "logprobs but no token ids" in tokens["reason"]
    assert tokens["logprobs"] == [-0.25, -0.5]
    assert "completion_ids" not in tokens


# An endpoint that refuses fields it does not know (OpenAI's API, Gemini's, Mistral's: HTTP
# 400/422) gets the request again without return_token_ids; vLLM reads the field, llama.cpp's
# server ignores it (tests/fake_openai.py answers as OpenAI does).


def _complete(model: OpenAIModel, stream: bool = False) -> ModelResponse:
    async def go() -> ModelResponse:
        with recording_tokens():
            return await model.complete(
                [{"role": "user", "content": "2+2?"}], on_token=(lambda _: None) if stream else None
            )

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [False, True])
def test_a_refused_return_token_ids_is_dropped_and_said(stream: bool) -> None:
    with FakeOpenAI(reject_unknown_fields=True) as server:
        server.add(text("4"), text("5"))
        model = OpenAIModel(model="fake-model", base_url=server.url, max_retries=0)
        first = _complete(model, stream)
        second = _complete(model, stream)
    sent = [r["body"] for r in server.requests]
    assert [("return_token_ids" in b, b["logprobs"]) for b in sent] == [
        (True, True),  # refused with HTTP 400
        (False, True),  # the same request without it: answered
        (False, True),  # the next call leaves it out
    ]
    assert first.content == "4" and second.content == "5"
    assert first.retried == ["HTTP 400 Bad Request"] and second.retried == []
    for response in (first, second):
        assert response.tokens is not None and response.tokens["available"] is False
        reason = response.tokens["reason"]
        assert "refused the request field return_token_ids" in reason
        assert "Unrecognized request argument supplied: return_token_ids" in reason
        assert "completion_ids" not in response.tokens


def test_a_refusal_in_a_run_is_recorded_in_the_tokens_record() -> None:
    with FakeOpenAI(reject_unknown_fields=True) as server:
        server.add(text("4"))
        conf = AgentConfig(llm_base_url=server.url, llm_model_name="fake-model", record_tokens=True)
        response = Runners.sync_run(
            input="2+2?", agent=Agent(name="a", system_prompt="s", conf=conf)
        )
    assert response.success and response.answer == "4"
    record = next(r for r in response.state["trace"] if r["kind"] == "llm")
    assert record["tokens"]["available"] is False
    assert "refused the request field return_token_ids" in record["tokens"]["reason"]
    with pytest.raises(UntrainableRun, match="refused the request field return_token_ids"):
        flatten(response, reward=1.0)


def test_another_bad_request_is_an_error_and_the_field_is_sent_again() -> None:
    with FakeOpenAI() as server:  # a 400 that is not about the field: twice
        server.add(status(400, message="context too long"), status(400, message="context too long"))
        server.add(text("4"))
        model = OpenAIModel(model="fake-model", base_url=server.url, max_retries=0)
        with pytest.raises(ModelError, match="HTTP 400.*context too long"):
            _complete(model)
        answered = _complete(model)
    sent = [r["body"] for r in server.requests]
    assert ["return_token_ids" in b for b in sent] == [True, False, True]
    assert answered.tokens is not None and "refused" not in answered.tokens["reason"]
