"""The agent bench_scale.py runs: a module attribute, so Ray workers rebuild it by import."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from aworld_graph import Agent
from aworld_graph.testing import FunctionModel

LATENCY = float(os.environ.get("BENCH_SCALE_LATENCY", "0.005"))


async def _reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    await asyncio.sleep(float(messages[-1]["content"].split()[0]))  # the simulated LLM call
    return "done"


agent = Agent(name="worker", model=FunctionModel(_reply, name="simulated-llm"))
"""One LLM call per task; the input starts with the call's latency in seconds."""
