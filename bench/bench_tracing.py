"""What tracing costs a run: the same run with tracing on against tracing off.

Rows (each ratio is tracing on / tracing off, measured side by side in this process):

* ``tool run, spans dropped`` – one agent that calls a Python tool once and then answers
  (3 supersteps, 7 spans) on a ``FunctionModel`` and LangGraph's ``InMemorySaver``, so the
  model and the store cost next to nothing and the spans' share is as large as it gets; an
  SDK ``TracerProvider`` whose exporter drops every span (built and ended, never sent);
* ``tool run, in-memory exporter + content`` – the same run into the SDK's
  ``InMemorySpanExporter`` behind a ``SimpleSpanProcessor``, with ``capture_content=True``;
* ``HTTP model call, spans dropped`` – one agent answering in one call to the project's fake
  OpenAI server on 127.0.0.1 (3 spans): closer to a real run, where a model call follows.

Runs alternate (off, on, off, on…) so drift in machine load hits both sides alike, and each
is timed in CPU seconds of this process (``time.process_time``): what the spans cost is CPU
work, and on a shared machine wall time mostly measures the neighbours.

    python bench/bench_tracing.py [--quick]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from aworld_graph import Agent, AgentConfig, Runners, tracing  # noqa: E402
from aworld_graph.testing import FunctionModel, tool_call  # noqa: E402
from tests.fake_openai import FakeOpenAI, text  # noqa: E402


class _Drop(SpanExporter):
    """An exporter that accepts and forgets every span."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1].get("role") == "tool":
        return f"It is {messages[-1]['content']}."
    return tool_call("add", {"a": 2, "b": 3})


def _agent() -> Agent:
    return Agent(name="calc", tools=[add], model=FunctionModel(_reply))


def _http_agent(url: str) -> Agent:
    return Agent(name="chat", conf=AgentConfig(llm_base_url=url, llm_model_name="fake-model"))


async def _one(agent: Agent, saver: InMemorySaver) -> float:
    started = time.process_time()
    response = await Runners.run("2+3?", agent=agent, checkpointer=saver)
    elapsed = time.process_time() - started
    assert response.answer == "It is 5.", response.msg
    return elapsed


async def _compare(
    agent: Agent, provider: TracerProvider, capture: bool, rounds: int, per_round: int
) -> tuple[float, float]:
    """Median CPU seconds per run with tracing off and on."""
    saver = InMemorySaver()
    off: list[float] = []
    on: list[float] = []
    for _ in range(3):  # warm-up both sides: graph build, imports, first spans
        tracing.disable()
        await _one(agent, saver)
        tracing.configure(tracer_provider=provider, capture_content=capture)
        await _one(agent, saver)
    for _ in range(rounds * per_round):
        tracing.disable()
        off.append(await _one(agent, saver))
        tracing.configure(tracer_provider=provider, capture_content=capture)
        on.append(await _one(agent, saver))
    tracing.disable()
    return statistics.median(off), statistics.median(on)


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows ``{"name", "ours", "peer", "ratio", "goal", "unit", "note"}``."""
    rounds, per_round = (3, 10) if quick else (10, 30)
    rows: list[dict[str, Any]] = []
    dropped = TracerProvider()
    dropped.add_span_processor(SimpleSpanProcessor(_Drop()))
    memory = InMemorySpanExporter()
    kept = TracerProvider()
    kept.add_span_processor(SimpleSpanProcessor(memory))
    server = FakeOpenAI()
    server.default = text("It is 5.")
    with server:
        cases = [
            ("tool run, spans dropped vs off", _agent(), dropped, False, "<= 1.3x", 7),
            ("tool run, in-memory exporter + content vs off", _agent(), kept, True, "<= 1.4x", 7),
            (
                "HTTP model call, spans dropped vs off",
                _http_agent(server.url),
                dropped,
                False,
                "<= 1.15x",
                3,
            ),
        ]
        for name, agent, provider, capture, goal, count in cases:
            off, on = asyncio.run(_compare(agent, provider, capture, rounds, per_round))
            rows.append(
                {
                    "name": name,
                    "ours": on * 1e3,
                    "peer": off * 1e3,
                    "ratio": on / off,
                    "goal": goal,
                    "unit": "CPU ms/run",
                    "note": f"median of {rounds * per_round} runs each; {count} spans per run",
                }
            )
            memory.clear()
    dropped.shutdown()
    kept.shutdown()
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(
            f"{row['name']}: {row['ours']:.2f} vs {row['peer']:.2f} {row['unit']} "
            f"= {row['ratio']:.3f}x (goal {row['goal']}; {row['note']})"
        )
