"""Workflows the server tests serve (``tests.server.apps:NAME``), on fake models.

``GATE`` holds the second model call of ``gated`` until a test sets it. ``slow`` hangs in its
second model call when ``AWORLD_TEST_SLOW=hang`` (a server to kill mid-run), else answers.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from langgraph.types import interrupt

from aworld_graph import Agent, Human, Swarm, edge, tool
from aworld_graph.testing import FunctionModel, tool_call

GATE = threading.Event()


@tool
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


def _said(messages: list[dict[str, Any]]) -> str:
    return str(next(m["content"] for m in reversed(messages) if m["role"] == "user"))


def _counter(name: str, wait: Any = None) -> Agent:
    async def fn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] != "tool":
            return tool_call("word_count", {"text": _said(messages)})
        if wait is not None:
            await wait()
        return f"{messages[-1]['content']} words"

    return Agent(name=name, model=FunctionModel(fn), tools=[word_count])


def _echo(name: str, reply: str) -> Agent:
    return Agent(name=name, model=FunctionModel(lambda messages, tools: reply))


counter = _counter("counter")
"""One agent: a word_count tool call, then '<n> words'."""


def _heard(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    said = [str(m["content"]) for m in messages if m["role"] == "user"]
    return f"turn {len(said)}: " + " / ".join(said)


chat = Agent(name="chat", model=FunctionModel(_heard), max_steps=1)
"""One agent, one model call a run: 'turn <n>: <every user message it was shown>'."""


async def _gate() -> None:
    await asyncio.to_thread(GATE.wait, 120)  # bounded: a failed test never hangs the exit


gated = Swarm(_counter("gated", _gate), name="gated")
"""Like ``counter``, but its answer waits for ``GATE``."""


async def _hang() -> None:
    if os.environ.get("AWORLD_TEST_SLOW") == "hang":
        await asyncio.sleep(3600)


slow = Swarm(_counter("slow", _hang), name="slow")
"""Like ``counter``; hangs before answering under ``AWORLD_TEST_SLOW=hang``."""


async def _ask(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    answer = interrupt({"prompt": "Go ahead?"})  # resumed: the person's answer
    await _hang()
    return f"asked {_said(messages)}; told {answer}"


asking = Swarm(Agent(name="asking", model=FunctionModel(_ask)), name="asking")
"""One model call that asks a person first (an interrupt inside the step), then answers; a
resume hangs before its step is saved under ``AWORLD_TEST_SLOW=hang``."""

_drafter, _approval = (
    _echo("drafter", "plan: three steps"),
    Human(name="approval", prompt="Approve the plan?"),
)
_publisher, _reviser = (
    _echo("publisher", "published the plan"),
    _echo("reviser", "revised the plan"),
)
approval = Swarm(
    _drafter,
    _approval,
    _publisher,
    _reviser,
    topology=[_drafter, _approval],
    edges=[
        edge(_approval, _publisher, '"approve" in lower(context.approval)'),
        edge(_approval, _reviser, '"approve" not in lower(context.approval)'),
    ],
    name="approval",
)
"""Draft, ask a person, then publish ('approve') or revise."""
