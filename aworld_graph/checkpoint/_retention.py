"""Deleting, copying and pruning checkpoints (each inside the caller's write transaction).

After checkpoints are deleted, :func:`collect_garbage` keeps every value a remaining
checkpoint refers to, plus the rows its list deltas are built on, and deletes the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._db import Tx
from ._lease import lock_for_retention
from ._schema import columns

__all__ = [
    "delete_threads",
    "delete_runs",
    "copy_thread",
    "keep_last",
    "delete_older_than",
    "collect_garbage",
]

_BY_CHECKPOINT = ("checkpoints", "checkpoint_writes")
Unpack = Callable[[bytes], Any]


def delete_threads(tx: Tx, thread_ids: Sequence[str]) -> None:
    """Remove every row of ``thread_ids`` from every table."""
    lock_for_retention(tx, list(thread_ids))
    for table in (*_BY_CHECKPOINT, "checkpoint_blobs"):
        tx.many(f"DELETE FROM {table} WHERE thread_id = ?", [(t,) for t in thread_ids])


def _drop(tx: Tx, unpack: Unpack, keys: Iterable[tuple[str, str, str]]) -> set[str]:
    keys = list(keys)
    for table in _BY_CHECKPOINT:
        tx.many(
            f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            keys,
        )
    for thread_id, ns in {(t, ns) for t, ns, _ in keys}:
        collect_garbage(tx, unpack, thread_id, ns)
    return {t for t, _, _ in keys}


def delete_runs(tx: Tx, unpack: Unpack, run_ids: Sequence[str]) -> set[str]:
    """Remove the checkpoints (and their writes) made by ``run_ids``; returns thread ids."""
    keys: list[tuple[str, str, str]] = []
    for start in range(0, len(run_ids), 500):
        chunk = list(run_ids[start : start + 500])
        keys.extend(
            tx.all(  # type: ignore[arg-type]
                "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints "
                f"WHERE run_id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
        )
    lock_for_retention(tx, [k[0] for k in keys])
    return _drop(tx, unpack, keys)


def copy_thread(tx: Tx, source: str, target: str) -> None:
    """Copy every row of ``source`` to ``target`` (same ids, same namespaces)."""
    lock_for_retention(tx, [target])
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
        cols = ", ".join(c for c in columns(table) if c != "thread_id")
        tx.run(
            f"INSERT INTO {table} (thread_id, {cols}) SELECT ?, {cols} FROM {table} "
            "WHERE thread_id = ? ON CONFLICT DO NOTHING",
            (target, source),
        )


def _scopes(tx: Tx, thread_ids: Sequence[str] | None) -> list[tuple[str, str]]:
    if thread_ids is None:
        rows = tx.all("SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints")
    else:
        rows = [
            row
            for t in thread_ids
            for row in tx.all(
                "SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints WHERE thread_id = ?",
                (t,),
            )
        ]
    lock_for_retention(tx, [r[0] for r in rows])
    return rows  # type: ignore[return-value]


def keep_last(tx: Tx, unpack: Unpack, keep: int, thread_ids: Sequence[str] | None) -> int:
    """Keep the ``keep`` newest checkpoints of each thread/namespace; returns rows deleted."""
    keys: list[tuple[str, str, str]] = []
    for thread_id, ns in _scopes(tx, thread_ids):
        keys.extend(
            (thread_id, ns, cid)
            for (cid,) in tx.all(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
                "ORDER BY checkpoint_id DESC LIMIT -1 OFFSET ?"
                if tx.dialect == "sqlite"
                else "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND "
                "checkpoint_ns = ? ORDER BY checkpoint_id DESC OFFSET ?",
                (thread_id, ns, keep),
            )
        )
    _drop(tx, unpack, keys)
    return len(keys)


def delete_older_than(
    tx: Tx, unpack: Unpack, cutoff: str, thread_ids: Sequence[str] | None, keep_latest: bool
) -> int:
    """Delete checkpoints created before ``cutoff`` (ISO UTC); returns checkpoints deleted.

    With ``keep_latest`` the newest checkpoint of each thread/namespace stays, so every
    thread can still be resumed."""
    keys: list[tuple[str, str, str]] = []
    for thread_id, ns in _scopes(tx, thread_ids):
        latest = tx.one(
            "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ns),
        )
        for (cid,) in tx.all(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND created_at < ?",
            (thread_id, ns, cutoff),
        ):
            if not (keep_latest and latest is not None and cid == latest[0]):
                keys.append((thread_id, ns, cid))
    _drop(tx, unpack, keys)
    return len(keys)


def collect_garbage(tx: Tx, unpack: Unpack, thread_id: str, ns: str) -> int:
    """Delete value rows of ``(thread_id, ns)`` that no checkpoint needs; returns the count."""
    live: set[tuple[str, str]] = set()
    for (blob,) in tx.all(
        "SELECT checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
        (thread_id, ns),
    ):
        for ch, ver in unpack(bytes(blob))["channel_versions"].items():
            live.add((ch, str(ver)))
    bases: dict[tuple[str, str], str | None] = {
        (ch, ver): base
        for ch, ver, base in tx.all(
            "SELECT channel, version, base_version FROM checkpoint_blobs "
            "WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ns),
        )
    }
    keep: set[tuple[str, str]] = set()
    stack = [key for key in live if key in bases]
    while stack:
        key = stack.pop()
        if key in keep:
            continue
        keep.add(key)
        base = bases.get(key)
        if base is not None and (key[0], base) in bases:
            stack.append((key[0], base))
    dead = [(thread_id, ns, ch, ver) for (ch, ver) in bases if (ch, ver) not in keep]
    tx.many(
        "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND channel = ? AND version = ?",
        dead,
    )
    return len(dead)
