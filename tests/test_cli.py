"""The CLI: run, resume, fork – errors are one line, never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from aworld_graph.cli import main


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
