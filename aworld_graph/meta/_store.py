"""The optimizer's own state, in tables of the checkpoint database (through sqlite-utils).

* ``meta_runs`` – one row per optimization: workflow, task set, settings, status, best;
* ``meta_candidates`` – every candidate: parent, operator, change, status, the workflow spec;
* ``meta_evals`` – every evaluation: candidate, split, mean and interval, cost, per-task
  scores and threads;
* ``meta_steps`` – one row per search iteration: operator, parent, target node, outcome, the
  optimizer agent's cost.

A candidate is written before it is evaluated and its evaluation as soon as it ends, so an
optimization that crashes continues where it stopped (finished runs are read back from their
checkpoints, not run again).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any

import sqlite_utils
from sqlite_utils.db import Table

from .candidates import Candidate
from .evaluate import Evaluation

__all__ = ["MetaStore", "Step"]


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(kw_only=True)
class Step:
    """One iteration of the search."""

    iteration: int
    """1, 2, …"""
    operator: str
    """The operator whose turn it was."""
    parent: str | None = None
    """The candidate it started from."""
    candidate: str | None = None
    """The candidate it made, if any."""
    target: str | None = None
    """The node the operator worked on, if one."""
    outcome: str = "pending"
    """``accepted``, ``rejected``, ``invalid``, ``skipped`` (nothing left to try) or ``pending``."""
    note: str = ""
    """Why, in words."""
    cost: dict[str, float] = field(default_factory=dict)
    """The optimizer agent's ``llm_calls``, ``tokens`` and ``seconds`` in this iteration."""


_TABLES: dict[str, tuple[dict[str, type], str | tuple[str, ...]]] = {
    "meta_runs": (
        {
            "id": str,
            "workflow": str,
            "tasks": str,
            "settings": str,
            "origins": str,
            "status": str,
            "best": str,
            "stop_reason": str,
            "created_at": str,
            "updated_at": str,
        },
        "id",
    ),
    "meta_candidates": (
        {
            "run_id": str,
            "id": str,
            "parent": str,
            "operator": str,
            "target": str,
            "change": str,
            "key": str,
            "iteration": int,
            "status": str,
            "spec": str,
            "cost": str,
            "created_at": str,
            "updated_at": str,
        },
        ("run_id", "id"),
    ),
    "meta_evals": (
        {
            "run_id": str,
            "candidate": str,
            "split": str,
            "mean": float,
            "ci_low": float,
            "ci_high": float,
            "n": int,
            "llm_calls": int,
            "tokens": int,
            "seconds": float,
            "data": str,
            "created_at": str,
        },
        ("run_id", "candidate", "split"),
    ),
    "meta_steps": (
        {
            "run_id": str,
            "iteration": int,
            "operator": str,
            "parent": str,
            "candidate": str,
            "target": str,
            "outcome": str,
            "note": str,
            "llm_calls": int,
            "tokens": int,
            "seconds": float,
            "created_at": str,
        },
        ("run_id", "iteration"),
    ),
}
"""Each table: its columns and primary key."""


class MetaStore:
    """Read and write the optimizer tables of one database file."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 60000")
        self.db = sqlite_utils.Database(conn)
        self._ensure()

    def close(self) -> None:
        self.db.conn.close()

    def _table(self, name: str) -> Table:
        return self.db.table(name)

    def _ensure(self) -> None:
        tables = set(self.db.table_names())
        for name, (columns, pk) in _TABLES.items():
            if name not in tables:
                self._table(name).create(columns, pk=pk)

    # -- runs -------------------------------------------------------------------------------
    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = list(self.db["meta_runs"].rows_where("id = ?", [run_id]))
        if not rows:
            return None
        row = dict(rows[0])
        row["settings"] = json.loads(row["settings"] or "{}")
        row["origins"] = json.loads(row["origins"] or "{}")
        return row

    def save_run(self, run_id: str, **fields: Any) -> None:
        row: dict[str, Any] = {"id": run_id, "updated_at": _now()}
        for key, value in fields.items():
            row[key] = json.dumps(value) if key in ("settings", "origins") else value
        if self.run(run_id) is None:
            row.setdefault("created_at", row["updated_at"])
            row.setdefault("status", "running")
            self._table("meta_runs").insert(row)
        else:
            self._table("meta_runs").update(run_id, row)

    # -- candidates -------------------------------------------------------------------------
    def save_candidate(self, run_id: str, c: Candidate) -> None:
        self._table("meta_candidates").upsert(
            {
                "run_id": run_id,
                "id": c.id,
                "parent": c.parent,
                "operator": c.operator,
                "target": c.target,
                "change": c.change,
                "key": c.key,
                "iteration": c.iteration,
                "status": c.status,
                "spec": json.dumps(c.spec),
                "cost": json.dumps(c.cost),
                "updated_at": _now(),
            },
            pk=("run_id", "id"),
        )
        self.db.execute(
            "UPDATE meta_candidates SET created_at = updated_at "
            "WHERE run_id = ? AND id = ? AND created_at IS NULL",
            [run_id, c.id],
        )
        self.db.conn.commit()

    def candidates(self, run_id: str) -> list[Candidate]:
        """Every candidate of the run, in id order, with its evaluations attached."""
        evals: dict[str, dict[str, Evaluation]] = {}
        for row in self.db["meta_evals"].rows_where("run_id = ?", [run_id]):
            evals.setdefault(row["candidate"], {})[row["split"]] = Evaluation.from_dict(
                json.loads(row["data"])
            )
        out = []
        for row in self.db["meta_candidates"].rows_where("run_id = ?", [run_id], order_by="id"):
            out.append(
                Candidate(
                    id=row["id"],
                    spec=json.loads(row["spec"]),
                    parent=row["parent"],
                    operator=row["operator"],
                    target=row["target"],
                    change=row["change"] or "",
                    key=row["key"] or "",
                    iteration=row["iteration"] or 0,
                    status=row["status"],
                    evals=evals.get(row["id"], {}),
                    cost=json.loads(row["cost"] or "{}"),
                )
            )
        return out

    # -- evaluations ------------------------------------------------------------------------
    def save_eval(self, run_id: str, ev: Evaluation) -> None:
        self._table("meta_evals").upsert(
            {
                "run_id": run_id,
                "candidate": ev.candidate,
                "split": ev.split,
                "mean": ev.mean,
                "ci_low": ev.ci_low,
                "ci_high": ev.ci_high,
                "n": ev.n,
                "llm_calls": ev.llm_calls,
                "tokens": ev.tokens,
                "seconds": ev.seconds,
                "data": json.dumps(ev.as_dict()),
                "created_at": _now(),
            },
            pk=("run_id", "candidate", "split"),
        )

    # -- steps ------------------------------------------------------------------------------
    def save_step(self, run_id: str, s: Step) -> None:
        self._table("meta_steps").upsert(
            {
                "run_id": run_id,
                "iteration": s.iteration,
                "operator": s.operator,
                "parent": s.parent,
                "candidate": s.candidate,
                "target": s.target,
                "outcome": s.outcome,
                "note": s.note,
                "llm_calls": int(s.cost.get("llm_calls", 0)),
                "tokens": int(s.cost.get("tokens", 0)),
                "seconds": float(s.cost.get("seconds", 0.0)),
                "created_at": _now(),
            },
            pk=("run_id", "iteration"),
        )

    def steps(self, run_id: str) -> list[Step]:
        return [
            Step(
                iteration=row["iteration"],
                operator=row["operator"],
                parent=row["parent"],
                candidate=row["candidate"],
                target=row["target"],
                outcome=row["outcome"],
                note=row["note"] or "",
                cost={
                    "llm_calls": row["llm_calls"],
                    "tokens": row["tokens"],
                    "seconds": row["seconds"],
                },
            )
            for row in self.db["meta_steps"].rows_where(
                "run_id = ?", [run_id], order_by="iteration"
            )
        ]
