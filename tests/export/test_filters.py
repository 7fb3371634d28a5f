"""Selecting runs: one thread, success only, minimum reward, agent, workflow version, time range,
sub-runs; deduplication; and no secret in any export."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from aworld_graph import ConfigError
from aworld_graph.checkpoint import open_store
from aworld_graph.export import FORMATS, Run, RunFilter, export, iter_runs, list_threads
from tests.export.conftest import SECRET

ALL = {"tools", "handoff", "critic", "team", "failed", "secret", "q.r0", "q.r1", "q.r2", "q.r3"}


def threads(runs_db: Path, **kwargs: object) -> set[str]:
    return {r.thread_id for r in iter_runs(runs_db, RunFilter(**kwargs))}  # type: ignore[arg-type]


def test_everything_leaves_out_delegated_member_runs_unless_asked(runs_db: Path) -> None:
    assert threads(runs_db) == ALL
    assert threads(runs_db, include_subruns=True) == ALL | {"team.researcher.d1"}
    assert threads(runs_db, threads=["team.researcher.d1"]) == {"team.researcher.d1"}


def test_status_and_success(runs: dict[str, Run]) -> None:
    assert runs["failed"].status == "max_steps" and not runs["failed"].success
    assert runs["tools"].status == "finished" and runs["tools"].success
    failed_scores = [runs[t].success for t in ("q.r0", "q.r1", "q.r2", "q.r3")]
    assert sorted(failed_scores) == [False, False, True, True]  # scored "fail" is no success


def test_success_only_and_min_reward(runs_db: Path, runs: dict[str, Run]) -> None:
    wrong = {t for t in ("q.r0", "q.r1", "q.r2", "q.r3") if runs[t].reward == 0.0}
    assert len(wrong) == 2
    assert threads(runs_db, success_only=True) == ALL - {"failed"} - wrong
    scored = threads(runs_db, min_reward=1.0)
    assert "critic" in scored and len([t for t in scored if t.startswith("q.")]) == 2
    assert threads(runs_db, min_reward=0.0) == {"critic", "q.r0", "q.r1", "q.r2", "q.r3"}


def test_finished_keeps_runs_scored_zero_and_success_only_does_not(
    runs_db: Path, runs: dict[str, Run]
) -> None:
    wrong = {t for t in ("q.r0", "q.r1", "q.r2", "q.r3") if runs[t].reward == 0.0}
    assert all(runs[t].finished and not runs[t].success for t in wrong)
    assert threads(runs_db, finished=True) == ALL - {"failed"}
    assert threads(runs_db, finished=True, min_reward=0.5) == {"critic"} | (
        {"q.r0", "q.r1", "q.r2", "q.r3"} - wrong
    )


def test_agent_and_workflow_version(runs_db: Path) -> None:
    assert threads(runs_db, agent="writer") == {"handoff"}
    assert threads(runs_db, agent="solver") == {"tools", "q.r0", "q.r1", "q.r2", "q.r3"}
    assert threads(runs_db, workflow_version="v1") == {"failed"}
    assert threads(runs_db, workflow_version="v2") == {"secret"}
    assert threads(runs_db, workflow_version="3") == {"critic"}  # from the graph's info


def test_time_range(runs_db: Path) -> None:
    now = datetime.now(UTC)
    assert threads(runs_db, since=now - timedelta(hours=1)) == ALL
    assert threads(runs_db, since=now + timedelta(hours=1)) == set()
    assert threads(runs_db, until=(now - timedelta(days=1)).isoformat()) == set()
    with open_store(runs_db, create=False) as saver:
        infos = list_threads(saver)
    middle = sorted(i.started_at for i in infos)[len(infos) // 2]
    later = threads(runs_db, since=middle)
    assert later and later < ALL
    assert threads(runs_db, until=middle) | later == ALL
    with pytest.raises(ConfigError, match="not ISO-8601"):
        threads(runs_db, since="yesterday")


def test_dedup_drops_identical_samples(runs_db: Path, tmp_path: Path) -> None:
    kept = export(
        "openai",
        tmp_path / "a.jsonl",
        db=runs_db,
        filter=RunFilter(threads=["q.r0", "q.r1", "q.r2", "q.r3"]),
    )
    assert (kept.rows, kept.duplicates) == (2, 2)
    everything = export(
        "openai",
        tmp_path / "b.jsonl",
        db=runs_db,
        filter=RunFilter(threads=["q.r0", "q.r1", "q.r2", "q.r3"]),
        dedup=False,
    )
    assert (everything.rows, everything.duplicates) == (4, 0)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("per", ["episode", "turn"])
def test_secrets_are_never_exported(runs_db: Path, tmp_path: Path, fmt: str, per: str) -> None:
    suffix = ".parquet" if fmt == "verl" else ".jsonl"
    out = tmp_path / f"out{suffix}"
    report = export(fmt, out, db=runs_db, per=per, filter=RunFilter(include_subruns=True))
    data = out.read_bytes()
    assert SECRET.encode() not in data and b"SECRETKEY" not in data
    assert report.rows > 0 or fmt == "trl-dpo"


def test_the_secret_run_is_still_exported_redacted(runs_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.jsonl"
    export("openai", out, db=runs_db, filter=RunFilter(threads=["secret"]))
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    messages = row["messages"]
    assert (
        messages[1]["content"] == "Log in with [redacted]"
    )  # the input held a key; only the key is removed
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == {"user": "ada"}
    assert (
        "[redacted]" in messages[3]["content"] and SECRET not in messages[3]["content"]
    )  # the tool echoed it
    assert messages[-1]["content"] == "Logged in."


def test_run_metadata_has_no_secret(runs: dict[str, Run]) -> None:
    assert "api_key" not in runs["secret"].metadata
    assert SECRET not in json.dumps(runs["secret"].metadata)


def test_a_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no checkpoint database at .*missing.db; run something"):
        export("openai", tmp_path / "x.jsonl", db=tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    with pytest.raises(ConfigError, match="unknown export format 'csv'"):
        export("csv", tmp_path / "x.jsonl", db=tmp_path / "missing.db")


@pytest.mark.parametrize(
    "row",
    [
        {
            "messages": [{"role": "user", "content": "hi"}],
            "usage": {"prompt_tokens": 3, "total_tokens": 4},
        },
        {"a": {"b": [{"api_key": "x", "keep": 1}]}},
        {"Authorization": "x", "max_tokens": 5, "access_token": "y"},
        {"server": {"command": "npx", "env": {"X": "1"}}, "env": "not an mcp entry"},
        {"text": "  Bearer abc.def"},
        {"text": "line\nsk-ABCDEFGHIJKLMNOP"},
        {"text": "the basic idea"},
        {'we"ird_api_key': "x"},
        {"tools": '{"api_key": "sk-abcdefghijklmnop"}'},
    ],
)
def test_the_fast_secret_check_agrees_with_strip_secrets(row: dict[str, object]) -> None:
    from aworld_graph.checkpoint import strip_secrets
    from aworld_graph.export.writer import scrubbed

    clean, text = scrubbed(row)
    assert clean == strip_secrets(row)
    assert json.loads(text) == clean
