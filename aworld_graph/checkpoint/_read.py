"""Turn ``checkpoints`` rows into :class:`CheckpointTuple` s with two batched queries.

For a page of checkpoint rows, one recursive query fetches every blob row they need
(delta chains included, each row once) and one query fetches all their pending writes,
ordered by task path. Nothing is queried per checkpoint.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple, PendingWrite
from langgraph.checkpoint.serde.base import SerializerProtocol

from ._blobs import DELTA, EMPTY, join_chain

try:  # orjson ships with langsmith; the stdlib parser is the fallback
    from orjson import loads as _json_loads
except ImportError:  # pragma: no cover
    _json_loads = json.loads

__all__ = ["CHECKPOINT_COLUMNS", "materialize", "load_versions"]

CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata"
)
"""Columns every query that feeds :func:`materialize` selects, in this order."""

CheckpointRow = tuple[str, str, str, str | None, bytes, str]

_BLOBS_SQL = """
WITH RECURSIVE need(t, ns, ch, ver) AS (
  SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),
         json_extract(value, '$[2]'), json_extract(value, '$[3]')
  FROM json_each(?)
), chain(t, ns, ch, ver, kind, type, value, base, items) AS (
  SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.kind, b.type, b.value,
         b.base_version, b.items
  FROM need JOIN checkpoint_blobs AS b
    ON b.thread_id = need.t AND b.checkpoint_ns = need.ns
   AND b.channel = need.ch AND b.version = need.ver
  UNION
  SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.kind, b.type, b.value,
         b.base_version, b.items
  FROM chain JOIN checkpoint_blobs AS b
    ON b.thread_id = chain.t AND b.checkpoint_ns = chain.ns
   AND b.channel = chain.ch AND b.version = chain.base
)
SELECT t, ns, ch, ver, kind, type, value, base, items FROM chain
"""

_WRITES_SQL = """
SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.type, w.value
FROM json_each(?) AS k JOIN checkpoint_writes AS w
  ON w.thread_id = json_extract(k.value, '$[0]')
 AND w.checkpoint_ns = json_extract(k.value, '$[1]')
 AND w.checkpoint_id = json_extract(k.value, '$[2]')
ORDER BY w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_path, w.task_id, w.idx
"""

BlobKey = tuple[str, str, str, str]
ChainRow = tuple[int, str | None, bytes | None, str | None, int | None]


def load_versions(serde: SerializerProtocol, skeleton: bytes) -> dict[str, Any]:
    """Decode a stored checkpoint skeleton (a checkpoint without id and values)."""
    return serde.loads_typed(("msgpack", skeleton))


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def materialize(
    conn: sqlite3.Connection, rows: Sequence[CheckpointRow], serde: SerializerProtocol
) -> list[CheckpointTuple]:
    """Full tuples (values and pending writes) for ``rows``, in the same order."""
    if not rows:
        return []
    skeletons = [load_versions(serde, row[4]) for row in rows]
    need: dict[BlobKey, None] = {}
    for row, skel in zip(rows, skeletons, strict=True):
        for ch, ver in skel["channel_versions"].items():
            need[(row[0], row[1], ch, str(ver))] = None
    chains = _fetch_blobs(conn, list(need)) if need else {}
    writes = _fetch_writes(conn, rows, serde)
    joined: dict[BlobKey, tuple[str, bytes] | None] = {}
    out: list[CheckpointTuple] = []
    for row, skel in zip(rows, skeletons, strict=True):
        thread_id, ns, checkpoint_id, parent_id, _, metadata = row
        values: dict[str, Any] = {}
        for ch, ver in skel["channel_versions"].items():
            key = (thread_id, ns, ch, str(ver))
            if key not in joined:
                joined[key] = _join(chains, key)
            typed = joined[key]
            if typed is not None:
                values[ch] = serde.loads_typed(typed)
        skel["id"] = checkpoint_id
        skel["channel_values"] = values
        out.append(
            CheckpointTuple(
                config=_config(thread_id, ns, checkpoint_id),
                checkpoint=skel,  # type: ignore[arg-type]
                metadata=_json_loads(metadata) if metadata else CheckpointMetadata(),
                parent_config=_config(thread_id, ns, parent_id) if parent_id else None,
                pending_writes=writes.get((thread_id, ns, checkpoint_id), []),
            )
        )
    return out


def _fetch_blobs(conn: sqlite3.Connection, keys: list[BlobKey]) -> dict[BlobKey, ChainRow]:
    found: dict[BlobKey, ChainRow] = {}
    for t, ns, ch, ver, kind, type_, value, base, items in conn.execute(
        _BLOBS_SQL, (json.dumps(keys),)
    ):
        found[(t, ns, ch, ver)] = (kind, type_, value, base, items)
    return found


def _join(chains: dict[BlobKey, ChainRow], key: BlobKey) -> tuple[str, bytes] | None:
    row = chains.get(key)
    if row is None or row[0] == EMPTY:
        return None
    if row[0] != DELTA:
        return row[1] or "null", row[2] or b""
    t, ns, ch, _ = key
    path: list[tuple[int, str | None, bytes | None, int | None]] = []
    while row is not None:
        path.append((row[0], row[1], row[2], row[4]))
        if row[0] != DELTA:
            break
        row = chains.get((t, ns, ch, row[3] or ""))
    if path[-1][0] == DELTA:
        raise ValueError(f"broken delta chain for channel {ch!r} (base version missing)")
    path.reverse()
    return join_chain(path)


def _fetch_writes(
    conn: sqlite3.Connection, rows: Sequence[CheckpointRow], serde: SerializerProtocol
) -> dict[tuple[str, str, str], list[PendingWrite]]:
    keys = json.dumps([[r[0], r[1], r[2]] for r in rows])
    out: dict[tuple[str, str, str], list[PendingWrite]] = {}
    for t, ns, cid, task_id, channel, type_, value in conn.execute(_WRITES_SQL, (keys,)):
        out.setdefault((t, ns, cid), []).append(
            (task_id, channel, serde.loads_typed((type_, value)))
        )
    return out
