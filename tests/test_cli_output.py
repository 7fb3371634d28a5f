"""What the CLI prints (issue 34): the status of each run in ``threads``, a reader that closes
stdout early (``aworld-graph threads | head``), and the line of a run that waits for input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aworld_graph import Agent, Human, Runners, Swarm
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.cli import main
from aworld_graph.testing import FunctionModel

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from aworld_graph.cli import main; main()"]
DRAFT = "1. Book a venue by the lake. 2. Plan two workshops. 3. Close with a dinner. " * 5


def _fails(messages: Any, tools: Any) -> str:
    raise RuntimeError("model down")


approval = Swarm(
    Agent(name="drafter", model=FunctionModel(lambda messages, tools: DRAFT)),
    Human(name="approval", prompt="Approve the plan? Reply 'approve' or a correction."),
    name="approval",
)
"""A module attribute, so ``aworld-graph run tests.test_cli_output:approval`` finds it."""


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store holding a finished, a failed and an interrupted run."""
    db = tmp_path / "runs.db"
    with TrajectorySaver(db) as saver:
        ok = Agent(name="ok", model=FunctionModel(lambda messages, tools: "fine"))
        Runners.sync_run("x", agent=ok, task_id="finished-run", checkpointer=saver)
        broken = Agent(name="broken", model=FunctionModel(_fails))
        Runners.sync_run("x", agent=broken, task_id="failed-run", checkpointer=saver)
        Runners.sync_run("x", swarm=approval, task_id="waiting-run", checkpointer=saver)
    return db


def test_threads_shows_each_runs_status(store: Path) -> None:
    code, out = _cli("threads", "--db", str(store))
    assert code == 0, out
    header, *rows = out.splitlines()
    assert header.split() == ["THREAD", "CHECKPOINTS", "STEP", "STATUS", "LAST", "ACTIVITY"]
    at = header.index("STATUS")
    statuses = {row.split()[0]: row[at:].split()[0] for row in rows}
    assert statuses == {
        "finished-run": "finished",
        "failed-run": "error",
        "waiting-run": "interrupted",
    }


@pytest.mark.parametrize(
    "args",
    [
        ["threads"],
        ["history", "finished-run"],
        ["run", "tests.test_cli_output:approval", "--input", "plan", "--task-id", "piped"],
    ],
    ids=["threads", "history", "run"],
)
def test_a_closed_stdout_ends_the_command_quietly(store: Path, args: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first line, as after `| head -0`
    try:
        done = subprocess.run(
            [*CLI, *args, "--db", str(store)],
            cwd=ROOT,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.stderr == ""
    assert done.returncode == 141  # 128 + SIGPIPE, as a shell reports `yes | head`


def test_an_interrupted_run_says_what_is_asked_and_how_to_answer(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    code, out = _cli(
        "run", "tests.test_cli_output:approval", "--input", "plan", "--task-id", "ask1", "--db", db
    )
    assert code == 0, out
    (line,) = [line for line in out.splitlines() if line.startswith("task ask1:")]
    assert line == (
        "task ask1: interrupted (approval asks: Approve the plan? Reply 'approve' or a "
        "correction. (answer with Runners.resume('ask1', value=...) or "
        "`aworld-graph resume ask1 --value TEXT`))"
    )
    assert out.count(DRAFT.strip()) == 1  # the answer line only, not again in the question
    assert "{'node'" not in out
    code, out = _cli("resume", "ask1", "--value", "approve", "--db", db)
    assert code == 0, out
    assert "task ask1: finished" in out
