"""Deleting, copying and pruning checkpoints without breaking delta chains.

After checkpoints are deleted, :func:`collect_garbage` keeps every blob a remaining
checkpoint refers to, plus the rows its list deltas are built on, and deletes the rest.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from ..errors import RuntimeFailure
from ._read import msgpack_loader
from ._skeleton import resolve

__all__ = [
    "keep_chains",
    "TABLES_BY_CHECKPOINT",
    "delete_threads",
    "delete_runs",
    "copy_thread",
    "keep_last",
    "delete_older_than",
    "collect_garbage",
]

TABLES_BY_CHECKPOINT = ("checkpoints", "checkpoint_writes")
_ALL_TABLES = (*TABLES_BY_CHECKPOINT, "checkpoint_blobs")


def _marks(n: int) -> str:
    return ",".join("?" * n)


def delete_threads(conn: sqlite3.Connection, thread_ids: Sequence[str]) -> None:
    """Remove every row of ``thread_ids`` from every table."""
    for table in _ALL_TABLES:
        conn.executemany(f"DELETE FROM {table} WHERE thread_id = ?", [(t,) for t in thread_ids])


def _skeleton_rows(
    conn: sqlite3.Connection, thread_id: str, ns: str, deltas: bool = False
) -> dict[str, tuple[str | None, bytes]]:
    """Checkpoint id → (parent id, stored skeleton) in a thread/namespace (deltas only)."""
    only = " AND substr(checkpoint, 1, 1) = x'c1'" if deltas else ""
    return {
        cid: (parent, blob)
        for cid, parent, blob in conn.execute(
            "SELECT checkpoint_id, parent_checkpoint_id, checkpoint FROM checkpoints "
            f"WHERE thread_id = ? AND checkpoint_ns = ?{only}",
            (thread_id, ns),
        )
    }


def keep_chains(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    thread_id: str,
    ns: str,
    doomed: Callable[[str], bool],
) -> None:
    """Store whole the skeleton of every remaining checkpoint that is a delta of one about to
    be deleted (its descendants' chains then end there)."""
    orphans = {
        cid: (parent, blob)
        for cid, (parent, blob) in _skeleton_rows(conn, thread_id, ns, deltas=True).items()
        if parent is not None and doomed(parent) and not doomed(cid)
    }
    if not orphans:
        return
    unpack = msgpack_loader(serde)
    shapes: dict[str, dict[str, Any]] = {}
    for cid in orphans:
        try:
            shapes.update(resolve(conn, thread_id, ns, dict(orphans), unpack, [cid]))
        except RuntimeFailure:  # already unreadable (a file changed by hand): left as it is
            continue
    conn.executemany(
        "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND checkpoint_id = ?",
        [(serde.dumps_typed(shape)[1], thread_id, ns, cid) for cid, shape in shapes.items()],
    )


def _drop_checkpoints(
    conn: sqlite3.Connection, serde: SerializerProtocol, keys: Iterable[tuple[str, str, str]]
) -> set[tuple[str, str]]:
    keys = list(keys)
    by_scope: dict[tuple[str, str], set[str]] = {}
    for thread_id, ns, cid in keys:
        by_scope.setdefault((thread_id, ns), set()).add(cid)
    for (thread_id, ns), ids in by_scope.items():
        keep_chains(conn, serde, thread_id, ns, ids.__contains__)
    for table in TABLES_BY_CHECKPOINT:
        conn.executemany(
            f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            keys,
        )
    return {(t, ns) for t, ns, _ in keys}


def delete_runs(
    conn: sqlite3.Connection, serde: SerializerProtocol, run_ids: Sequence[str]
) -> set[str]:
    """Remove the checkpoints (and their writes) made by ``run_ids``; returns thread ids."""
    keys: list[tuple[str, str, str]] = []
    for start in range(0, len(run_ids), 500):
        chunk = list(run_ids[start : start + 500])
        keys.extend(
            conn.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints "
                f"WHERE run_id IN ({_marks(len(chunk))})",
                chunk,
            ).fetchall()
        )
    scopes = _drop_checkpoints(conn, serde, keys)
    for thread_id, ns in scopes:
        collect_garbage(conn, serde, thread_id, ns)
    return {t for t, _ in scopes}


def copy_thread(conn: sqlite3.Connection, source: str, target: str) -> None:
    """Copy every row of ``source`` to ``target`` (same ids, same namespaces)."""
    columns = {
        "checkpoints": "checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, "
        "source, created_at, checkpoint, metadata, nodes, duration_ms, changes, llm_usage, "
        "tool_names, reward",
        "checkpoint_blobs": "checkpoint_ns, channel, version, kind, type, value, base_version, "
        "items, nbytes, digest, depth",
        "checkpoint_writes": "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, "
        "task_path",
    }
    for table, cols in columns.items():
        conn.execute(
            f"INSERT OR REPLACE INTO {table} (thread_id, {cols}) "
            f"SELECT ?, {cols} FROM {table} WHERE thread_id = ?",
            (target, source),
        )


def _scopes(conn: sqlite3.Connection, thread_ids: Sequence[str] | None) -> list[tuple[str, str]]:
    if thread_ids is None:
        return conn.execute("SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints").fetchall()
    out: list[tuple[str, str]] = []
    for t in thread_ids:
        out.extend(
            conn.execute(
                "SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints WHERE thread_id = ?",
                (t,),
            ).fetchall()
        )
    return out


def keep_last(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    keep: int,
    thread_ids: Sequence[str] | None,
) -> int:
    """Keep the ``keep`` newest checkpoints of each thread/namespace; returns rows deleted."""
    deleted = 0
    for thread_id, ns in _scopes(conn, thread_ids):
        row = conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
            "ORDER BY checkpoint_id DESC LIMIT 1 OFFSET ?",
            (thread_id, ns, keep - 1),
        ).fetchone()
        if row is None:
            continue
        boundary: str = row[0]
        keep_chains(conn, serde, thread_id, ns, boundary.__gt__)  # deleted: ids < boundary
        for table in TABLES_BY_CHECKPOINT:
            cur = conn.execute(
                f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? "
                "AND checkpoint_id < ?",
                (thread_id, ns, row[0]),
            )
            if table == "checkpoints":
                deleted += cur.rowcount
        collect_garbage(conn, serde, thread_id, ns)
    return deleted


def delete_older_than(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    cutoff: str,
    thread_ids: Sequence[str] | None,
    keep_latest: bool,
) -> int:
    """Delete checkpoints created before ``cutoff`` (ISO UTC); returns checkpoints deleted.

    With ``keep_latest`` the newest checkpoint of each thread/namespace stays, so every
    thread can still be resumed.
    """
    keys: list[tuple[str, str, str]] = []
    for thread_id, ns in _scopes(conn, thread_ids):
        latest = conn.execute(
            "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ns),
        ).fetchone()[0]
        for (cid,) in conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND created_at < ?",
            (thread_id, ns, cutoff),
        ).fetchall():
            if not (keep_latest and cid == latest):
                keys.append((thread_id, ns, cid))
    for thread_id, ns in _drop_checkpoints(conn, serde, keys):
        collect_garbage(conn, serde, thread_id, ns)
    return len(keys)


def collect_garbage(
    conn: sqlite3.Connection, serde: SerializerProtocol, thread_id: str, ns: str
) -> int:
    """Delete blob rows of ``(thread_id, ns)`` that no checkpoint needs; returns the count."""
    live: set[tuple[str, str]] = set()
    rows = _skeleton_rows(conn, thread_id, ns)
    try:
        shapes = resolve(conn, thread_id, ns, rows, msgpack_loader(serde), list(rows))
    except RuntimeFailure:  # a chain broken by hand: which values are live is unknown
        return 0
    for shape in shapes.values():
        for ch, ver in shape["channel_versions"].items():
            live.add((ch, str(ver)))
    bases: dict[tuple[str, str], str | None] = {
        (ch, ver): base
        for ch, ver, base in conn.execute(
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
    conn.executemany(
        "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
        "AND channel = ? AND version = ?",
        dead,
    )
    return len(dead)
