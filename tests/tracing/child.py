"""Run by ``test_otlp`` in a child process: tracing set up from the ``OTEL_*`` environment,
and the run joined to the parent's trace through the W3C carrier given as ``argv[1]``."""

from __future__ import annotations

import json
import sys

from aworld_graph import Agent, Runners, tracing
from aworld_graph.testing import ScriptedModel, tool_call


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def main() -> None:
    carrier = json.loads(sys.argv[1])
    tracing.configure()
    model = ScriptedModel([tool_call("add", {"a": 2, "b": 3}), "5"])
    with tracing.attached(tracing.extract(carrier)):
        response = Runners.sync_run(
            "2+3?", agent=Agent(name="calc", tools=[add], model=model), task_id="child-run"
        )
    print(response.status)


if __name__ == "__main__":
    main()
