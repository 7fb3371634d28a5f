"""Read-only summaries of what a database holds: its threads, and a thread's transitions."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

__all__ = ["ThreadSummary", "TransitionRow", "thread_summaries", "transitions"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ThreadSummary:
    """One thread of the database."""

    thread_id: str
    """The thread (a run, or a conversation of several runs)."""
    checkpoints: int
    """Checkpoints stored, all namespaces."""
    namespaces: int
    """Distinct namespaces (1 unless subgraphs checkpointed)."""
    first_at: str
    """Oldest checkpoint's timestamp (ISO-8601)."""
    last_at: str
    """Newest checkpoint's timestamp."""
    last_step: int | None
    """Step of the newest root-namespace checkpoint."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TransitionRow:
    """One row of the ``trajectory`` view, JSON columns decoded."""

    checkpoint_id: str
    parent_checkpoint_id: str | None
    step: int | None
    source: str | None
    created_at: str
    duration_ms: float | None
    nodes: list[str]
    changes: dict[str, Any]
    llm_usage: dict[str, int] | None
    tool_names: list[str]
    reward: float | None
    run_id: str | None


def thread_summaries(conn: sqlite3.Connection, limit: int | None = None) -> list[ThreadSummary]:
    """Threads, most recently active first."""
    sql = (
        "SELECT thread_id, count(*), count(DISTINCT checkpoint_ns), min(created_at), "
        "max(created_at), (SELECT step FROM checkpoints AS l WHERE l.thread_id = c.thread_id "
        "AND l.checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1) "
        "FROM checkpoints AS c GROUP BY thread_id ORDER BY max(created_at) DESC"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [
        ThreadSummary(
            thread_id=t, checkpoints=n, namespaces=ns, first_at=first, last_at=last, last_step=step
        )
        for t, n, ns, first, last, step in conn.execute(sql)
    ]


def transitions(conn: sqlite3.Connection, thread_id: str, ns: str = "") -> list[TransitionRow]:
    """Every transition of a thread/namespace, oldest first (forks included)."""
    rows = conn.execute(
        "SELECT checkpoint_id, parent_checkpoint_id, step, source, created_at, duration_ms, "
        "nodes, changes, llm_usage, tool_names, reward, run_id FROM trajectory "
        "WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id",
        (thread_id, ns),
    )
    return [
        TransitionRow(
            checkpoint_id=cid,
            parent_checkpoint_id=parent,
            step=step,
            source=source,
            created_at=created,
            duration_ms=duration,
            nodes=json.loads(nodes or "[]"),
            changes=json.loads(changes or "{}"),
            llm_usage=json.loads(usage) if usage else None,
            tool_names=json.loads(tools or "[]"),
            reward=reward,
            run_id=run_id,
        )
        for cid, parent, step, source, created, duration, nodes, changes, usage, tools, reward, run_id in rows
    ]
