"""A run killed with SIGKILL mid-run resumes in a new process to the same final state,
with every completed tool call executed exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from aworld_graph.cli import main; main()"]

pytestmark = pytest.mark.slow


def _env(tmp_path: Path, name: str, db: str | None = None, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "STEP_LOG": str(tmp_path / f"{name}.log"),
        "AWORLD_GRAPH_DB": db or str(tmp_path / f"{name}.db"),
        **extra,
    }
    env.pop("KILL_AT", None)
    env.update(extra)
    return env


def _final(out: str) -> dict:
    data = json.loads(out)
    return {
        "answer": data["answer"],
        "status": data["status"],
        "steps": [
            (
                i["meta"]["agent_id"],
                i["action"]["content"],
                [o["content"] for o in i["reward"]["tool_outputs"]],
            )
            for i in data["trajectory"]
        ],
    }


def _cli(args: list[str], env: dict[str, str]) -> dict:
    """Run the CLI to the end; its ``--json`` response, reduced by :func:`_final`."""
    done = subprocess.run(
        [*CLI, *args, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return _final(done.stdout)


def _kill_when(args: list[str], env: dict[str, str], ready: Callable[[], bool], why: str) -> None:
    """Start the CLI and SIGKILL it as soon as ``ready()`` holds."""
    proc = subprocess.Popen(
        [*CLI, *args, "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, why
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_sigkill_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    db = None
    if backend == "postgres":  # the same run, its store a real PostgreSQL database
        db = str(request.getfixturevalue("postgres_server").create_database("crash_resume"))
    run = ["run", "tests.procs.killable:swarm", "--input", "go", "--task-id", "t1"]
    expected = _cli(run, _env(tmp_path, "clean"))
    assert expected["answer"] == "report: logged 3 steps"

    marker = tmp_path / "marker"
    env = _env(tmp_path, "crash", db, KILL_AT="3", KILL_MARKER=str(marker))
    _kill_when(run, env, marker.exists, "the model never reached its third reply")
    assert (tmp_path / "crash.log").read_text().split() == ["1", "2"]

    env.pop("KILL_AT")
    assert _cli(["resume", "t1"], env) == expected
    assert (tmp_path / "crash.log").read_text().split() == ["1", "2", "3"]


def _saved_anywhere(db: Path, text: str) -> bool:
    """Whether some saved task write (of any thread, sub-runs included) holds ``text``."""
    from aworld_graph.checkpoint import TrajectorySaver

    saver = TrajectorySaver(str(db))
    try:
        return any(text in repr(w[2]) for tup in saver.list(None) for w in tup.pending_writes or [])
    finally:
        saver.close()


@pytest.mark.parametrize("target", ["pair", "handoff", "team", "nested"])
def test_a_finished_tool_call_is_not_run_again_when_its_sibling_was_killed(
    tmp_path: Path, target: str
) -> None:
    """One LLM turn asks for two tool calls; the process dies inside the second after the
    first finished. On resume only the second runs; the result equals an uninterrupted run."""
    run = ["run", f"tests.procs.killable:{target}", "--input", "go", "--task-id", "t2"]
    expected = _cli(run, _env(tmp_path, "clean"))
    assert "call 1 recorded, call 2 recorded" in str(expected["answer"])
    assert sorted((tmp_path / "clean.log").read_text().split()) == ["1", "2"]

    marker = tmp_path / "marker"
    env = _env(tmp_path, "crash", HANG_AT="2", KILL_MARKER=str(marker))
    _kill_when(
        run,
        env,
        lambda: marker.exists() and _saved_anywhere(tmp_path / "crash.db", "call 1 recorded"),
        "call 1 finished, but its result was not saved while call 2 ran",
    )
    assert (tmp_path / "crash.log").read_text().split() == ["1"]

    env.pop("HANG_AT")
    assert _cli(["resume", "t2"], env) == expected
    assert (tmp_path / "crash.log").read_text().split() == ["1", "2"]


def test_a_run_killed_in_its_first_model_call_can_be_found_and_resumed(tmp_path: Path) -> None:
    """The run's input checkpoint is stored before its first node starts: a run SIGKILLed
    inside its very first model call is in the store under its task id, and resumes."""
    from aworld_graph.checkpoint import TrajectorySaver

    run = ["run", "tests.procs.killable:swarm", "--input", "go", "--task-id", "t0"]
    expected = _cli(run, _env(tmp_path, "clean"))
    marker = tmp_path / "marker"
    env = _env(tmp_path, "crash", KILL_AT="1", KILL_MARKER=str(marker))
    _kill_when(run, env, marker.exists, "the model was never called")
    assert not (tmp_path / "crash.log").exists()  # no tool ran
    with TrajectorySaver(tmp_path / "crash.db") as saver:
        stored = saver.get_tuple({"configurable": {"thread_id": "t0"}})
        assert stored is not None and stored.checkpoint["channel_values"]["input"] == "go"
    env.pop("KILL_AT")
    assert _cli(["resume", "t0"], env) == expected
