"""Writing a checkpoint or a task's writes: ``prepare_*`` serialize outside any lock, ``store_*``
run in one short write transaction and read what they build on from the database itself, so
what they store is right whatever order LangGraph saves in and whoever wrote meanwhile: a list
is a delta of its parent version if that is stored (:mod:`._blobs`); a step's nodes come from
the writes at the parent (writes saved after the next checkpoint name their node on it); a
checkpoint or value put again with the same id replaces the old row.

The writes at a checkpoint and the checkpoint of the step that follows it each read whether
the other is stored yet: on PostgreSQL, where both may run at once, they take turns on the
step's lock (:func:`_lock_step`), so the one that runs second sees the first."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..secrets import may_hold_secrets, strip_secrets
from . import _texts
from ._blobs import BaseInfo, encode_channel
from ._db import AT_CHECKPOINT, Tx, Unpack
from ._lease import LEASE_COLUMNS, LEASE_WIDTH, Admit, lease_from
from ._read import stored_values
from ._schema import mark, upsert_sql
from ._trajectory import duration_ms, error_text, node_from_task_path, transition_row

__all__ = ["prepare_put", "prepare_writes", "store_put", "store_writes"]

_ERROR = "__error__"
_TASKS = "__pregel_tasks"
_PUSH = re.compile(r"~__pregel_push, (\d+)(?:,|$)")
"""A ``Send`` task's path: the index of its packet in ``__pregel_tasks``."""


@dataclass(slots=True, kw_only=True)
class PutRecord:
    """A checkpoint, serialized, ready to be stored."""

    thread_id: str
    ns: str
    checkpoint_id: str
    parent_id: str | None
    ts: str
    step: int | None
    source: str | None
    run_id: str | None
    skeleton: bytes
    """The checkpoint without its id and values (msgpack)."""
    metadata_json: str
    values: list[tuple[str, str, Any, tuple[str, bytes] | None]] = field(default_factory=list)
    """``(channel, version, value, serialized)`` for each channel in ``new_versions``
    (serialized ``None``: the value is inline in the skeleton)."""
    texts: dict[bytes, str] = field(default_factory=dict)
    """The long strings the values refer to (see :mod:`._texts`)."""


@dataclass(slots=True, kw_only=True)
class WritesRecord:
    """One task's writes, serialized, ready to be stored."""

    thread_id: str
    ns: str
    checkpoint_id: str
    task_id: str
    task_path: str
    rows: list[tuple[int, str, str, bytes, str | None]] = field(default_factory=list)
    """``(idx, channel, type, value, error text)``; ``idx < 0``: a special channel."""
    texts: dict[bytes, str] = field(default_factory=dict)


def prepare_put(
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> PutRecord:
    """Serialize ``checkpoint``; only the channels in ``new_versions`` get value rows (one
    in ``new_versions`` without a value gets none: LangGraph reads it as emptied)."""
    conf = config["configurable"]
    merged = dict(get_checkpoint_metadata(config, metadata))
    merged.pop("writes", None)
    values = checkpoint["channel_values"]
    shape = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
    inline = {ch: v for ch, v in values.items() if _is_small_scalar(v)}
    if inline:
        shape["channel_values"] = inline
    step = merged.get("step")
    meta = _json_text(merged)  # secrets stripped: scanned as text, copied only if needed
    record = PutRecord(
        thread_id=str(conf["thread_id"]),
        ns=conf.get("checkpoint_ns", ""),
        checkpoint_id=checkpoint["id"],
        parent_id=conf.get("checkpoint_id"),
        ts=checkpoint["ts"],
        step=step if isinstance(step, int) and not isinstance(step, bool) else None,
        source=None if merged.get("source") is None else str(merged["source"]),
        run_id=None if merged.get("run_id") is None else str(merged["run_id"]),
        skeleton=serde.dumps_typed(shape)[1],
        metadata_json=_json_text(strip_secrets(merged)) if may_hold_secrets(meta) else meta,
    )
    for ch, ver in new_versions.items():
        if ch in values:
            typed = None if ch in inline else _texts.dumps(serde, values[ch], record.texts)
            record.values.append((ch, str(ver), values[ch], typed))
    return record


def _is_small_scalar(value: Any) -> bool:
    """Whether a channel value is kept inline in the checkpoint's skeleton (no value row)."""
    kind = type(value)
    if kind is int:
        return bool(-(2**63) <= value < 2**64)
    return value is None or kind in (bool, float) or (kind is str and len(value) <= 256)


def prepare_writes(
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> WritesRecord:
    """Serialize a task's writes (error texts have secrets removed first)."""
    conf = config["configurable"]
    record = WritesRecord(
        thread_id=str(conf["thread_id"]),
        ns=conf.get("checkpoint_ns", ""),
        checkpoint_id=str(conf["checkpoint_id"]),
        task_id=task_id,
        task_path=task_path,
    )
    for i, (channel, value) in enumerate(writes):
        error = None
        if channel == _ERROR:
            error = error_text(value)
            if isinstance(value, str):
                value = error
        type_, data = _texts.dumps(serde, value, record.texts)
        record.rows.append((WRITES_IDX_MAP.get(channel, i), channel, type_, data, error))
    return record


def store_put(tx: Tx, rec: PutRecord, unpack: Unpack, snapshot_every: int, admit: Admit) -> None:
    """Store ``rec`` on top of its parent as stored now (inside a write transaction): one
    query reads the thread's lease, the parent and the writes of the step that ends here."""
    key = (rec.thread_id, rec.ns)
    _lock_step(tx, (*key, rec.parent_id or ""))
    rows = tx.all(
        f"SELECT {LEASE_COLUMNS}, c.created_at, c.checkpoint, w.node, w.task_path "
        f"FROM {lease_from(tx.dialect)} LEFT JOIN checkpoints AS c ON c.thread_id = ? AND "
        "c.checkpoint_ns = ? AND c.checkpoint_id = ? LEFT JOIN checkpoint_writes AS w ON "
        "w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns AND "
        "w.checkpoint_id = c.checkpoint_id ORDER BY w.task_path, w.task_id, w.idx",
        (rec.thread_id, rec.thread_id, *key, rec.parent_id),
    )
    n = LEASE_WIDTH
    admit(tx, rec.thread_id, rows[0][:n])
    parent = rows[0][n : n + 2] if rows[0][n] is not None else None
    lists = [ch for ch, _, value, _ in rec.values if isinstance(value, list)]
    before: dict[str, str] = {}  # list channels: their version at the parent
    if parent is not None and lists:  # (a write's store is migrated: skeletons are whole)
        versions = unpack(bytes(parent[1]))["channel_versions"]
        before = {ch: str(versions[ch]) for ch in lists if ch in versions}
    bases = _bases(tx, key, list(before.items()))
    blob_rows: list[tuple[Any, ...]] = []
    changed: dict[str, Any] = {}
    appended: dict[str, list[Any]] = {}
    for ch, version, value, typed in rec.values:
        if typed is None:  # inline in the skeleton
            changed[ch] = value
            continue
        base = bases.get((ch, before[ch])) if before.get(ch, version) != version else None
        row, added = encode_channel(value, typed, base, snapshot_every)
        blob_rows.append((*key, ch, version, *row))
        if added is None and isinstance(value, list) and ch not in before:
            added = value  # a list channel's first value: every item is new
        if added is None:
            changed[ch] = value
        else:
            appended[ch] = added
    writes = [r[n + 2 :] for r in rows if r[n + 3] is not None]  # (node, task_path) at the parent
    nodes = _nodes(tx, unpack, (*key, rec.parent_id or ""), writes)
    derived = transition_row(nodes, changed, appended)
    _texts.store(tx, rec.thread_id, rec.texts)
    tx.many(upsert_sql(tx.dialect, "checkpoint_blobs"), blob_rows)
    nodes_json, *transition = derived
    took = duration_ms(parent[0] if parent else None, rec.ts)
    ids = (*key, rec.checkpoint_id, rec.parent_id, rec.run_id, rec.step, rec.source, rec.ts)
    stored = (rec.skeleton, rec.metadata_json, nodes_json, took, *transition)
    tx.run(upsert_sql(tx.dialect, "checkpoints"), (*ids, *stored))


def _bases(
    tx: Tx, key: tuple[str, str], wanted: list[tuple[str, str]]
) -> dict[tuple[str, str], BaseInfo]:
    """What the stored list versions ``(channel, version)`` a new value may extend are; on
    PostgreSQL they stay locked against deletion until the transaction ends."""
    if not wanted:
        return {}
    match = " OR ".join(["(channel = ? AND version = ?)"] * len(wanted))
    lock = " FOR SHARE" if tx.dialect == "postgres" else ""
    rows = tx.all(
        "SELECT channel, version, items, nbytes, digest, depth FROM checkpoint_blobs "
        f"WHERE thread_id = ? AND checkpoint_ns = ? AND items IS NOT NULL AND ({match}){lock}",
        (*key, *(part for pair in wanted for part in pair)),
    )
    return {
        (ch, ver): BaseInfo(ver, items, nbytes, bytes(digest), depth or 0)
        for ch, ver, items, nbytes, digest, depth in rows
        if digest is not None
    }


def _nodes(
    tx: Tx, unpack: Unpack, key: tuple[str, str, str], writes: list[tuple[Any, ...]]
) -> list[str]:
    """The nodes of the tasks that wrote at a checkpoint (``(node, task_path)`` rows in task
    order); a ``Send`` task's writes saved before their checkpoint get their node here."""
    paths: dict[str, Any] = {}
    for node, path in writes:
        paths.setdefault(path, node)  # a task's writes share its path and node
    names: list[str] = []
    for path, node in paths.items():
        if node is None and (node := _pushed_node(tx, unpack, key, path)) is not None:
            sql = f"UPDATE checkpoint_writes SET node = ? WHERE {AT_CHECKPOINT} AND task_path = ?"
            tx.run(sql, (node, *key, path))
        if node is not None and node not in names:
            names.append(node)
    return names


def store_writes(tx: Tx, rec: WritesRecord, unpack: Unpack, admit: Admit) -> None:
    """Store a task's writes (special channels overwrite, others are kept if present); one
    query reads the lease and a checkpoint the step saved before them, which gets the node."""
    key = (rec.thread_id, rec.ns, rec.checkpoint_id)
    _lock_step(tx, key)
    rows = tx.all(
        f"SELECT {LEASE_COLUMNS}, c.checkpoint_id, c.nodes FROM {lease_from(tx.dialect)} "
        "LEFT JOIN checkpoints AS c ON c.thread_id = ? AND c.checkpoint_ns = ? AND "
        "c.checkpoint_id > ? AND c.parent_checkpoint_id = ? AND coalesce(c.source, 'loop') = 'loop'",
        (rec.thread_id, rec.thread_id, *key, rec.checkpoint_id),
    )
    admit(tx, rec.thread_id, rows[0][:LEASE_WIDTH])
    node = node_from_task_path(rec.task_path) or _pushed_node(tx, unpack, key, rec.task_path)
    now = datetime.now(UTC).isoformat()
    _texts.store(tx, rec.thread_id, rec.texts)
    for special in (False, True):  # special channels (idx < 0) overwrite, others are kept
        batch = [
            (*key, rec.task_id, idx, channel, type_, data, rec.task_path, node, error, now)
            for idx, channel, type_, data, error in rec.rows
            if (idx < 0) == special
        ]
        tx.many(upsert_sql(tx.dialect, "checkpoint_writes", replace=special), batch)
    sql = f"UPDATE checkpoints SET nodes = {mark(tx.dialect, 'nodes')} WHERE {AT_CHECKPOINT}"
    children = (r[LEASE_WIDTH:] for r in rows if r[LEASE_WIDTH] is not None and node is not None)
    for cid, stored in children:
        if node not in (names := tx.json(stored) or []):
            tx.run(sql, (_json_text([*names, node]), *key[:2], cid))


def _lock_step(tx: Tx, key: tuple[str, str, str]) -> None:
    """PostgreSQL: wait for, and then hold off until this transaction ends, every other write
    of the step that starts at checkpoint ``key``: its tasks' writes and the checkpoint it
    ends in. Each reads what the others stored (a checkpoint its step's nodes, writes the
    checkpoint to name their node on) in statements that follow, which see what committed
    before them; run at once, neither would see the other, and the step would keep no nodes.
    (SQLite's write transactions already run one at a time.) Taken before the thread's
    shared lock (:func:`._lease.lease_from`), which retention takes alone: no cycle."""
    if tx.dialect == "postgres":
        tx.one("SELECT pg_advisory_xact_lock(hashtextextended(?, 1))", ("\x1f".join(key),))


def _pushed_node(tx: Tx, unpack: Unpack, key: tuple[str, str, str], task_path: str) -> str | None:
    """A ``Send`` task's node: the ``node`` of its packet in the checkpoint's tasks value."""
    if (push := _PUSH.match(task_path)) is None:
        return None
    row = tx.one(f"SELECT checkpoint FROM checkpoints WHERE {AT_CHECKPOINT}", key)
    if row is None:
        return None
    version = unpack(bytes(row[0]))["channel_versions"].get(_TASKS)
    if version is None:
        return None
    wanted = (_TASKS, str(version))
    typed = stored_values(tx, *key[:2], [wanted]).get(wanted)
    packets = unpack(typed[1]) if typed is not None and typed[0] == "msgpack" else None
    if not isinstance(packets, list) or (index := int(push[1])) >= len(packets):
        return None
    node = getattr(packets[index], "node", None)
    return node if isinstance(node, str) else None


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value, ensure_ascii=False, default=str)
