"""No secret reaches a span, even with content capture on."""

from __future__ import annotations

import asyncio
from typing import Any

from aworld_graph import Agent, AgentConfig, Critic, Human, Runners, Swarm, tracing
from tests.fake_openai import FakeOpenAI, calls, text
from tests.tracing.conftest import Spans

KEY = "sk-livesecretkey0123456789abcdef"
BEARER = "Bearer abcdefghijklmnopqrstuvwxyz012345"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
SECRETS = (KEY, BEARER.split()[1], GITHUB)


def fetch(url: str, api_key: str = "", headers: dict[str, str] | None = None) -> str:
    """Fetch a URL."""
    raise PermissionError(f"denied for {api_key} with {BEARER}")


def _values(value: Any) -> list[str]:
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in _values(v)]
    return [str(value)]


def test_no_secret_in_any_attribute_event_or_status(
    spans: Spans, fake_openai: FakeOpenAI, saver: Any
) -> None:
    tracing.configure(tracer_provider=spans.provider, capture_content=True)
    fake_openai.add(
        calls(
            ("fetch", {"url": "https://x", "api_key": KEY, "headers": {"Authorization": BEARER}})
        ),
        text(f"I could not: my key {KEY} and token {GITHUB} were refused."),
    )
    agent = Agent(
        name="fetcher",
        system_prompt=f"Use {BEARER} when asked.",
        tools=[fetch],
        conf=AgentConfig(llm_base_url=fake_openai.url, llm_model_name="m", llm_api_key=KEY),
    )
    critic = Critic(name="check", judges=agent, scorer=lambda answer, state: (1.0, f"ok {KEY}"))
    swarm = Swarm(agent, critic, Human(name="approve"), name="secretive")
    paused = Runners.sync_run(
        f"get it with {GITHUB}", swarm=swarm, task_id="s-1", checkpointer=saver
    )
    assert paused.status == "interrupted"
    asyncio.run(
        Runners.resume("s-1", swarm=swarm, value={"token": KEY, "ok": BEARER}, checkpointer=saver)
    )
    sent = {k.lower(): v for k, v in fake_openai.requests[0]["headers"].items()}
    assert sent["authorization"] == f"Bearer {KEY}"  # the key really went to the endpoint
    texts: list[str] = []
    for span in spans.all():
        texts += [span.name, str(span.status.description or "")]
        for key, value in (span.attributes or {}).items():
            texts += [key, *_values(value)]
        for event in span.events:
            for key, value in (event.attributes or {}).items():
                texts += [key, *_values(value)]
    blob = "\n".join(texts)
    assert "gen_ai.input.messages" in blob and "gen_ai.tool.call.arguments" in blob
    assert "aworld_graph.interrupt.value" in blob and "aworld_graph.human.value" in blob
    assert "gen_ai.evaluation.explanation" in blob and "gen_ai.tool.call.result" in blob
    for secret in SECRETS:
        assert secret not in blob, secret
