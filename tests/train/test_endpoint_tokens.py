"""Token ids from an OpenAI-compatible endpoint: vLLM's fields are read, OpenAI's logprobs
without ids are marked unavailable (never re-tokenized), and the fields leave ``raw``."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aworld_graph import Agent, AgentConfig, Runners
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
