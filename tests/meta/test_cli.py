"""``aworld-graph optimize``: progress as it goes, outputs under --out, errors as one line.

The agents and the optimizer agent talk to a real OpenAI-compatible HTTP server on 127.0.0.1
(``tests/fake_openai.py``) that always answers "The answer is 42."."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import aworld_graph.cli.optimize  # noqa: F401  (registers the command)
from aworld_graph.cli import main
from aworld_graph.meta import TaskItem, save_tasks
from tests.fake_openai import FakeOpenAI, text


def _project(tmp_path: Path) -> tuple[Path, Path]:
    workflow = tmp_path / "proj" / "workflows" / "answer.yaml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(
        yaml.safe_dump(
            {
                "name": "answer",
                "nodes": [
                    {"kind": "agent", "name": "answerer", "system_prompt": "Answer briefly."}
                ],
            }
        )
    )
    items = [
        TaskItem(id=f"t{i}", input=f"question {i}", expected=42 if i % 2 == 0 else i, split=split)
        for i, split in enumerate(["train"] * 4 + ["dev"] * 2 + ["test"] * 2)
    ]
    tasks = save_tasks(items, tmp_path / "tasks.jsonl", reward="numeric")
    return workflow, tasks


def test_optimize_shows_progress_and_writes_outputs(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_openai.default = text("The answer is 42.")
    monkeypatch.setenv("LLM_BASE_URL", fake_openai.url)
    monkeypatch.setenv("LLM_MODEL_NAME", "fake-model")
    workflow, tasks = _project(tmp_path)
    out = tmp_path / "out"
    args = [
        "optimize",
        str(workflow),
        "--tasks",
        str(tasks),
        "--budget",
        "iterations=3",
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = result.output
    assert (
        "starting run answer-" in lines
        and "4 train / 2 dev / 2 test tasks, budget iterations=3" in lines
    )
    assert "eval c000 on train: 0.500" in lines
    assert "iter 1 rewrite_prompt on c000 -> c001" in lines  # an LLM_* endpoint: it joins
    assert "iter 2 instructions on c000 -> c002" in lines
    assert "iter 3 demos on c000 -> c003" in lines
    assert "stopped: budget: 3 iterations done" in lines
    assert "wrote " in lines and str(out / "reports") in lines
    reports = sorted(p.name for p in (out / "reports").iterdir())
    assert len(reports) == 3 and reports[0].startswith("answer-") and reports[0].endswith(".json")
    assert not (out / "workflows").exists() or not any(
        (out / "workflows").iterdir()
    )  # the seed won
    assert not (workflow.parent.parent / "reports").exists()  # --out, not alongside
    bodies = [r["body"] for r in fake_openai.requests]
    assert all(b["model"] == "fake-model" for b in bodies)
    assert any(
        "Failed run 1" in b["messages"][-1]["content"] for b in bodies
    )  # the optimizer agent

    again = CliRunner().invoke(main, [*args, "--json"])  # the same command: resumes, done already
    assert again.exit_code == 0, again.output
    summary = json.loads(again.output)
    assert summary["spent"]["iterations"] == 3 and summary["best"] == "c000"
    assert [Path(p).suffix for p in summary["outputs"]] == [".md", ".svg", ".json"]


def test_optimize_errors_are_one_line(tmp_path: Path) -> None:
    workflow, tasks = _project(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": 1}\n')
    for extra, words in [
        (["--tasks", str(bad)], "a task needs a string 'input'"),
        (["--tasks", str(tasks), "--budget", "money=3"], "unknown limit 'money'"),
        (["--tasks", str(tasks), "--operators", "magic"], "unknown operator(s) magic"),
    ]:
        result = CliRunner().invoke(main, ["optimize", str(workflow), *extra])
        assert result.exit_code == 1 and words in result.output and "Traceback" not in result.output


def test_optimize_has_help() -> None:
    result = CliRunner().invoke(main, ["optimize", "--help"])
    assert result.exit_code == 0
    for option in (
        "--tasks",
        "--budget",
        "--out",
        "--db",
        "--operators",
        "--selection",
        "--search",
        "--subset",
        "--retry-errors",
    ):
        assert option in result.output


def test_random_search_on_a_subset(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_openai.default = text("The answer is 42.")
    monkeypatch.setenv("LLM_BASE_URL", fake_openai.url)
    monkeypatch.setenv("LLM_MODEL_NAME", "fake-model")
    workflow, tasks = _project(tmp_path)
    args = ["optimize", str(workflow), "--tasks", str(tasks), "--budget", "iterations=2"]
    args += ["--out", str(tmp_path / "out"), "--operators", "instructions,topology", "--json"]
    result = CliRunner().invoke(main, [*args, "--search", "random", "--subset", "train=2,dev=1"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["spent"]["iterations"] == 2
    report = json.loads(Path(summary["outputs"][-1]).read_text())
    assert report["rollout_curve"][0] == {
        "rollouts": 2,  # the subset: 2 training tasks
        "candidate": "c000",
        "split": "train",
        "best_dev": None,
        "best_train": 0.5,
    }
    bad = CliRunner().invoke(main, [*args, "--subset", "train=many"])
    assert bad.exit_code == 2 and "write split=N" in bad.output
