"""Writing checkpoints and pending writes, each in one ``BEGIN IMMEDIATE`` transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP, ChannelVersions, Checkpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from ._blobs import EMPTY, BaseInfo, BlobRow, encode_channel
from ._read import load_versions
from ._store import Head, Store
from ._trajectory import Transition, duration_ms, node_from_task_path, transition_row

__all__ = ["put_checkpoint", "put_writes"]

_INSERT_BLOB = (
    "INSERT OR REPLACE INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, kind, "
    "type, value, base_version, items, nbytes, digest, depth) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)
_INSERT_CHECKPOINT = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, run_id, step, source, created_at, checkpoint, metadata) "
    "VALUES (?,?,?,?,?,?,?,?,?,?)"
)
_INSERT_TRAJECTORY = (
    "INSERT OR REPLACE INTO trajectory (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, run_id, step, nodes, source, created_at, duration_ms, changes, "
    "llm_usage, tool_names, reward) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_WRITE_COLUMNS = (
    "(thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path) "
    "VALUES (?,?,?,?,?,?,?,?,?)"
)
_BASE_SQL = (
    "SELECT items, nbytes, digest, depth FROM checkpoint_blobs WHERE thread_id = ? AND "
    "checkpoint_ns = ? AND channel = ? AND version = ? AND kind != 0"
)
_PARENT_SQL = (
    "SELECT checkpoint, created_at FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
_TASK_PATHS_SQL = (
    "SELECT DISTINCT task_path FROM checkpoint_writes "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? ORDER BY task_path"
)


def put_checkpoint(
    store: Store,
    serde: SerializerProtocol,
    *,
    thread_id: str,
    ns: str,
    parent_id: str | None,
    checkpoint: Checkpoint,
    metadata: dict[str, Any],
    new_versions: ChannelVersions,
    snapshot_every: int,
) -> None:
    """Store ``checkpoint`` (values of ``new_versions`` channels only) and its transition."""
    checkpoint_id = checkpoint["id"]
    values = checkpoint["channel_values"]
    skeleton = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
    skeleton_bytes = serde.dumps_typed(skeleton)[1]
    metadata_json = json.dumps(metadata, ensure_ascii=False, default=str)
    typed = {ch: serde.dumps_typed(values[ch]) for ch in new_versions if ch in values}
    ts = checkpoint["ts"]
    step = metadata.get("step")
    run_id = metadata.get("run_id")
    with store.write() as conn:
        parent = _parent_head(store, conn, serde, thread_id, ns, parent_id)
        rows: list[BlobRow] = []
        changed: dict[str, Any] = {}
        appended: dict[str, list[Any]] = {}
        for ch, ver in new_versions.items():
            version = str(ver)
            if ch not in values:
                rows.append(BlobRow(ch, version, EMPTY, None, None))
                continue
            value = values[ch]
            base = None
            if parent is not None and isinstance(value, list):
                base_version = parent.versions.get(ch)
                if base_version is not None and str(base_version) != version:
                    base = _base_info(conn, thread_id, ns, ch, str(base_version))
            row, added = encode_channel(ch, version, value, typed[ch], base, snapshot_every)
            rows.append(row)
            if added is None:
                changed[ch] = value
            else:
                appended[ch] = added
        conn.executemany(
            _INSERT_BLOB,
            [
                (
                    thread_id,
                    ns,
                    r.channel,
                    r.version,
                    r.kind,
                    r.type,
                    r.value,
                    r.base_version,
                    r.items,
                    r.nbytes,
                    r.digest,
                    r.depth,
                )
                for r in rows
            ],
        )
        conn.execute(
            _INSERT_CHECKPOINT,
            (
                thread_id,
                ns,
                checkpoint_id,
                parent_id,
                _text(run_id),
                _int(step),
                _text(metadata.get("source")),
                ts,
                skeleton_bytes,
                metadata_json,
            ),
        )
        nodes = _nodes(conn, thread_id, ns, parent_id) if parent_id else []
        transition = Transition(
            thread_id=thread_id,
            checkpoint_ns=ns,
            checkpoint_id=checkpoint_id,
            parent_checkpoint_id=parent_id,
            run_id=_text(run_id),
            step=_int(step),
            source=_text(metadata.get("source")),
            created_at=ts,
            duration_ms=duration_ms(parent.ts if parent else None, ts),
            nodes=nodes,
            changed=changed,
            appended=appended,
        )
        conn.execute(_INSERT_TRAJECTORY, transition_row(transition))
    store.remember(
        thread_id, ns, parent_id, Head(checkpoint_id, dict(checkpoint["channel_versions"]), ts)
    )


def put_writes(
    store: Store,
    serde: SerializerProtocol,
    *,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> None:
    """Store a task's writes: special channels overwrite, ordinary ones insert-if-absent."""
    regular: list[tuple[Any, ...]] = []
    special: list[tuple[Any, ...]] = []
    for i, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, i)
        type_, data = serde.dumps_typed(value)
        row = (thread_id, ns, checkpoint_id, task_id, idx, channel, type_, data, task_path)
        (special if idx < 0 else regular).append(row)
    node = node_from_task_path(task_path)
    child = store.child(thread_id, ns, checkpoint_id) if node else None
    with store.write() as conn:
        if regular:
            conn.executemany("INSERT OR IGNORE INTO checkpoint_writes " + _WRITE_COLUMNS, regular)
        if special:
            conn.executemany("INSERT OR REPLACE INTO checkpoint_writes " + _WRITE_COLUMNS, special)
        if child is not None and node is not None:
            _add_node(conn, thread_id, ns, child, node)


def _parent_head(
    store: Store,
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    thread_id: str,
    ns: str,
    parent_id: str | None,
) -> Head | None:
    if not parent_id:
        return None
    head = store.head(thread_id, ns)
    if head is not None and head.checkpoint_id == parent_id:
        return head
    row = conn.execute(_PARENT_SQL, (thread_id, ns, parent_id)).fetchone()
    if row is None:
        return None
    return Head(parent_id, load_versions(serde, row[0])["channel_versions"], row[1])


def _base_info(
    conn: sqlite3.Connection, thread_id: str, ns: str, channel: str, version: str
) -> BaseInfo | None:
    row = conn.execute(_BASE_SQL, (thread_id, ns, channel, version)).fetchone()
    if row is None or row[0] is None or row[2] is None:
        return None
    return BaseInfo(version, row[0], row[1], row[2], row[3] or 0)


def _nodes(conn: sqlite3.Connection, thread_id: str, ns: str, parent_id: str) -> list[str]:
    names = []
    for (path,) in conn.execute(_TASK_PATHS_SQL, (thread_id, ns, parent_id)):
        name = node_from_task_path(path or "")
        if name:
            names.append(name)
    return names


def _add_node(
    conn: sqlite3.Connection, thread_id: str, ns: str, checkpoint_id: str, node: str
) -> None:
    key = (thread_id, ns, checkpoint_id)
    row = conn.execute(
        "SELECT nodes FROM trajectory WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        key,
    ).fetchone()
    if row is None:
        return
    nodes = json.loads(row[0] or "[]")
    if node not in nodes:
        nodes.append(node)
        conn.execute(
            "UPDATE trajectory SET nodes = ? WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND checkpoint_id = ?",
            (json.dumps(nodes), *key),
        )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
