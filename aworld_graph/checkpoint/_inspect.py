"""Read-only summaries of what a store holds: its threads, and a thread's transitions."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ._db import Tx

__all__ = ["ThreadSummary", "TransitionRow", "thread_summaries", "transitions"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ThreadSummary:
    """One thread of the store."""

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
    """A ``trajectory`` row (the view also has ``thread_id``, ``checkpoint_ns``), JSON decoded."""

    checkpoint_id: str | None
    """The checkpoint the step made; ``None`` for a step that failed (see ``error``)."""
    parent_checkpoint_id: str | None
    """The checkpoint the step started from."""
    step: int | None
    """LangGraph's step number."""
    source: str | None
    """``input``, ``loop``, ``update``, ``fork``, or ``error`` for a failed step."""
    created_at: str | None
    """ISO-8601 UTC."""
    duration_ms: float | None
    """Time since the parent checkpoint."""
    nodes: list[str]
    """Nodes that ran in the step (its tasks' writes, and appended ``trace`` records)."""
    changes: dict[str, Any]
    """Channel → new value, or a grown list's appended items (secrets stripped, big ones cut)."""
    llm_usage: dict[str, int] | None
    """``calls``, ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` summed over the
    appended ``trace`` records (or LangChain messages' ``usage_metadata``)."""
    tool_names: list[str]
    """Tools called or executed in the step."""
    reward: float | None
    """The ``score`` of the last task reward appended to ``rewards`` in the step (a reward
    function's or ``Runners.reward``'s; critics' verdicts are in ``changes`` only)."""
    run_id: str | None
    """The LangGraph run that made it."""
    error: str | None = None
    """For a failed step, what went wrong (secrets removed)."""


def thread_summaries(tx: Tx, limit: int | None = None) -> list[ThreadSummary]:
    """Threads, most recently active first."""
    sql = (
        "SELECT thread_id, count(*), count(DISTINCT checkpoint_ns), min(created_at), "
        "max(created_at), (SELECT step FROM checkpoints AS l WHERE l.thread_id = c.thread_id "
        "AND l.checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1) "
        "FROM checkpoints AS c GROUP BY thread_id ORDER BY max(created_at) DESC"
    ) + ("" if limit is None else f" LIMIT {int(limit)}")
    names = [f.name for f in fields(ThreadSummary)]  # the columns selected, in order
    return [ThreadSummary(**dict(zip(names, row, strict=True))) for row in tx.all(sql)]


def transitions(tx: Tx, thread_id: str, ns: str, *, errors: bool) -> list[TransitionRow]:
    """Every transition of a thread/namespace, oldest first (forks and failed steps
    included; ``errors=False`` for a store not migrated yet, whose view has no errors)."""
    names = [f.name for f in fields(TransitionRow)]  # the view's columns, in another order
    rows = tx.all(
        f"SELECT {', '.join(names[:-1])}, {'error' if errors else 'NULL'} FROM trajectory "
        "WHERE thread_id = ? AND checkpoint_ns = ? "
        "ORDER BY coalesce(checkpoint_id, parent_checkpoint_id || '~')",
        (thread_id, ns),
    )
    out = []
    for row in rows:
        values = dict(zip(names, row, strict=True))
        values.update(
            nodes=tx.json(values["nodes"]) or [],
            changes=tx.json(values["changes"]) or {},
            llm_usage=tx.json(values["llm_usage"]),
            tool_names=tx.json(values["tool_names"]) or [],
        )
        out.append(TransitionRow(**values))
    return out
