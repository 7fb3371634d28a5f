"""The CLI on Ray, as a user runs it: ``aworld-graph`` in a process of its own, which starts
its own local Ray cluster (in the loopback-only namespace, like every test here).

Every CLI process gets a Ray temp dir of its own (``RAY_TMPDIR``) and a marker in its
environment, which every process it starts (GCS, raylet, workers) inherits: after the
command has ended no process with the marker may be left, and the test kills any that is.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import TrajectorySaver
from aworld_graph.meta import save_tasks
from aworld_graph.meta import synthetic as syn
from tests.fake_openai import FakeOpenAI, text

from .marks import marked
from .synthetic_endpoint import TEACHER, SyntheticEndpoint

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from aworld_graph.cli import main; main()"]
"""``aworld-graph`` with this interpreter."""


class Cli:
    """Starts ``aworld-graph`` processes and finds what they leave behind."""

    def __init__(self) -> None:
        self.mark = uuid.uuid4().hex
        self.temp = tempfile.mkdtemp(prefix="rc-", dir="/tmp")  # short: Ray's socket paths
        self.started: list[subprocess.Popen[str]] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # a cluster of its own
        env.update(RAY_TMPDIR=self.temp, RAY_USAGE_STATS_ENABLED="0", AWORLD_TEST_MARK=self.mark)
        env.update(extra)
        return env

    def start(self, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        """``aworld-graph ARGS`` in a session of its own (its process group gets the SIGINT a
        terminal's Ctrl-C would send)."""
        process = subprocess.Popen(
            [*CLI, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.started.append(process)
        return process

    def run(
        self, args: list[str], env: dict[str, str], timeout: float = 300
    ) -> tuple[int, str, str]:
        process = self.start(args, env)
        out, err = process.communicate(timeout=timeout)
        return process.returncode, out, err

    def left(self) -> list[int]:
        """Processes still running with this fixture's marker (what the CLI started)."""
        return marked(self.mark)

    def assert_nothing_left(self, grace: float = 20.0) -> None:
        """No process of the CLI's Ray cluster is left (they may take a moment to exit)."""
        deadline = time.monotonic() + grace
        while (left := self.left()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert left == [], [Path(f"/proc/{p}/cmdline").read_bytes()[:80] for p in left]

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for pid in self.left():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture
def cli() -> Iterator[Cli]:
    helper = Cli()
    try:
        yield helper
    finally:
        helper.close()


def _answers(db: Path, ids: list[str]) -> dict[str, Any]:
    """The answer stored at each thread's last checkpoint (``None``: not finished)."""
    saver = TrajectorySaver(db)
    try:
        answers = {}
        for task_id in ids:
            tup = saver.get_tuple({"configurable": {"thread_id": task_id, "checkpoint_ns": ""}})
            values = tup.checkpoint["channel_values"] if tup is not None else {}
            answers[task_id] = values.get("answer")
        return answers
    finally:
        saver.close()


def test_ctrl_c_stops_a_ray_batch_cleanly_and_the_same_command_finishes_it(
    tmp_path: Path, cli: Cli
) -> None:
    ids = [f"ctrl-c-{i}" for i in range(12)]
    batch = tmp_path / "inputs.jsonl"
    batch.write_text("".join(json.dumps({"input": f"question {i}", "id": i}) + "\n" for i in ids))
    db = tmp_path / "runs.db"
    args = ["run", "tests/scale/workflows/answer.yaml", "--batch", str(batch), "--engine", "ray"]
    args += ["--concurrency", "2", "--progress", "--db", str(db)]  # 2 workers: the default
    gate = threading.Event()
    with FakeOpenAI() as server:
        # 6 calls are answered; the rest wait at the gate until Ctrl-C has been handled, so the
        # batch is stopped mid-way however slow the machine is
        server.add(*[text("forty-two") for _ in range(6)])
        server.default = text("forty-two", gate=gate)
        env = cli.env(LLM_BASE_URL=server.url, LLM_MODEL_NAME="fake-model")
        first = cli.start(args, env)
        deadline = time.monotonic() + 180
        while len(server.requests) < 7 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # a 7th call waits: 4 runs at most in flight, so 3 have ended
        assert first.poll() is None, first.communicate()
        os.killpg(first.pid, signal.SIGINT)  # Ctrl-C in a terminal
        try:
            out, err = first.communicate(timeout=120)
        finally:
            gate.set()
        assert first.returncode == 130, out + err
        assert "Traceback" not in out + err, err
        assert re.search(r"runs .* ([0-9]+)/12", err), err  # the bar, where it stopped
        match = re.search(r"To continue, run\n  (.+)\n", err)
        assert match, err
        again = shlex.split(match.group(1))
        assert again[0] == "aworld-graph"
        assert sorted(again[1:]) == sorted(args), again  # the same words, the options in order
        cli.assert_nothing_left()

        answered = {k for k, v in _answers(db, ids).items() if v == "forty-two"}
        assert 0 < len(answered) < len(ids), answered
        code, out, err = cli.run(again[1:], env)
        assert code == 0, out + err
        assert "Traceback" not in out + err, err
        assert "12 tasks: 12 ok, 0 failed" in out
        assert re.search(r"runs .* 12/12", err), err
        # Ray's warnings about finding the machine's address (there is no route to look for it
        # along here) and about its default token authentication are not the user's concern
        assert "Failed to determine local IP" not in err and "Token authentication" not in err, err
        cli.assert_nothing_left()
    assert all(line.split("\t")[2] == "forty-two" for line in out.splitlines()[:12])
    calls = Counter(r["body"]["messages"][-1]["content"] for r in server.requests)
    assert set(calls) == {f"question {i}" for i in ids}
    for task_id in answered:  # a task finished before Ctrl-C made no model call again
        assert calls[f"question {task_id}"] == 1, (task_id, calls)


def test_cli_optimize_on_ray_evaluates_on_the_workers_as_it_does_locally(
    tmp_path: Path, cli: Cli
) -> None:
    tasks = save_tasks(syn.synthetic_tasks(train=8, dev=4, test=4), tmp_path / "tasks.jsonl")
    summaries: dict[str, dict[str, Any]] = {}
    calls: dict[str, list[tuple[str, int | None]]] = {}
    drivers: dict[str, int] = {}
    with SyntheticEndpoint() as server:
        env = cli.env(LLM_BASE_URL=server.url, LLM_MODEL_NAME="synthetic-student")
        for engine in ("local", "ray"):
            workflow = syn.write_seed(tmp_path / engine)
            args = ["optimize", str(workflow), "--tasks", str(tasks), "--budget", "iterations=1"]
            args += ["--operators", "rewrite_prompt", "--optimizer-model", TEACHER, "--json"]
            args += [
                "--out",
                str(tmp_path / engine / "out"),
                "--db",
                str(tmp_path / engine / "r.db"),
            ]
            args += ["--concurrency", "4", "--engine", engine, "--workers", "2"]
            before = len(server.calls)
            process = cli.start(args, env)
            out, err = process.communicate(timeout=400)
            assert process.returncode == 0, out + err
            assert "Traceback" not in out + err, err
            summaries[engine] = json.loads(out)
            calls[engine] = server.calls[before:]
            drivers[engine] = process.pid
            cli.assert_nothing_left()
    for summary in summaries.values():
        summary["spent"].pop("seconds")
        summary.pop("outputs")
    assert summaries["ray"] == summaries["local"]
    assert summaries["ray"]["spent"]["iterations"] == 1

    def senders(engine: str, model: str) -> Counter[int | None]:
        return Counter(pid for name, pid in calls[engine] if name == model)

    # locally, the CLI process makes every call (which shows the senders are found)
    assert set(senders("local", "synthetic-student")) == {drivers["local"]}
    assert set(senders("local", TEACHER)) == {drivers["local"]}
    # on Ray, the evaluations' calls come from the two workers, the optimizer's from the CLI
    students = senders("ray", "synthetic-student")
    assert drivers["ray"] not in students and None not in students
    assert len(students) == 2, students
    assert set(senders("ray", TEACHER)) == {drivers["ray"]}
    assert sum(students.values()) == sum(senders("local", "synthetic-student").values())
