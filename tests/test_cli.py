"""The CLI: run, resume, fork – errors are one line, never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from aworld_graph import load_workflow
from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.cli import main
from aworld_graph.testing import FunctionModel, tool_call
from aworld_graph.trajectory import load_run

ROOT = Path(__file__).resolve().parents[1]


def _solve(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """The math workflow's solver: the calculator first, then its result as the answer."""
    results = [m["content"] for m in messages if m["role"] == "tool"]
    return f"17*23 = {results[-1]}" if results else tool_call("calculator", {"expression": "17*23"})


math_swarm = load_workflow(ROOT / "workflows" / "math.yaml", models={"solver": FunctionModel(_solve)})
"""workflows/math.yaml (solver, then the answer_checker critic) with a scripted solver."""


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_run_prints_answer_trajectory_and_storage(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    code, out = _run("run", "tests.procs.killable:swarm", "--input", "go", "--task-id", "c1", "--db", db)
    assert code == 0, out
    assert "answer: report: logged 3 steps" in out
    assert "step   1 worker: log_step" in out
    assert f"stored: {db} (thread c1" in out


def test_fork_then_resume_runs_on_from_the_fork(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("STEP_LOG", str(tmp_path / "steps.log"))
    db = str(tmp_path / "cli.db")
    code, out = _run("run", "tests.procs.killable:swarm", "--input", "go", "--task-id", "f1", "--db", db, "--json")
    assert code == 0, out
    data = json.loads(out)
    first_tool_checkpoint = data["trajectory"][0]["meta"]["checkpoint_id"]
    code, out = _run("fork", first_tool_checkpoint, "--set", "context.note=forked", "--new-thread", "f2", "--db", db)
    assert code == 0, out
    assert "into thread f2" in out
    code, out = _run("resume", "f2", "--db", db, "--json")
    assert code == 0, out
    resumed = json.loads(out)
    assert resumed["answer"] == "report: logged 3 steps"
    code, out = _run("resume", "f2", "--db", db, "--json")  # a finished run resumes to itself
    assert code == 0, out
    assert json.loads(out)["checkpoint_id"] == resumed["checkpoint_id"]
    assert (tmp_path / "steps.log").read_text().split() == ["1", "2", "3", "2", "3"]


def test_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    for args, message in [
        (("run", "no_such_module:thing", "--input", "x", "--db", db), "cannot import module 'no_such_module'"),
        (("run", "aworld_graph.examples:nothing", "--input", "x", "--db", db), "has no attribute 'nothing'"),
        (("run", "not-a-target", "--input", "x", "--db", db), "is not MODULE:ATTRIBUTE"),
        (("resume", "missing-thread", "--db", db), "no run with thread id 'missing-thread'"),
        (("fork", "missing-checkpoint", "--db", db), "no checkpoint 'missing-checkpoint'"),
        (("fork", "x", "--set", "novalue", "--db", db), "no checkpoint"),
    ]:
        code, out = _run(*args)
        assert code != 0
        assert message in out, out
        assert "Traceback" not in out
        assert len([line for line in out.splitlines() if line.strip()]) <= 2, out


def test_help_of_every_command() -> None:
    code, out = _run("--help")
    assert code == 0
    commands = re.findall(r"^  ([a-z-]+)\s", out.split("Commands:")[1], re.M)
    assert {"run", "resume", "fork", "model"} <= set(commands)
    for command in commands:
        code, text = _run(command, "--help")
        assert code == 0 and "Usage:" in text


def test_a_forks_edited_answer_is_what_the_critic_judges(tmp_path: Path) -> None:
    """``fork … --set answer=…`` before the critic: the critic judges the edit (which does not
    state the calculator's 391, so the solver is sent back), not the answer it replaced."""
    db = str(tmp_path / "cli.db")
    target = "tests.test_cli:math_swarm"
    code, out = _run("run", target, "--input", "What is 17*23?", "--task-id", "m1", "--db", db, "--json")
    assert code == 0, out
    run = json.loads(out)
    assert run["answer"] == "17*23 = 391"
    solved = [i for i in run["trajectory"] if i["meta"]["agent_id"] == "solver"][-1]
    code, out = _run(
        "fork", solved["meta"]["checkpoint_id"], "--set", "answer=It is 400.",
        "--new-thread", "m2", "--db", db,
    )  # fmt: skip
    assert code == 0, out
    code, out = _run("resume", "m2", "--db", db, "--json")
    assert code == 0, out
    with TrajectorySaver(db) as saver:
        forked = load_run(saver, "m2")
    assert forked is not None
    verdicts = [(r["status"], r["feedback"]) for r in forked.rewards if r.get("source") == "answer_checker"]
    # the thread was copied up to the fork point, before the original run's first verdict
    assert verdicts[0][0] == "retry" and "391" not in verdicts[0][1]
    assert verdicts[1] == ("pass", "The answer states the tool's result 391.")
    assert forked.answer is not None and forked.answer.startswith("17*23 = 391")
