"""AReaL's workflow contract against a loopback token-recording proxy (AReaL itself needs CUDA
torch and is not installed), and slime's sample fields with a plain stand-in (slime is not on
PyPI)."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Any

import pytest

from aworld_graph import Agent, AgentConfig
from aworld_graph.local import ensure_server
from aworld_graph.rewards import contains
from aworld_graph.train.areal import AReaLWorkflow
from aworld_graph.train.slime import slime_generate
from tests.train.token_proxy import TokenProxy


def _agent() -> Agent:
    return Agent(
        name="greeter",
        system_prompt="Answer in one short sentence.",
        conf=AgentConfig(llm_temperature=0.0, params={"max_tokens": 12}),
    )


def raises(answer: str | None, expected: Any) -> float:
    raise RuntimeError("scorer down")


@pytest.mark.local_model
def test_areal_workflow_reaches_the_model_through_the_proxy() -> None:
    workflow = AReaLWorkflow(agent=_agent(), reward_func=contains)
    bad = AReaLWorkflow(agent=_agent(), reward_func=raises)
    with TokenProxy(ensure_server().base_url) as proxy:

        async def batch() -> list[float | None]:
            return [
                await workflow.run(
                    {"messages": [{"role": "user", "content": "Say hello."}], "answer": "hello"},
                    base_url=proxy.url,
                    api_key="rollout-session-key",
                ),
                await workflow.run({"answer": "x"}, base_url=proxy.url),  # no prompt
                await bad.run({"prompt": "Say hi.", "answer": "hi"}, base_url=proxy.url),
            ]

        rewards = asyncio.run(batch())
    assert rewards[0] in (0.0, 1.0)
    assert rewards[1:] == [None, None]
    assert workflow.failed == 1 and "no 'prompt' field" in workflow.errors[0]
    assert bad.failed == 1 and "RuntimeError: scorer down" in bad.errors[0]
    assert "'expected'" in bad.errors[0] or "expected" in bad.errors[0]
    # every call went through the proxy, and the trajectory holds the ids the proxy recorded
    episode = workflow.episodes[0]
    assert episode.response is not None
    calls = [r for r in episode.response.state["trace"] if r["kind"] == "llm"]
    assert len(proxy.calls) == len(calls) + 1  # the bad workflow's call too
    assert calls[0]["tokens"]["completion_ids"] == proxy.calls[0]["completion_ids"]
    assert calls[0]["tokens"]["prompt_ids"] == proxy.calls[0]["prompt_ids"]
    assert episode.sequences[0].completion_ids == proxy.calls[0]["completion_ids"]


@dataclass
class Sample:
    """The fields of slime's ``Sample`` that a generate function reads and fills."""

    class Status(enum.Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"

    index: int = 0
    prompt: Any = ""
    label: Any = None
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    loss_mask: list[int] | None = None
    rollout_log_probs: list[float] | None = None
    reward: float | None = None
    status: Status = Status.PENDING
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Args:
    sglang_router_ip: str
    sglang_router_port: int


@pytest.mark.local_model
def test_slime_generate_fills_the_sample_fields() -> None:
    base = ensure_server().base_url  # http://127.0.0.1:PORT/v1, standing in for slime's router
    host, port = base.removeprefix("http://").removesuffix("/v1").split(":")
    args = Args(sglang_router_ip=host, sglang_router_port=int(port))
    generate = slime_generate(agent=_agent(), reward_func=contains)
    good = asyncio.run(generate(args, Sample(prompt="Say hello.", label="hello"), {}))
    assert good.status is Sample.Status.COMPLETED
    assert good.response_length > 0
    assert len(good.tokens) > good.response_length
    assert len(good.loss_mask) == len(good.rollout_log_probs) == good.response_length
    assert good.reward in (0.0, 1.0) and good.response
    failed = asyncio.run(generate(args, Sample(index=3, prompt="Say hi."), {}))  # no label
    assert failed.status is Sample.Status.ABORTED
    assert failed.response_length == 0 and failed.reward is None
    assert "row 3" in failed.metadata["error"] and "'expected'" in failed.metadata["error"]
