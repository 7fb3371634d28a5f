"""The optimizer's tables live in the checkpoint store and go through its saver: an optimization
runs on PostgreSQL as on SQLite, and a SQLite file an earlier version wrote opens as it is.

The agents and the optimizer agent talk to a real OpenAI-compatible HTTP server on 127.0.0.1
(``tests/fake_openai.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_utils
from click.testing import CliRunner

import aworld_graph.cli.optimize  # noqa: F401  (registers the command)
from aworld_graph.checkpoint import TrajectorySaver, open_store
from aworld_graph.cli import main
from aworld_graph.meta import Candidate
from aworld_graph.meta.store import MetaStore
from tests.fake_openai import FakeOpenAI, text
from tests.meta.test_cli import _project


def test_optimize_runs_on_postgresql(
    tmp_path: Path, pg_url: str, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_openai.default = text("The answer is 42.")
    monkeypatch.setenv("LLM_BASE_URL", fake_openai.url)
    monkeypatch.setenv("LLM_MODEL_NAME", "fake-model")
    workflow, tasks = _project(tmp_path)
    args = ["optimize", str(workflow), "--tasks", str(tasks), "--budget", "iterations=2"]
    args += ["--operators", "instructions,demos", "--out", str(tmp_path / "out"), "--json"]
    result = CliRunner().invoke(main, [*args, "--db", pg_url])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["spent"]["iterations"] == 2 and summary["seed_scores"]["train"] == 0.5
    assert not (tmp_path / "checkpoints").exists()  # nothing went to a SQLite file

    with open_store(pg_url, create=False) as saver:
        store = MetaStore(saver)
        assert store.runs() == [summary["run_id"]]
        run = store.run(summary["run_id"])
        assert run is not None and run["status"] == "done" and run["best"] == summary["best"]
        assert run["settings"]["operators"] == ["instructions", "demos"]
        cands = store.candidates(summary["run_id"])
        assert [c.id for c in cands] == ["c000", "c001", "c002"]
        assert cands[0].status == "seed" and cands[0].score("train") == 0.5
        assert [(s.iteration, s.operator) for s in store.steps(summary["run_id"])] == [
            (1, "instructions"),
            (2, "demos"),
        ]
        # the evaluations' runs are in the same store, tagged with the optimization
        threads = [t.thread_id for t in saver.threads()]
        assert any(t.startswith(f"meta-{summary['run_id']}") for t in threads)

    calls = len(fake_openai.requests)
    again = CliRunner().invoke(main, [*args, "--db", pg_url])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["best"] == summary["best"]
    assert len(fake_openai.requests) == calls  # a finished optimization is only read back


_OLD_TABLES: dict[str, tuple[dict[str, type], str | tuple[str, ...]]] = {
    "meta_runs": (
        dict.fromkeys(
            "id workflow tasks settings origins status best stop_reason created_at updated_at"
            "".split(),
            str,
        ),
        "id",
    ),
    "meta_candidates": (
        {
            **dict.fromkeys("run_id id parent operator target change key".split(), str),
            "iteration": int,
            **dict.fromkeys("status spec cost created_at updated_at".split(), str),
        },
        ("run_id", "id"),
    ),
}
"""Two of the tables as aworld-graph 0.1 made them (with sqlite-utils, in the saver's file)."""


def test_an_optimizer_file_of_an_earlier_version_opens(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with TrajectorySaver(db) as saver:
        saver.migrate()
    old = sqlite_utils.Database(db)
    for name, (columns, pk) in _OLD_TABLES.items():
        old.table(name).create(columns, pk=pk)
    old.table("meta_runs").insert(
        {
            "id": "r1",
            "workflow": "w.yaml",
            "tasks": "t",
            "settings": '{"seed": 0}',
            "origins": "{}",
            "status": "running",
            "created_at": "2025-01-01T00:00:00+00:00",
            "updated_at": "2025-01-01T00:00:00+00:00",
        }
    )
    old.table("meta_candidates").insert(
        {
            "run_id": "r1",
            "id": "c000",
            "operator": None,
            "change": "the seed",
            "key": "",
            "iteration": 0,
            "status": "seed",
            "spec": '{"name": "w"}',
            "cost": "{}",
            "created_at": "2025-01-01T00:00:00+00:00",
            "updated_at": "2025-01-01T00:00:00+00:00",
        }
    )
    old.conn.close()

    with open_store(db, create=False) as saver:
        store = MetaStore(saver)
        assert store.runs() == ["r1"]
        run = store.run("r1")
        assert run is not None and run["settings"] == {"seed": 0} and run["status"] == "running"
        (seed,) = store.candidates("r1")
        assert (seed.id, seed.status, seed.change) == ("c000", "seed", "the seed")
        assert seed.spec == {"name": "w"}
        seed.status = "accepted"
        store.save_candidate("r1", seed)
        store.save_candidate("r1", Candidate(id="c001", spec={"name": "w2"}, parent="c000"))
        store.save_run("r1", status="done", best="c001")
        run = store.run("r1")
        assert run is not None and (run["status"], run["best"]) == ("done", "c001")
        assert run["created_at"] == "2025-01-01T00:00:00+00:00"  # kept by an update
        assert [(c.id, c.status) for c in store.candidates("r1")] == [
            ("c000", "accepted"),
            ("c001", "pending"),
        ]
    # the tables sqlite-utils made are the ones in use: none was added beside them
    assert {"meta_runs", "meta_candidates", "meta_evals", "meta_steps"} <= set(
        sqlite_utils.Database(db).table_names()
    )
    assert sqlite_utils.Database(db)["meta_candidates"].pks == ["run_id", "id"]


def test_a_new_run_starts_running_and_keeps_what_an_update_leaves_out(tmp_path: Path) -> None:
    with open_store(tmp_path / "new.db") as saver:
        store = MetaStore(saver)
        assert store.runs() == [] and store.run("r") is None
        store.save_run("r", workflow="w.yaml", settings={"a": 1})
        store.save_run("r", best="c000")
        run = store.run("r")
        assert run is not None
        assert (run["status"], run["workflow"], run["settings"], run["best"]) == (
            "running",
            "w.yaml",
            {"a": 1},
            "c000",
        )
        with pytest.raises(ValueError, match="meta_runs has no column colour"):
            store.save_run("r", colour="red")
