"""Reading and migrating stores written by schema 1 and 2 (aworld-graph 0.1 on SQLite).

Schema 2 could store a checkpoint's skeleton (the checkpoint without its values) as what
changed from its parent's: ``0xC1`` (a byte msgpack never uses), then the msgpack of
``{"rest", "cv", "cv-", "vs", "vs-"}`` (the other fields, channel versions and per-node seen
versions set and removed). Such a file reads as it is (:func:`skeleton`); the first write
migrates it (:func:`store_skeletons_whole`).
"""

from __future__ import annotations

from typing import Any

from ..errors import RuntimeFailure
from ._db import AT_CHECKPOINT, Tx, Unpack
from ._trajectory import error_text, node_from_task_path

__all__ = ["skeleton", "store_skeletons_whole", "name_write_nodes"]

_ANCESTORS = (
    "WITH RECURSIVE up(id, parent, blob) AS (SELECT checkpoint_id, parent_checkpoint_id, "
    f"checkpoint FROM checkpoints WHERE {AT_CHECKPOINT} UNION SELECT c.checkpoint_id, "
    "c.parent_checkpoint_id, c.checkpoint FROM up JOIN checkpoints AS c ON c.thread_id = ? "
    "AND c.checkpoint_ns = ? AND c.checkpoint_id = up.parent WHERE substr(up.blob, 1, 1) = "
    "x'c1') SELECT id, parent, blob FROM up"
)


def skeleton(
    tx: Tx, unpack: Unpack, thread_id: str, ns: str, cid: str, blob: bytes
) -> dict[str, Any]:
    """A stored skeleton, decoded (a schema-2 delta read through its chain)."""
    blob = bytes(blob)
    if _is_delta(blob):
        return _resolve(tx, thread_id, ns, cid, unpack)
    return unpack(blob)  # type: ignore[no-any-return]


def _is_delta(blob: bytes) -> bool:
    return blob[:1] == b"\xc1"


def _apply(base: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    cv = dict(base.get("channel_versions") or {})
    for key in delta.get("cv-", ()):
        cv.pop(key, None)
    cv.update(delta.get("cv") or {})
    vs = {k: dict(v) for k, v in (base.get("versions_seen") or {}).items()}
    for key in delta.get("vs-", ()):
        vs.pop(key, None)
    vs.update(delta.get("vs") or {})
    return {**(delta.get("rest") or {}), "channel_versions": cv, "versions_seen": vs}


def _resolve(tx: Tx, thread_id: str, ns: str, checkpoint_id: str, unpack: Unpack) -> dict[str, Any]:
    """The whole skeleton of a checkpoint stored as a delta (its chain read in one query)."""
    rows: dict[str | None, tuple[str | None, bytes]] = {
        cid: (parent, bytes(blob))
        for cid, parent, blob in tx.all(_ANCESTORS, (thread_id, ns, checkpoint_id, thread_id, ns))
    }
    chain: list[str | None] = []
    current: str | None = checkpoint_id
    while current in rows and _is_delta(rows[current][1]) and current not in chain:
        chain.append(current)
        current = rows[current][0]
    if current not in rows or _is_delta(rows[current][1]):
        raise RuntimeFailure(
            f"checkpoint {checkpoint_id} of thread {thread_id!r} is stored as a delta of "
            f"checkpoint {current}, which is missing: the file was changed outside "
            "aworld-graph. TrajectorySaver.delete_thread removes the thread"
        )
    skeleton = unpack(rows[current][1])
    for cid in reversed(chain):
        skeleton = _apply(skeleton, unpack(rows[cid][1][1:]))
    return skeleton  # type: ignore[no-any-return]


def store_skeletons_whole(tx: Tx, serde: Any) -> None:
    """Rewrite every delta skeleton whole (oldest first, so each parent is whole already)."""
    unpack: Unpack = lambda data: serde.loads_typed(("msgpack", data))  # noqa: E731
    rows = tx.all(
        "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints "
        "WHERE substr(checkpoint, 1, 1) = x'c1' ORDER BY thread_id, checkpoint_ns, checkpoint_id"
    )
    for thread_id, ns, cid in rows:
        whole = serde.dumps_typed(_resolve(tx, thread_id, ns, cid, unpack))[1]
        sql = f"UPDATE checkpoints SET checkpoint = ? WHERE {AT_CHECKPOINT}"
        tx.run(sql, (whole, thread_id, ns, cid))


def name_write_nodes(tx: Tx, serde: Any) -> None:
    """Fill the columns schema 3 added to ``checkpoint_writes`` for rows written before."""
    for thread_id, ns, cid, task_id, idx, channel, type_, value, path, created in tx.all(
        "SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel, "
        "w.type, w.value, w.task_path, c.created_at FROM checkpoint_writes AS w "
        "LEFT JOIN checkpoints AS c ON c.thread_id = w.thread_id AND "
        "c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id "
        "WHERE w.node IS NULL"
    ):
        error = None
        if channel == "__error__":
            try:
                error = error_text(serde.loads_typed((type_, value)))
            except Exception as exc:  # noqa: BLE001 - kept readable, named as unreadable
                error = f"(error value unreadable: {type(exc).__name__})"
        tx.run(
            "UPDATE checkpoint_writes SET node = ?, error = ?, created_at = ? "
            f"WHERE {AT_CHECKPOINT} AND task_id = ? AND idx = ?",
            (node_from_task_path(path or ""), error, created, thread_id, ns, cid, task_id, idx),
        )
