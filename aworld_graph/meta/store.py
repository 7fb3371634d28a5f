"""The optimizer's own state, in tables of the checkpoint store, read and written through the
store's database layer (:attr:`~aworld_graph.checkpoint.TrajectorySaver.database`), so on
SQLite and PostgreSQL alike and on the saver's own connections and locks:

* ``meta_runs`` – one row per optimization: workflow, task set, settings, status, best;
* ``meta_candidates`` – every candidate: parent, operator, change, status, the workflow spec;
* ``meta_evals`` – every evaluation: candidate, split, mean and interval, cost, per-task
  scores and threads;
* ``meta_steps`` – one row per search iteration: operator, parent, target node, outcome, the
  optimizer agent's cost.

JSON values are stored as text on both back ends. The layout is the one earlier versions made
with sqlite-utils in SQLite files, so their files open as they are.

A candidate is written before it is evaluated and its evaluation as soon as it ends, so an
optimization that crashes continues where it stopped (finished runs are read back from their
checkpoints, not run again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..checkpoint import TrajectorySaver, Tx
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


_TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "meta_runs": (
        "id TEXT, workflow TEXT, tasks TEXT, settings TEXT, origins TEXT, status TEXT, "
        "best TEXT, stop_reason TEXT, created_at TEXT, updated_at TEXT",
        ("id",),
    ),
    "meta_candidates": (
        "run_id TEXT, id TEXT, parent TEXT, operator TEXT, target TEXT, change TEXT, key TEXT, "
        "iteration INT, status TEXT, spec TEXT, cost TEXT, created_at TEXT, updated_at TEXT",
        ("run_id", "id"),
    ),
    "meta_evals": (
        "run_id TEXT, candidate TEXT, split TEXT, mean REAL, ci_low REAL, ci_high REAL, n INT, "
        "llm_calls INT, tokens INT, seconds REAL, data TEXT, created_at TEXT",
        ("run_id", "candidate", "split"),
    ),
    "meta_steps": (
        "run_id TEXT, iteration INT, operator TEXT, parent TEXT, candidate TEXT, target TEXT, "
        "outcome TEXT, note TEXT, llm_calls INT, tokens INT, seconds REAL, created_at TEXT",
        ("run_id", "iteration"),
    ),
}
"""Each table: its columns (``name TYPE``) and primary key."""
_TYPES = {
    "sqlite": {"TEXT": "TEXT", "INT": "INTEGER", "REAL": "FLOAT"},  # as sqlite-utils made them
    "postgres": {"TEXT": "text", "INT": "bigint", "REAL": "double precision"},
}


def _columns(table: str) -> list[str]:
    return [part.split()[0] for part in _TABLES[table][0].split(", ")]


def _create_tables(tx: Tx) -> None:
    """The tables that are not there yet (existing ones are left as they are)."""
    types = _TYPES[tx.dialect]
    for table, (spec, pk) in _TABLES.items():
        parts = [f"{name} {types[kind]}" for name, kind in (c.split() for c in spec.split(", "))]
        parts.append(f"PRIMARY KEY ({', '.join(pk)})")
        tx.run(f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(parts)})")


def _upsert(tx: Tx, table: str, row: dict[str, Any], keep: tuple[str, ...] = ()) -> None:
    """Insert ``row``; on a key already stored, update the row's other columns but ``keep``."""
    known, pk = _columns(table), _TABLES[table][1]
    if unknown := sorted(set(row) - set(known)):
        raise ValueError(f"{table} has no column {', '.join(unknown)}")
    names = list(row)
    update = ", ".join(f"{n} = excluded.{n}" for n in names if n not in pk and n not in keep)
    tx.run(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
        f"ON CONFLICT ({', '.join(pk)}) " + (f"DO UPDATE SET {update}" if update else "DO NOTHING"),
        [row[n] for n in names],
    )


def _rows(
    tx: Tx, table: str, where: str, params: list[Any], order: str = ""
) -> list[dict[str, Any]]:
    names = _columns(table)
    sql = f"SELECT {', '.join(names)} FROM {table} WHERE {where}"
    return [dict(zip(names, r, strict=True)) for r in tx.all(sql + order, params)]


class MetaStore:
    """Read and write the optimizer tables of one checkpoint store (SQLite or PostgreSQL),
    through ``saver``'s database layer; the store is brought to this version's schema and the
    tables are made on opening."""

    def __init__(self, saver: TrajectorySaver) -> None:
        self.saver = saver
        """The checkpoint store the tables live in."""
        saver.migrate()  # a checkpoint store of this schema before the optimizer's tables join it
        saver.database.each(_create_tables)

    # -- runs -------------------------------------------------------------------------------
    def runs(self) -> list[str]:
        """The ids of the optimizations in the store, oldest first."""
        with self.saver.database.read() as tx:
            return [r[0] for r in tx.all("SELECT id FROM meta_runs ORDER BY created_at, id")]

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The ``meta_runs`` row of ``run_id`` (``settings`` and ``origins`` decoded), or ``None``."""
        with self.saver.database.read() as tx:
            rows = _rows(tx, "meta_runs", "id = ?", [run_id])
        if not rows:
            return None
        row = rows[0]
        row["settings"] = json.loads(row["settings"] or "{}")
        row["origins"] = json.loads(row["origins"] or "{}")
        return row

    def save_run(self, run_id: str, **fields: Any) -> None:
        """Store ``fields`` of run ``run_id`` (a new run starts as ``running``)."""
        row: dict[str, Any] = {"id": run_id, "updated_at": _now()}
        for key, value in fields.items():
            row[key] = json.dumps(value) if key in ("settings", "origins") else value
        first = {"status": "running", "created_at": row["updated_at"]}
        keep = tuple(k for k in first if k not in row)  # a run already stored keeps its own
        self.saver.database.each(lambda tx: _upsert(tx, "meta_runs", {**first, **row}, keep))

    # -- candidates -------------------------------------------------------------------------
    def save_candidate(self, run_id: str, c: Candidate) -> None:
        """Store candidate ``c`` (its ``created_at`` stays that of its first save)."""
        now = _now()
        row = {
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
            "created_at": now,
            "updated_at": now,
        }
        self.saver.database.each(lambda tx: _upsert(tx, "meta_candidates", row, ("created_at",)))

    def candidates(self, run_id: str) -> list[Candidate]:
        """Every candidate of the run, in id order, with its evaluations attached."""
        with self.saver.database.read() as tx:
            eval_rows = _rows(tx, "meta_evals", "run_id = ?", [run_id])
            rows = _rows(tx, "meta_candidates", "run_id = ?", [run_id], " ORDER BY id")
        evals: dict[str, dict[str, Evaluation]] = {}
        for row in eval_rows:
            evals.setdefault(row["candidate"], {})[row["split"]] = Evaluation.from_dict(
                json.loads(row["data"])
            )
        return [
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
            for row in rows
        ]

    # -- evaluations ------------------------------------------------------------------------
    def save_eval(self, run_id: str, ev: Evaluation) -> None:
        """Store evaluation ``ev`` (it replaces one of the same candidate and split)."""
        row = {
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
        }
        self.saver.database.each(lambda tx: _upsert(tx, "meta_evals", row))

    # -- steps ------------------------------------------------------------------------------
    def save_step(self, run_id: str, s: Step) -> None:
        """Store step ``s`` (it replaces the record of the same iteration)."""
        row = {
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
        }
        self.saver.database.each(lambda tx: _upsert(tx, "meta_steps", row))

    def steps(self, run_id: str) -> list[Step]:
        """The run's steps, by iteration."""
        with self.saver.database.read() as tx:
            rows = _rows(tx, "meta_steps", "run_id = ?", [run_id], " ORDER BY iteration")
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
            for row in rows
        ]
