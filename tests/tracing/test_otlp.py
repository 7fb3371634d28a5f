"""OTLP over HTTP to a collector on 127.0.0.1 that decodes the protobuf requests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from aworld_graph import Agent, Runners, tracing
from aworld_graph.testing import ScriptedModel, tool_call
from tests.tracing.collector import Collector
from tests.tracing.conftest import Spans

ROOT = Path(__file__).resolve().parents[2]
CALC_TREE = {"invoke_agent calc": 4, "chat scripted-model": 2, "execute_tool add": 1}


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_spans_reach_a_collector_over_otlp_http() -> None:
    with Collector() as collector:
        provider = TracerProvider()
        exporter = OTLPSpanExporter(endpoint=collector.endpoint + "/v1/traces")
        provider.add_span_processor(BatchSpanProcessor(exporter))
        tracing.configure(tracer_provider=provider)
        try:
            model = ScriptedModel([tool_call("add", {"a": 2, "b": 3}), "5"])
            Runners.sync_run("2+3?", agent=Agent(name="calc", tools=[add], model=model))
            assert provider.force_flush()
        finally:
            tracing.disable()
            provider.shutdown()
    assert collector.content_types and set(collector.content_types) == {"application/x-protobuf"}
    counts = {name: len(collector.named(name)) for name in CALC_TREE}
    assert counts == CALC_TREE
    (chat, _) = collector.named("chat scripted-model")
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chat.kind == 3  # SPAN_KIND_CLIENT
    assert chat.scope == "aworld_graph"
    (tool,) = collector.named("execute_tool add")
    assert tool.attributes["gen_ai.tool.name"] == "add"
    assert isinstance(tool.attributes["aworld_graph.step"], int)
    root = next(s for s in collector.spans if not s.parent_span_id)
    assert root.name == "invoke_agent calc"
    assert {s.trace_id for s in collector.spans} == {root.trace_id}
    assert [name for name, _ in root.events].count("aworld_graph.checkpoint") >= 4


def test_a_child_process_traces_from_otel_env_into_its_parents_trace(spans: Spans) -> None:
    with Collector() as collector:
        with spans.provider.get_tracer("test").start_as_current_span("driver") as driver:
            carrier = tracing.inject()
        assert set(carrier) >= {"traceparent"}
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_SERVICE_NAME": "aworld-child",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "NO_PROXY": "127.0.0.1",
        }
        done = subprocess.run(
            [sys.executable, "-m", "tests.tracing.child", json.dumps(carrier)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "finished"
    context = driver.get_span_context()
    assert {s.trace_id for s in collector.spans} == {f"{context.trace_id:032x}"}
    ids = {s.span_id for s in collector.spans}
    (root,) = [s for s in collector.spans if s.parent_span_id not in ids]
    assert root.name == "invoke_agent calc"
    assert root.parent_span_id == f"{context.span_id:016x}"
    assert root.attributes["gen_ai.conversation.id"] == "child-run"
    assert root.resource["service.name"] == "aworld-child"
    counts = {name: len(collector.named(name)) for name in CALC_TREE}
    assert counts == CALC_TREE


def test_an_exporter_the_extra_does_not_ship_is_a_config_error_naming_the_fix() -> None:
    code = (
        "from aworld_graph import tracing\n"
        "from aworld_graph.errors import ConfigError\n"
        "try:\n    tracing.configure()\nexcept ConfigError as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "zipkin"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "'zipkin'" in done.stdout and "tracing.configure(tracer_provider=...)" in done.stdout


def test_the_cli_traces_when_the_otel_environment_names_an_exporter(tmp_path: Path) -> None:
    with Collector() as collector:
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_SERVICE_NAME": "aworld-cli-test",
            "AWORLD_GRAPH_DB": str(tmp_path / "cli.db"),
            "STEP_LOG": str(tmp_path / "steps.log"),
        }
        done = subprocess.run(
            [sys.executable, "-c", "from aworld_graph.cli import main; main()", "run",
             "tests.procs.killable:swarm", "--input", "go"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert collector.named("invoke_workflow killable"), [s.name for s in collector.spans]
    assert collector.named("execute_tool log_step")


def test_a_collector_that_is_not_running_costs_one_line_and_no_retries(tmp_path: Path) -> None:
    """Spans for an endpoint where nothing listens are dropped at the first refused
    connection: one warning, no retry warnings, no waiting out the exporter's timeout."""
    with socket.socket() as probe:  # a loopback port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "AWORLD_GRAPH_DB": str(tmp_path / "cli.db"),
        "STEP_LOG": str(tmp_path / "steps.log"),
    }
    done = subprocess.run(
        [sys.executable, "-c", "from aworld_graph.cli import main; main()", "run",
         "tests.procs.killable:swarm", "--input", "go"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "answer: report: logged 3 steps" in done.stdout
    (line,) = done.stderr.splitlines()
    assert line == (
        f"spans not exported: nothing listens at http://127.0.0.1:{port}/v1/traces; start the "
        "collector, or unset OTEL_EXPORTER_OTLP_ENDPOINT to run without tracing"
    )
