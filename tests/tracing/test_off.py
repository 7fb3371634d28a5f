"""Tracing off costs nothing: no span is emitted and OpenTelemetry is not even imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aworld_graph import Agent, Critic, Runners, Swarm, tracing
from aworld_graph.testing import ScriptedModel, tool_call
from tests.tracing.conftest import Spans

ROOT = Path(__file__).resolve().parents[2]

RUN = """
import sys
from aworld_graph import Agent, Critic, Runners, Swarm, tracing
from aworld_graph.testing import ScriptedModel, tool_call

def add(a: int, b: int) -> int:
    "Add two numbers."
    return a + b

model = ScriptedModel([tool_call("add", {"a": 2, "b": 3}), "5"])
agent = Agent(name="calc", tools=[add], model=model)
critic = Critic(name="check", judges=agent, scorer=lambda answer, state: 1.0)
response = Runners.sync_run("2+3?", swarm=Swarm(agent, critic))
assert response.answer == "5", response.msg
assert tracing.inject() == {} and tracing.extract({"traceparent": "x"}) is None
with tracing.attached(None):
    pass
"""


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


WATCH = """
import os, sys

importers = set()

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            frame = sys._getframe(1)
            while frame is not None and (
                frame.f_code.co_filename.startswith("<frozen")
                or os.sep + "opentelemetry" + os.sep in frame.f_code.co_filename
                or frame.f_code.co_filename == "<string>"
            ):
                frame = frame.f_back
            importers.add(frame.f_code.co_filename if frame is not None else "?")
        return None

sys.meta_path.insert(0, Watch())
import aworld_graph, aworld_graph.tracing, aworld_graph.testing
assert not any("opentelemetry" in m for m in sys.modules), "imported with aworld_graph"
"""


def test_a_run_with_tracing_off_does_not_import_opentelemetry() -> None:
    """Nothing of aworld-graph imports OpenTelemetry while tracing is off. (LangSmith, which
    LangGraph's runnables load, imports the SDK itself when it is installed; that import is
    not ours, and the watch tells the two apart.)"""
    out = _python(
        WATCH
        + RUN
        + "ours = sorted(f for f in importers if os.sep + 'aworld_graph' + os.sep in f)\n"
        + "print(tracing.enabled(), ours, 'aworld_graph.tracing._otel' in sys.modules)"
    )
    assert out == "False [] False"


def test_without_opentelemetry_installed_configure_is_a_no_op() -> None:
    blocked = "import sys\nsys.modules['opentelemetry'] = None  # as if not installed\n"
    out = _python(
        blocked
        + "from aworld_graph import tracing\ntracing.configure()\n"
        + RUN
        + "print(tracing.enabled())"
    )
    assert out == "False"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _run() -> None:
    model = ScriptedModel([tool_call("add", {"a": 2, "b": 3}), "5"])
    agent = Agent(name="calc", tools=[add], model=model)
    critic = Critic(name="check", judges=agent, scorer=lambda answer, state: 1.0)
    assert Runners.sync_run("2+3?", swarm=Swarm(agent, critic)).answer == "5"


def test_nothing_is_emitted_once_tracing_is_disabled(spans: Spans) -> None:
    _run()
    assert spans.all()
    spans.clear()
    tracing.disable()
    assert not tracing.enabled() and not tracing.capturing_content()
    _run()
    assert spans.all() == []


def test_inject_and_extract_carry_the_trace_in_a_w3c_carrier(spans: Spans) -> None:
    tracer = spans.provider.get_tracer("test")
    with tracer.start_as_current_span("driver") as driver:
        carrier = tracing.inject()
    context = driver.get_span_context()
    assert carrier["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
    with tracing.attached(tracing.extract(carrier)):
        _run()
    roots = [s for s in spans.all() if s.name.startswith("invoke_workflow")]
    assert len(roots) == 1 and roots[0].parent is not None
    assert roots[0].parent.span_id == context.span_id
    assert roots[0].context.trace_id == context.trace_id
