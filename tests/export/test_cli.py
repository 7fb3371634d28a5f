"""``aworld-graph export``: formats, filters, the progress bar and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import aworld_graph.cli.export  # noqa: F401  (registers the command)
from aworld_graph.cli import main
from aworld_graph.export import validate_openai_file, writer


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["export", *args])
    return result.exit_code, result.output


def test_export_openai_with_filters(runs_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "sft.jsonl"
    code, output = invoke(
        "--format",
        "openai",
        "--out",
        str(out),
        "--db",
        str(runs_db),
        "--success-only",
        "--agent",
        "solver",
    )
    assert code == 0, output
    assert output.strip() == f"wrote 2 openai rows from 3 runs to {out} (1 duplicates dropped)"
    assert list(validate_openai_file(out)) == []


def test_export_one_thread_per_turn(runs_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "turns.jsonl"
    code, _ = invoke(
        "-f",
        "trl-sft",
        "-o",
        str(out),
        "--db",
        str(runs_db),
        "--thread",
        "handoff",
        "--per",
        "turn",
    )
    assert code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["messages"][0]["content"] for r in rows] == ["You route requests.", "You write."]


@pytest.mark.parametrize(
    ("fmt", "suffix", "options"),
    [
        ("aworld", ".jsonl", ["--workflow-version", "v1"]),
        ("sharegpt", ".jsonl", ["--since", "2000-01-01"]),
        ("trl-dpo", ".jsonl", []),
        ("trl-reward", ".jsonl", ["--min-reward", "0"]),
        ("verl", ".parquet", ["--until", "2999-01-01T00:00", "--no-dedup"]),
    ],
)
def test_every_format_from_the_command_line(
    runs_db: Path, tmp_path: Path, fmt: str, suffix: str, options: list[str]
) -> None:
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"out{suffix}"
    code, output = invoke("-f", fmt, "-o", str(out), "--db", str(runs_db), *options)
    assert code == 0, output
    assert out.stat().st_size > 0 and output.startswith("wrote ")


def test_progress_bar_on_large_exports(
    runs_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = str(tmp_path / "o.jsonl")
    _, quiet = invoke("-f", "openai", "-o", out, "--db", str(runs_db))
    assert "export openai" not in quiet
    monkeypatch.setattr(writer, "PROGRESS_MIN_RUNS", 5)
    _, shown = invoke("-f", "openai", "-o", out, "--db", str(runs_db))
    assert "export openai" in shown and "10/10" in shown
    _, forced_off = invoke("-f", "openai", "-o", out, "--db", str(runs_db), "--no-progress")
    assert "export openai" not in forced_off


def test_errors_are_one_line(tmp_path: Path) -> None:
    code, output = invoke(
        "-f", "openai", "-o", str(tmp_path / "o.jsonl"), "--db", str(tmp_path / "none.db")
    )
    assert (
        code == 1
        and output.startswith("Error: no checkpoint database at")
        and "Traceback" not in output
    )
    code, output = invoke("-f", "csv", "-o", "x")
    assert code == 2 and "Invalid value for '--format'" in output


def test_default_database_comes_from_the_environment(
    runs_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWORLD_GRAPH_DB", str(runs_db))
    code, output = invoke("-f", "openai", "-o", str(tmp_path / "o.jsonl"), "--thread", "tools")
    assert code == 0 and "from 1 runs" in output


def test_help_documents_every_option() -> None:
    result = CliRunner().invoke(main, ["export", "--help"])
    for option in (
        "--format",
        "--out",
        "--db",
        "--thread",
        "--finished",
        "--success-only",
        "--min-reward",
        "--agent",
        "--workflow-version",
        "--since",
        "--until",
        "--per",
        "--no-dedup",
        "--keep-unlabeled",
        "--progress",
    ):
        assert option in result.output
    flat = " ".join(result.output.split())
    assert "not scored 'fail' by a reward function (a run scored 0 is left out" in flat


def test_finished_and_success_only_from_the_command_line(runs_db: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "r.jsonl")
    common = ("-f", "trl-reward", "-o", out, "--db", str(runs_db), "--no-dedup")
    code, output = invoke(*common, "--finished", "--agent", "solver")
    assert code == 0 and "wrote 4 trl-reward rows from 5 runs" in output, output
    code, output = invoke(*common, "--success-only", "--agent", "solver")
    assert code == 0 and "wrote 2 trl-reward rows from 3 runs" in output, output
    code, output = invoke("-f", "verl", "-o", out, "--db", str(runs_db), "--keep-unlabeled")
    assert code == 0 and "wrote 7 verl rows" in output, output


def test_docs_cover_every_format_and_option() -> None:
    from aworld_graph.cli.export import export_command
    from aworld_graph.export import FORMATS

    text = (Path(__file__).parents[2] / "docs" / "training.md").read_text()
    for fmt in FORMATS:
        assert f"`{fmt}`" in text, fmt
    for param in export_command.params:
        for option in param.opts:
            if option.startswith("--"):
                assert option in text, option
