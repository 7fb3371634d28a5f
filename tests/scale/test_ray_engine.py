"""The Ray engine on a real local Ray cluster (2 CPUs, loopback only; see conftest.py)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Agent, DefinitionError, RunConfig, Runners, Task, TrajectorySaver
from aworld_graph.meta import Budget, default_operators, optimize
from aworld_graph.meta import synthetic as syn
from aworld_graph.rewards import exact
from aworld_graph.testing import FunctionModel
from tests.fake_openai import FakeOpenAI, calls, text

from . import apps

pytestmark = pytest.mark.usefixtures("ray_cluster")

_databases = itertools.count(1)


def _ray(**options: Any) -> RunConfig:
    return RunConfig(engine_name="ray", worker_num=2, max_concurrency=4, **options)


def _endpoint(server: FakeOpenAI) -> dict[str, Any]:
    """Worker environment pointing every model at ``server``."""
    return {"env_vars": {"LLM_BASE_URL": server.url, "LLM_MODEL_NAME": "fake-model"}}


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TrajectorySaver]:
    """The shared store: a SQLite file, or a database on the throw-away PostgreSQL server
    (started by the run inside the namespace, so it is in the namespace too)."""
    if request.param == "sqlite":
        saver = TrajectorySaver(tmp_path / "runs.db")
    else:
        server = request.getfixturevalue("postgres_server")
        saver = TrajectorySaver(server.create_database(f"scale_{next(_databases)}"))
    try:
        yield saver
    finally:
        saver.close()


async def test_a_yaml_batch_runs_on_two_workers_and_not_in_the_driver(
    store: TrajectorySaver,
) -> None:
    tasks = [
        Task(input=f"which process? {i}", swarm=apps.pid_flow, id=f"pid-{i}") for i in range(8)
    ]
    out = await Runners.run_task(tasks, checkpointer=store, run_conf=_ray())
    assert [r.status for r in out.values()] == ["finished"] * 8
    pids = {int(r.answer.split()[1]) for r in out.values()}
    assert len(pids) >= 2
    assert os.getpid() not in pids
    assert all(r.retried == [] for r in out.values())


async def test_a_worker_runs_at_most_max_concurrency_of_its_chunk_at_once(tmp_path: Path) -> None:
    tasks = [Task(input=f"hold {i}", agent=apps.overlapper, id=f"hold-{i}") for i in range(12)]
    conf = RunConfig(engine_name="ray", worker_num=2, max_concurrency=2)
    out = await Runners.run_task(
        tasks, checkpointer=TrajectorySaver(tmp_path / "r.db"), run_conf=conf
    )
    peaks: dict[int, int] = {}
    for response in out.values():
        pid, peak = map(int, str(response.answer).split()[1:])
        peaks[pid] = max(peaks.get(pid, 0), peak)
    assert list(out) == [t.id for t in tasks]  # in the order of the tasks
    assert len(peaks) == 2 and set(peaks.values()) == {2}, peaks


_VOLATILE = {
    "at",
    "created_at",
    "execute_time",
    "time_cost",
    "duration_ms",
    "latency_ms",
    "checkpoint_id",
    "ts",
}


def _normalized(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"call_\d+", "call_N", value)
    return value


async def test_a_scripted_batch_gives_the_local_engines_answers_and_trajectories(
    tmp_path: Path,
) -> None:
    def batch() -> list[Task]:
        return [Task(input=f"square {n}", swarm=apps.square_flow, id=f"sq-{n}") for n in range(5)]

    local = await Runners.run_task(batch(), checkpointer=TrajectorySaver(tmp_path / "l.db"))
    remote = await Runners.run_task(
        batch(), checkpointer=TrajectorySaver(tmp_path / "r.db"), run_conf=_ray()
    )
    assert [r.answer for r in remote.values()] == [f"the square is {n * n}" for n in range(5)]
    for task_id, response in local.items():
        for field in ("answer", "status", "success", "msg", "trajectory", "llm_calls", "usage"):
            ours = _normalized(json.loads(json.dumps(getattr(remote[task_id], field))))
            assert ours == _normalized(json.loads(json.dumps(getattr(response, field)))), field


async def test_a_second_run_of_the_same_ids_reads_back_and_calls_no_model(
    tmp_path: Path,
) -> None:
    workflow = Path(apps.WORKFLOWS / "answer.yaml")
    from aworld_graph import load_workflow

    swarm = load_workflow(workflow)  # a file spec: workers load the same file
    with FakeOpenAI() as server:
        server.default = text("forty-two")
        saver = TrajectorySaver(tmp_path / "runs.db")
        conf = _ray(runtime_env=_endpoint(server))

        def batch() -> list[Task]:
            return [Task(input=f"question {i}", swarm=swarm, id=f"q-{i}") for i in range(6)]

        first = await Runners.run_task(batch(), checkpointer=saver, run_conf=conf)
        assert len(server.requests) == 6
        second = await Runners.run_task(batch(), checkpointer=saver, run_conf=conf)
        assert len(server.requests) == 6
    assert [r.answer for r in second.values()] == ["forty-two"] * 6
    assert [r.checkpoint_id for r in second.values()] == [r.checkpoint_id for r in first.values()]


async def test_a_worker_killed_mid_task_is_retried_elsewhere_from_its_last_checkpoint(
    tmp_path: Path,
) -> None:
    from aworld_graph import load_workflow

    swarm = load_workflow(apps.WORKFLOWS / "slow.yaml")
    with FakeOpenAI() as server:
        server.add(
            calls(("report_pid", {})),
            text("never delivered: its worker is killed", delay=20),
            text("finished after the retry"),
        )
        saver = TrajectorySaver(tmp_path / "runs.db")
        task = Task(input="which process?", swarm=swarm, id="killed")
        run = asyncio.ensure_future(
            Runners.run_task(task, checkpointer=saver, run_conf=_ray(runtime_env=_endpoint(server)))
        )
        for _ in range(1200):  # the second model call has arrived: the tool call is saved
            if len(server.requests) >= 2 or run.done():
                break
            await asyncio.sleep(0.05)
        assert len(server.requests) == 2, run.result() if run.done() else server.requests
        tool_message = server.requests[1]["body"]["messages"][-1]
        victim = int(tool_message["content"])
        assert victim != os.getpid()
        os.kill(victim, signal.SIGKILL)
        response = (await asyncio.wait_for(run, 120))["killed"]
        assert len(server.requests) == 3
    assert response.success, response.msg
    assert response.answer == "finished after the retry"
    assert len(response.retried) == 1
    assert f"worker pid {victim} died" in response.retried[0]
    assert "resumed on worker pid" in response.retried[0]
    assert f"resumed on worker pid {victim}" not in response.retried[0]
    # the finished tool call was not run again: its result is still the killed worker's pid
    outputs = [o["content"] for item in response.trajectory for o in item["reward"]["tool_outputs"]]
    assert outputs == [str(victim)]
    assert server.requests[2]["body"]["messages"][-1]["content"] == str(victim)


async def test_a_rollout_on_ray_has_the_local_engines_rewards(tmp_path: Path) -> None:
    def tasks() -> list[Task]:
        return [
            Task(input=f"square {n}", agent=apps.guesser, id=f"g-{n}", expected=str(n * n))
            for n in range(1, 6)
        ]

    local = await Runners.rollout(
        tasks(), n=2, reward_fn=exact, checkpointer=TrajectorySaver(tmp_path / "l.db")
    )
    remote = await Runners.rollout(
        tasks(),
        n=2,
        reward_fn=exact,
        checkpointer=TrajectorySaver(tmp_path / "r.db"),
        run_conf=_ray(),
    )
    assert [g.scores for g in remote] == [g.scores for g in local]
    assert [g.scores for g in remote] == [[0.0, 0.0], [1.0, 1.0]] * 2 + [[0.0, 0.0]]
    assert [g.mean for g in remote] == [g.mean for g in local]


async def test_optimize_evaluates_its_candidates_on_ray_as_it_does_locally(
    tmp_path: Path,
) -> None:
    async def search(directory: Path, run_conf: RunConfig | None) -> Any:
        os.makedirs(directory)
        return await optimize(
            syn.write_seed(directory),
            syn.synthetic_tasks(),
            operators=default_operators(syn.teacher_model(), names=("rewrite_prompt",)),
            budget=Budget(iterations=1),
            model=apps.student,
            db=directory / "runs.db",
            run_conf=run_conf,
        )

    local = await search(tmp_path / "local", None)
    remote = await search(tmp_path / "ray", _ray())
    assert remote.best.id == local.best.id
    assert {c.id: {s: e.scores for s, e in c.evals.items()} for c in remote.candidates} == {
        c.id: {s: e.scores for s, e in c.evals.items()} for c in local.candidates
    }
    assert remote.spent.llm_calls == local.spent.llm_calls


async def test_a_task_that_cannot_be_rebuilt_on_a_worker_is_refused_before_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = TrajectorySaver(tmp_path / "runs.db")

    def make() -> Agent:
        return Agent(name="local_only", model=FunctionModel(lambda messages, tools: "hi"))

    closure = Task(input="hi", agent=make(), id="closure")
    with pytest.raises(DefinitionError, match="not a top-level attribute of any importable module"):
        await Runners.run_task(closure, checkpointer=saver, run_conf=_ray())
    in_main = make()
    monkeypatch.setattr(sys.modules["__main__"], "adhoc_agent", in_main, raising=False)
    with pytest.raises(DefinitionError, match=r"defined in __main__.*YAML workflow file"):
        await Runners.run_task(
            Task(input="hi", agent=in_main, id="main"), checkpointer=saver, run_conf=_ray()
        )
    assert saver.get_tuple({"configurable": {"thread_id": "closure", "checkpoint_ns": ""}}) is None


def test_the_cli_runs_a_jsonl_batch_on_ray_workers(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from aworld_graph.cli import main

    batch = tmp_path / "inputs.jsonl"
    batch.write_text('{"input": "which process?", "id": "cli-a"}\n"and here?"\n')
    args = ["run", "tests.scale.apps:pid_flow", "--batch", str(batch)]
    args += ["--engine", "ray", "--workers", "2", "--db", str(tmp_path / "runs.db")]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    lines = first.output.splitlines()
    assert lines[0].startswith("cli-a\tfinished\tpid ")
    assert lines[1].startswith("inputs-") and "\tfinished\tpid " in lines[1]
    assert "2 tasks: 2 ok, 0 failed" in first.output
    again = CliRunner().invoke(main, args)  # read back: the same answers, the same workers' pids
    assert again.output.splitlines()[:2] == lines[:2]


async def test_spans_of_ray_workers_join_the_drivers_trace(tmp_path: Path) -> None:
    """The driver's trace context travels with each task: a worker (set up from the OTEL_*
    environment it is given) exports its run's spans as children of the driver's span."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from aworld_graph import tracing
    from tests.tracing.collector import Collector

    with Collector() as collector:
        provider = TracerProvider()
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracing.configure(tracer_provider=provider)
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }
        try:
            with provider.get_tracer("test").start_as_current_span("batch") as batch:
                tasks = [Task(input="square 3", swarm=apps.square_flow, id="traced-3")]
                conf = _ray(runtime_env={"env_vars": env})
                answers = await Runners.run_task(
                    tasks, checkpointer=TrajectorySaver(tmp_path / "t.db"), run_conf=conf
                )
            assert answers["traced-3"].answer == "the square is 9"
            for _ in range(200):  # the worker's batch processor exports every 50 ms
                if collector.named("invoke_workflow square"):
                    break
                await asyncio.sleep(0.05)
        finally:
            tracing.disable()
            provider.shutdown()
    (run,) = collector.named("invoke_workflow square")
    trace_id = format(batch.get_span_context().trace_id, "032x")
    assert run.trace_id == trace_id


async def test_a_sqlite_store_with_a_cluster_across_machines_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_server: Any
) -> None:
    """A second machine cannot join inside this namespace, so the cluster's view of its nodes
    (``ray.nodes()``, all the engine reads of it) gains a live node on another address; a
    SQLite file is refused before any worker starts, a PostgreSQL store is not."""
    import ray

    from aworld_graph import ConfigError

    real = ray.nodes

    def two_machines() -> list[dict[str, Any]]:
        nodes = real()
        return [*nodes, {**nodes[0], "NodeID": "f" * 56, "NodeManagerAddress": "10.0.0.2"}]

    monkeypatch.setattr(ray, "nodes", two_machines)
    tasks = [Task(input="square 2", swarm=apps.square_flow, id="across")]
    saver = TrajectorySaver(tmp_path / "runs.db")
    with pytest.raises(
        ConfigError,
        match=r"SQLite file.*spans 2 machines \(10\.0\.0\.2, 127\.0\.0\.1\).*PostgreSQL",
    ):
        await Runners.run_task(tasks, checkpointer=saver, run_conf=_ray())
    assert saver.get_tuple({"configurable": {"thread_id": "across", "checkpoint_ns": ""}}) is None
    shared = TrajectorySaver(postgres_server.create_database(f"scale_{next(_databases)}"))
    try:
        out = await Runners.run_task(tasks, checkpointer=shared, run_conf=_ray())
    finally:
        shared.close()
    assert out["across"].answer == "the square is 4"
