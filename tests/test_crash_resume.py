"""A run killed with SIGKILL mid-run resumes in a new process to the same final state,
with every completed tool call executed exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from aworld_graph.cli import main; main()"]

pytestmark = pytest.mark.slow


def _env(tmp_path: Path, name: str, **extra: str) -> dict[str, str]:
    env = {**os.environ, "STEP_LOG": str(tmp_path / f"{name}.log"), "AWORLD_GRAPH_DB": str(tmp_path / f"{name}.db"), **extra}
    env.pop("KILL_AT", None)
    env.update(extra)
    return env


def _final(out: str) -> dict:
    data = json.loads(out)
    return {"answer": data["answer"], "status": data["status"], "steps": [
        (i["meta"]["agent_id"], i["action"]["content"], [o["content"] for o in i["reward"]["tool_outputs"]]) for i in data["trajectory"]
    ]}


def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    target = "tests.procs.killable:swarm"
    clean = subprocess.run([*CLI, "run", target, "--input", "go", "--task-id", "t1", "--json"],
                           cwd=ROOT, env=_env(tmp_path, "clean"), capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0, clean.stderr
    expected = _final(clean.stdout)
    assert expected["answer"] == "report: logged 3 steps"

    marker = tmp_path / "marker"
    env = _env(tmp_path, "crash", KILL_AT="3", KILL_MARKER=str(marker))
    proc = subprocess.Popen([*CLI, "run", target, "--input", "go", "--task-id", "t1", "--json"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert (tmp_path / "crash.log").read_text().split() == ["1", "2"]

    env.pop("KILL_AT")
    resumed = subprocess.run([*CLI, "resume", "t1", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert _final(resumed.stdout) == expected
    assert (tmp_path / "crash.log").read_text().split() == ["1", "2", "3"]
