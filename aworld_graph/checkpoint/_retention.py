"""Deleting, copying and pruning checkpoints (each inside the caller's write transaction).
When checkpoints go, the values a remaining one refers to stay, with the rows their list
deltas are built on; the other value rows of that thread/namespace go.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._db import AT_CHECKPOINT, Tx, Unpack
from ._lease import lock_for_retention
from ._schema import columns
from ._texts import garbage_sql

__all__ = ["delete_threads", "delete_runs", "copy_thread", "prune"]

_BY_CHECKPOINT = ("checkpoints", "checkpoint_writes")


def delete_threads(tx: Tx, thread_ids: Sequence[str]) -> None:
    """Remove every row of ``thread_ids`` from every table."""
    lock_for_retention(tx, list(thread_ids))
    for table in (*_BY_CHECKPOINT, "checkpoint_blobs", "checkpoint_texts"):
        tx.many(f"DELETE FROM {table} WHERE thread_id = ?", [(t,) for t in thread_ids])


def delete_runs(tx: Tx, unpack: Unpack, run_ids: Sequence[str]) -> None:
    """Remove the checkpoints (and their writes) made by ``run_ids``."""
    sql = "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE run_id = ?"
    keys = [key for run_id in dict.fromkeys(run_ids) for key in tx.all(sql, (run_id,))]
    lock_for_retention(tx, [k[0] for k in keys])
    _drop(tx, unpack, keys)


def copy_thread(tx: Tx, source: str, target: str) -> None:
    """Copy every row of ``source`` to ``target`` (same ids, same namespaces)."""
    lock_for_retention(tx, [target])
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_texts"):
        cols = ", ".join(c for c in columns(table) if c != "thread_id")
        tx.run(
            f"INSERT INTO {table} (thread_id, {cols}) SELECT ?, {cols} FROM {table} "
            "WHERE thread_id = ? ON CONFLICT DO NOTHING",
            (target, source),
        )


def prune(
    tx: Tx, unpack: Unpack, thread_ids: Iterable[str] | None, keep: int, before: str | None
) -> int:
    """Delete all but the ``keep`` newest checkpoints of each thread/namespace of ``thread_ids``
    (all if ``None``), if given only those created before ``before`` (ISO UTC); the count."""
    sql = "SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints"
    scopes = tx.all(sql) if thread_ids is None else []
    for thread_id in dict.fromkeys(str(t) for t in thread_ids or ()):
        scopes.extend(tx.all(f"{sql} WHERE thread_id = ?", (thread_id,)))
    lock_for_retention(tx, [r[0] for r in scopes])
    doomed = "1" if before is None else "created_at < ?"  # whether a row may go
    params = () if before is None else (before,)
    keys: list[tuple[str, str, str]] = []
    for thread_id, ns in scopes:
        rows = tx.all(
            f"SELECT checkpoint_id, {doomed} FROM checkpoints WHERE thread_id = ? AND "
            "checkpoint_ns = ? ORDER BY checkpoint_id DESC",
            (*params, thread_id, ns),
        )
        keys.extend((thread_id, ns, cid) for cid, dead in rows[keep:] if dead)
    _drop(tx, unpack, keys)
    return len(keys)


def _drop(tx: Tx, unpack: Unpack, keys: list[tuple[str, str, str]]) -> None:
    for table in _BY_CHECKPOINT:
        tx.many(f"DELETE FROM {table} WHERE {AT_CHECKPOINT}", keys)
    for thread_id, ns in {(t, ns) for t, ns, _ in keys}:
        _collect_garbage(tx, unpack, thread_id, ns)
    tx.many(garbage_sql(tx.dialect), [(t,) for t in {t for t, _, _ in keys}])


def _collect_garbage(tx: Tx, unpack: Unpack, thread_id: str, ns: str) -> None:
    """Delete the value rows of ``(thread_id, ns)`` that no checkpoint needs."""
    live: list[tuple[str, str | None]] = []
    sql = "SELECT checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?"
    for (blob,) in tx.all(sql, (thread_id, ns)):
        live.extend((ch, str(ver)) for ch, ver in unpack(bytes(blob))["channel_versions"].items())
    rows = tx.all(
        "SELECT channel, version, base_version FROM checkpoint_blobs "
        "WHERE thread_id = ? AND checkpoint_ns = ?",
        (thread_id, ns),
    )
    bases: dict[tuple[str, str | None], str | None] = {(ch, ver): b for ch, ver, b in rows}
    keep: set[tuple[str, str | None]] = set()
    for key in live:  # each value, and the chain of rows its delta is built on
        while key in bases and key not in keep:
            keep.add(key)
            key = (key[0], bases[key])
    tx.many(
        "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND channel = ? AND version = ?",
        [(thread_id, ns, ch, ver) for (ch, ver) in bases if (ch, ver) not in keep],
    )
