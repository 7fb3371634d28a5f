"""Writing checkpoints and pending writes, many at a time.

``prepare_put`` / ``prepare_writes`` serialize in the caller's thread and return plain
records (:func:`derive_early` also works out a checkpoint's rows there when its parent is
cached). Every row goes into the temporary view ``aworld_batch``, whose ``INSTEAD OF``
trigger routes it by ``kind`` to its table, so a whole batch is one multi-row INSERT: alone
when nothing needs reading (``apply_batch.one_statement``), else inside a transaction after
the reads (:func:`apply_batch`). The writer thread hands the GIL back and forth once per
statement, not once per row or table. A batch of a task's writes alone goes straight into
``checkpoint_writes``. Triggers on the view refuse a delta (a list value's or a checkpoint
skeleton's) whose base is no longer stored, and the plain INSERT of a checkpoint refuses an
id stored already; :func:`_repair` then works the batch out again from what is stored.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson
from langgraph.checkpoint.base import WRITES_IDX_MAP, ChannelVersions, Checkpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from ._blobs import DELTA, BaseInfo, BlobRow, encode_channel
from ._read import msgpack_loader
from ._retention import keep_chains
from ._secrets import may_hold_secrets, strip_secrets
from ._skeleton import MIN_ENTRIES, resolve
from ._skeleton import encode as encode_skeleton
from ._skeleton import own as own_skeleton
from ._store import Head, Store
from ._trajectory import Transition, duration_ms, node_from_task_path, transition_row

__all__ = [
    "PutRecord",
    "WritesRecord",
    "apply_batch",
    "derive_early",
    "own_shape",
    "prepare_put",
    "prepare_writes",
]

_BLOB_COLUMNS = (
    "thread_id, checkpoint_ns, channel, version, kind, type, value, base_version, items, "
    "nbytes, digest, depth"
)
_CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, source, "
    "created_at, checkpoint, metadata, duration_ms, nodes, changes, llm_usage, tool_names, reward"
)
_WRITE_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path"
)


@dataclass(slots=True)
class PutRecord:
    """A checkpoint, serialized, waiting to be stored."""

    thread_id: str
    ns: str
    parent_id: str | None
    checkpoint_id: str
    ts: str
    step: int | None
    source: str | None
    run_id: str | None
    shape: dict[str, Any]
    """The checkpoint without id and values (stored whole or as a delta of its parent's,
    see :mod:`._skeleton`)."""
    whole: bytes | None
    """``shape`` serialized, when it is too small to be stored as a delta."""
    metadata_json: str
    versions: dict[str, Any]
    """The checkpoint's channel versions."""
    values: list[tuple[str, str, Any, tuple[str, bytes]]]
    """``(channel, version, value, serialized)`` for each channel in ``new_versions``."""
    snapshot_every: int
    serde: SerializerProtocol
    """Decodes the parent's skeleton when it must be read back."""
    derived: Derived | None = None
    """The rows to insert, worked out by :func:`derive_early` when the parent is cached."""
    named: int = 0
    """How many nodes had written on top of the parent when its rows were worked out."""
    remembered: bool = False
    """Its head was cached when it was queued (a deferred put): the commit that stores it
    must not cache it again over a later checkpoint's."""


@dataclass(slots=True)
class WritesRecord:
    """One task's writes, serialized, waiting to be stored."""

    thread_id: str
    ns: str
    checkpoint_id: str
    node: str | None
    """The task's node, when its path names one."""
    regular: list[tuple[Any, ...]] = field(default_factory=list)
    """Rows inserted only if absent."""
    special: list[tuple[Any, ...]] = field(default_factory=list)
    """Rows of special channels (error, interrupt…), which overwrite."""


def prepare_put(
    serde: SerializerProtocol,
    *,
    thread_id: str,
    ns: str,
    parent_id: str | None,
    checkpoint: Checkpoint,
    metadata: dict[str, Any],
    new_versions: ChannelVersions,
    snapshot_every: int,
) -> PutRecord:
    """Serialize ``checkpoint``; only the channels in ``new_versions`` get value rows.

    Channels in ``new_versions`` without a value get no row: reading finds none and leaves
    the channel out, as LangGraph expects of an emptied channel.
    """
    values = checkpoint["channel_values"]
    versions = dict(checkpoint["channel_versions"])
    shape = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
    seen = shape.get("versions_seen")
    whole: bytes | None = None
    if not isinstance(seen, dict) or len(versions) + len(seen) < MIN_ENTRIES:
        whole = serde.dumps_typed(shape)[1]  # always stored whole: serialized now
    # else worked out by _skeleton.encode, which keeps its own copy of the maps: at once in
    # derive_early, or after own_shape() when it has to wait for the writer
    step = metadata.get("step")
    return PutRecord(
        thread_id=thread_id,
        ns=ns,
        parent_id=parent_id,
        checkpoint_id=checkpoint["id"],
        ts=checkpoint["ts"],
        step=step if isinstance(step, int) and not isinstance(step, bool) else None,
        source=_text(metadata.get("source")),
        run_id=_text(metadata.get("run_id")),
        shape=shape,
        whole=whole,
        metadata_json=_metadata_json(metadata),
        versions=versions,
        values=[
            (ch, str(ver), values[ch], serde.dumps_typed(values[ch]))
            for ch, ver in new_versions.items()
            if ch in values
        ],
        snapshot_every=snapshot_every,
        serde=serde,
    )


def prepare_writes(
    serde: SerializerProtocol,
    *,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> WritesRecord:
    """Serialize a task's writes (special channels overwrite, others insert-if-absent)."""
    record = WritesRecord(thread_id, ns, checkpoint_id, node_from_task_path(task_path))
    for i, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, i)
        type_, data = serde.dumps_typed(value)
        row = (thread_id, ns, checkpoint_id, task_id, idx, channel, type_, data, task_path)
        (record.special if idx < 0 else record.regular).append(row)
    return record


def apply_batch(
    store: Store, conn: sqlite3.Connection, records: list[PutRecord | WritesRecord]
) -> list[None]:
    """Store ``records`` (inside the caller's transaction), reading back what the early
    rows of a checkpoint could not be worked out without. Writes go first, so a checkpoint
    stored in the same batch sees the writes of the step that produced it."""
    writes = [r for r in records if isinstance(r, WritesRecord)]
    puts = [r for r in records if isinstance(r, PutRecord)]
    rows = _write_rows(store, writes)
    if puts:
        rows += _store_puts(store, conn, puts)
    for attempt in range(3):
        try:
            _insert_rows(conn, rows)
            break
        except sqlite3.IntegrityError as exc:
            if attempt == 2 or not _repair(store, conn, puts, exc):
                raise
            rows = _write_rows(store, writes) + _store_puts(store, conn, puts)
    return [None] * len(records)


_STALE = "aworld-graph: delta base gone"
"""The batch trigger's error when a row would be a delta of a row no longer stored."""
_REPLACES = "UNIQUE constraint failed: checkpoints."
"""The error of a checkpoint id put again (LangGraph never does; a direct caller may):
checkpoints stored as deltas of it must be stored whole first, then it replaces the row."""


def _repair(
    store: Store, conn: sqlite3.Connection | None, puts: list[PutRecord], exc: Exception
) -> bool:
    """Whether the batch can be stored after all, once this has dealt with ``exc``.

    A delta worked out against rows another saver or process has deleted since this process
    cached them: forget them, and the puts are worked out again from what is stored (whole
    where the bases are gone). A checkpoint put again while others are deltas of it (only
    inside a transaction, ``conn``): those are stored whole first, and the old row goes."""
    if _STALE in str(exc):
        store.forget({p.thread_id for p in puts})
        for p in puts:
            p.derived, p.remembered = None, False
        return True
    if _REPLACES in str(exc) and conn is not None:
        for p in puts:  # then the old row goes, and the put stores the new one in its place
            keep_chains(conn, p.serde, p.thread_id, p.ns, {p.checkpoint_id}.__contains__)
            conn.execute(
                "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
                "AND checkpoint_id = ?",
                (p.thread_id, p.ns, p.checkpoint_id),
            )
        return True
    return False


_BATCH_VIEW = "aworld_batch"
_BATCH_WIDTH = 17  # kind + the widest row (checkpoints)


def _batch_view_sql() -> list[str]:
    """A temporary view whose INSTEAD OF trigger routes each inserted row to its table."""
    cols = ", ".join(f"NULL AS c{i}" for i in range(1, _BATCH_WIDTH))

    def route(verb: str, table: str, columns: str, kind: int) -> str:
        width = len(columns.split(","))
        values = ", ".join(f"NEW.c{i}" for i in range(1, width + 1))
        return f"{verb} INTO {table} ({columns}) SELECT {values} WHERE NEW.kind = {kind};"

    # a delta (skeleton: kind 4 starting 0xC1; list value: kind 3 of kind DELTA) is stored
    # only while what it builds on is: another saver or process may have deleted it since
    # this process cached it. Checked by triggers that run for delta rows only (RAISE undoes
    # the whole statement, whichever trigger fires first); a checkpoint put again fails the
    # plain INSERT of kind 4 (its id is stored), see _repair
    def guard(name: str, when: str, missing: str) -> str:
        return (
            f"CREATE TEMP TRIGGER IF NOT EXISTS {_BATCH_VIEW}_{name} INSTEAD OF INSERT ON "
            f"{_BATCH_VIEW} WHEN {when} BEGIN SELECT RAISE(ABORT, '{_STALE}') WHERE NOT EXISTS "
            f"(SELECT 1 FROM {missing}); END"
        )

    return [
        f"CREATE TEMP VIEW IF NOT EXISTS {_BATCH_VIEW} AS SELECT NULL AS kind, {cols}",
        f"CREATE TEMP TRIGGER IF NOT EXISTS {_BATCH_VIEW}_route INSTEAD OF INSERT ON "
        f"{_BATCH_VIEW} BEGIN "
        + route("INSERT OR IGNORE", "checkpoint_writes", _WRITE_COLUMNS, 1)
        + route("INSERT OR REPLACE", "checkpoint_writes", _WRITE_COLUMNS, 2)
        + route("INSERT OR REPLACE", "checkpoint_blobs", _BLOB_COLUMNS, 3)
        + route("INSERT", "checkpoints", _CHECKPOINT_COLUMNS, 4)
        # kind 5: name node c4 on checkpoint (c1, c2, c3), stored before the writes showing it ran
        + "UPDATE checkpoints SET nodes = json_insert(coalesce(nodes, '[]'), '$[#]', NEW.c4) "
        "WHERE NEW.kind = 5 AND thread_id = NEW.c1 AND checkpoint_ns = NEW.c2 "
        "AND checkpoint_id = NEW.c3 AND NOT EXISTS "
        "(SELECT 1 FROM json_each(coalesce(nodes, '[]')) WHERE value = NEW.c4);" + " END",
        guard(
            "skeleton_base",
            "NEW.kind = 4 AND substr(NEW.c9, 1, 1) = x'c1'",
            "checkpoints WHERE thread_id = NEW.c1 AND checkpoint_ns = NEW.c2 "
            "AND checkpoint_id = NEW.c4",
        ),
        guard(
            "list_base",
            f"NEW.kind = 3 AND NEW.c5 = {DELTA}",
            "checkpoint_blobs WHERE thread_id = NEW.c1 AND checkpoint_ns = NEW.c2 "
            "AND version = NEW.c8 AND channel = NEW.c3",
        ),
    ]


def _one_statement(
    store: Store, conn: sqlite3.Connection, records: list[PutRecord | WritesRecord]
) -> list[None] | None:
    """Store ``records`` with a single INSERT (one implicit transaction), when they need no
    reads: every checkpoint's rows were worked out early. ``None`` when they do, or do not
    fit one statement (the caller then runs :func:`apply_batch` in a transaction)."""
    puts = [r for r in records if isinstance(r, PutRecord)]
    if any(p.derived is None for p in puts):
        return None
    rows = _write_rows(store, [r for r in records if isinstance(r, WritesRecord)])
    for p in puts:
        assert p.derived is not None
        rows += _derived_rows(p.derived) + _late_names(store, p)
    if not rows or len(rows) > _max_rows(conn, _BATCH_WIDTH):
        return None
    try:
        _insert_rows(conn, rows)
    except sqlite3.IntegrityError as exc:
        # a stale delta base is forgotten here; an id put again is mended by apply_batch,
        # which stores the batch in a transaction instead
        if _REPLACES not in str(exc) and not _repair(store, None, puts, exc):
            raise
        return None
    for p in puts:
        assert p.derived is not None
        if not p.remembered:
            store.remember(p.thread_id, p.ns, p.parent_id, p.derived[2])
    return [None] * len(records)


def _write_rows(store: Store, writes: list[WritesRecord]) -> list[tuple[Any, ...]]:
    """Batch-view rows of tasks' writes, and of nodes to name on checkpoints already stored
    on top of the checkpoint they were written at (LangGraph may save a step's writes after
    the checkpoint that follows them)."""
    rows: list[tuple[Any, ...]] = []
    pad = (None,) * (_BATCH_WIDTH - 1 - 9)
    for w in writes:
        rows.extend((1, *row, *pad) for row in w.regular)
        rows.extend((2, *row, *pad) for row in w.special)
        if w.node is not None and (child := store.child(w.thread_id, w.ns, w.checkpoint_id)):
            rows.append((5, w.thread_id, w.ns, child, w.node, *(None,) * (_BATCH_WIDTH - 5)))
    return rows


def _late_names(store: Store, p: PutRecord) -> list[tuple[Any, ...]]:
    """Rows naming on ``p``'s checkpoint the nodes whose writes on top of its parent were
    noted after its rows were worked out (saved from another thread meanwhile)."""
    if not p.parent_id:
        return []
    names = store.nodes_at(p.thread_id, p.ns, p.parent_id)
    if len(names) <= p.named:
        return []
    pad = (None,) * (_BATCH_WIDTH - 5)
    return [(5, p.thread_id, p.ns, p.checkpoint_id, name, *pad) for name in names]


def _derived_rows(derived: Derived) -> list[tuple[Any, ...]]:
    blob_rows, checkpoint_row, _ = derived
    pad = (None,) * (_BATCH_WIDTH - 1 - 12)
    return [*((3, *row, *pad) for row in blob_rows), (4, *checkpoint_row)]


_DIRECT = {
    1: ("INSERT OR IGNORE", "checkpoint_writes", _WRITE_COLUMNS),
    2: ("INSERT OR REPLACE", "checkpoint_writes", _WRITE_COLUMNS),
}
"""Kind → how rows of that kind alone are inserted straight into their table (a task's
writes; checkpoint and value rows go through the view, whose trigger checks delta bases)."""


def _insert_rows(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """Insert batch-view rows, a statement per chunk (the view is created on first use).

    Rows of one kind only (a task's writes, the usual sync ``put_writes``) go straight into
    their table: the view's trigger costs ~4 µs a row."""
    kinds = {row[0] for row in rows}
    if len(kinds) == 1 and (direct := _DIRECT.get(next(iter(kinds)))) is not None:
        verb, table, columns = direct
        width = len(columns.split(","))
        _insert(conn, verb, table, columns, width, [row[1 : width + 1] for row in rows])
        return
    try:
        _insert(conn, "INSERT", _BATCH_VIEW, "kind, " + _BATCH_COLUMNS, _BATCH_WIDTH, rows)
    except sqlite3.OperationalError as exc:
        if _BATCH_VIEW not in str(exc):
            raise
        for statement in _batch_view_sql():
            conn.execute(statement)
        _insert(conn, "INSERT", _BATCH_VIEW, "kind, " + _BATCH_COLUMNS, _BATCH_WIDTH, rows)


_BATCH_COLUMNS = ", ".join(f"c{i}" for i in range(1, _BATCH_WIDTH))
apply_batch.one_statement = _one_statement  # type: ignore[attr-defined]


def _store_puts(
    store: Store, conn: sqlite3.Connection, puts: list[PutRecord]
) -> list[tuple[Any, ...]]:
    """Batch-view rows of ``puts``, reading parents, list bases and nodes that were not
    known when they were put."""
    parents: dict[tuple[str, str, str], Head] = {}
    unknown: list[tuple[str, str, str]] = []
    in_batch = {(p.thread_id, p.ns, p.checkpoint_id) for p in puts}
    for p in puts:
        if p.derived is None and p.parent_id and (p.thread_id, p.ns, p.parent_id) not in in_batch:
            head = store.head(p.thread_id, p.ns)
            if head is not None and head.checkpoint_id == p.parent_id:
                parents[(p.thread_id, p.ns, p.parent_id)] = head
            else:
                unknown.append((p.thread_id, p.ns, p.parent_id))
    found: dict[tuple[str, str], dict[str, tuple[str | None, bytes]]] = {}
    created_at: dict[tuple[str, str, str], str] = {}
    for t, ns, cid, parent_id, skeleton, created in _select_keys(
        conn,
        "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, "
        "c.checkpoint, c.created_at FROM k JOIN checkpoints AS c ON c.thread_id = k.a "
        "AND c.checkpoint_ns = k.b AND c.checkpoint_id = k.c",
        unknown,
    ):
        found.setdefault((t, ns), {})[cid] = (parent_id, skeleton)
        created_at[(t, ns, cid)] = created
    unpack = msgpack_loader(puts[0].serde)
    for (t, ns), stored in found.items():
        for cid, shape in resolve(conn, t, ns, stored, unpack, list(stored)).items():
            parents[(t, ns, cid)] = Head(cid, shape["channel_versions"], created_at[(t, ns, cid)])
    # the stored list versions each new list value may extend
    wanted: list[tuple[str, str, str, str]] = []
    for p in puts:
        parent = parents.get((p.thread_id, p.ns, p.parent_id or ""))
        if parent is None or p.derived is not None:
            continue
        for ch, version, value, _ in p.values:
            base = parent.versions.get(ch)
            if isinstance(value, list) and base is not None and str(base) != version:
                wanted.append((p.thread_id, p.ns, ch, str(base)))
    bases: dict[tuple[str, str, str, str], BaseInfo] = {}
    for t, ns, ch, ver, items, nbytes, digest, depth in _select_keys(
        conn,
        "SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.items, b.nbytes, "
        "b.digest, b.depth FROM k JOIN checkpoint_blobs AS b ON b.thread_id = k.a AND "
        "b.checkpoint_ns = k.b AND b.channel = k.c AND b.version = k.d "
        "WHERE b.items IS NOT NULL AND b.digest IS NOT NULL",
        wanted,
    ):
        bases[(t, ns, ch, ver)] = BaseInfo(ver, items, nbytes, digest, depth or 0)
    # nodes that ran: noted in memory when this process saved their writes (maybe in this
    # very batch, so not readable yet), and for parents it did not write, read back too
    nodes = {
        (p.thread_id, p.ns, p.parent_id): store.nodes_at(p.thread_id, p.ns, p.parent_id)
        for p in puts
        if p.derived is None and p.parent_id
    }
    for t, ns, cid, path in _select_keys(
        conn,
        "SELECT DISTINCT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_path FROM k "
        "JOIN checkpoint_writes AS w ON w.thread_id = k.a AND w.checkpoint_ns = k.b "
        "AND w.checkpoint_id = k.c ORDER BY 1, 2, 3, 4",
        unknown,
    ):
        names = nodes.setdefault((t, ns, cid), [])
        if (name := node_from_task_path(path or "")) and name not in names:
            names.append(name)
    rows: list[tuple[Any, ...]] = []
    produced: dict[tuple[str, str, str, str], BaseInfo] = {}
    for p in puts:
        derived = p.derived
        if derived is None:
            parent_key = (p.thread_id, p.ns, p.parent_id or "")

            def base_of(key: tuple[str, str, str, str]) -> BaseInfo | None:
                return produced.get(key) or bases.get(key)

            named = nodes.get(parent_key, [])
            derived = _derive(p, parents.get(parent_key), base_of, named)
            p.named = len(named)
        head = derived[2]
        rows += _derived_rows(derived) + _late_names(store, p)
        for ch, info in head.lists.items():
            produced[(p.thread_id, p.ns, ch, info.version)] = info
        if not p.remembered:
            store.remember(p.thread_id, p.ns, p.parent_id, head)
        parents[(p.thread_id, p.ns, p.checkpoint_id)] = head
    return rows


Derived = tuple[list[tuple[Any, ...]], tuple[Any, ...], Head]
"""Blob rows, the checkpoint row, and the head the checkpoint becomes."""


def own_shape(p: PutRecord) -> None:
    """Give ``p`` its own copy of the checkpoint's maps when its rows are worked out later (by
    the writer, from what is stored): the caller may change its checkpoint meanwhile."""
    if p.derived is None and p.whole is None:
        p.shape = own_skeleton(p.shape)


def derive_early(store: Store, p: PutRecord) -> None:
    """Work out ``p``'s rows now (in the caller's thread) when its parent is the head this
    process wrote last, with every list base it extends known; otherwise leave it to the
    writer, which reads what it needs from the database."""
    parent: Head | None = None
    if p.parent_id:
        parent = store.head(p.thread_id, p.ns)
        if parent is None or parent.checkpoint_id != p.parent_id:
            return
    bases: dict[tuple[str, str, str, str], BaseInfo] = {}
    for ch, version, value, _ in p.values:
        base = parent.versions.get(ch) if parent is not None else None
        if isinstance(value, list) and base is not None and str(base) != version:
            info = parent.lists.get(ch) if parent is not None else None
            if info is None or info.version != str(base):
                return
            bases[(p.thread_id, p.ns, ch, info.version)] = info
    nodes = store.nodes_at(p.thread_id, p.ns, p.parent_id) if p.parent_id else []
    p.derived, p.named = _derive(p, parent, bases.get, nodes), len(nodes)


def _derive(
    p: PutRecord,
    parent: Head | None,
    base_of: Callable[[tuple[str, str, str, str]], BaseInfo | None],
    nodes: list[str],
) -> Derived:
    """The rows that store ``p`` on top of ``parent`` (list values as deltas of theirs)."""
    blob_rows: list[tuple[Any, ...]] = []
    changed: dict[str, Any] = {}
    appended: dict[str, list[Any]] = {}
    lists: dict[str, BaseInfo] = {}
    for ch, version, value, typed in p.values:
        base_version = parent.versions.get(ch) if parent is not None else None
        base = None
        if base_version is not None and str(base_version) != version:
            base = base_of((p.thread_id, p.ns, ch, str(base_version)))
        row, added = encode_channel(ch, version, value, typed, base, p.snapshot_every)
        blob_rows.append(_blob_row(p.thread_id, p.ns, row))
        if row.digest is not None and row.items is not None and row.nbytes is not None:
            lists[ch] = BaseInfo(version, row.items, row.nbytes, row.digest, row.depth)
        if added is None and base_version is None and isinstance(value, list):
            added = value  # a list channel's first value: every item is new
        if added is None:
            changed[ch] = value
        else:
            appended[ch] = added
    derived = transition_row(Transition(nodes=nodes, changed=changed, appended=appended))
    kept: dict[str, Any] | None = None
    if p.whole is not None:
        skeleton, depth = p.whole, 0
    elif parent is not None and parent.shape is not None and p.parent_id != p.checkpoint_id:
        skeleton, depth, kept = encode_skeleton(p.serde, p.shape, parent.shape, parent.depth)
    else:
        skeleton, depth, kept = encode_skeleton(p.serde, p.shape, None, 0)
    checkpoint_row = (
        p.thread_id,
        p.ns,
        p.checkpoint_id,
        p.parent_id,
        p.run_id,
        p.step,
        p.source,
        p.ts,
        skeleton,
        p.metadata_json,
        duration_ms(parent.ts if parent else None, p.ts),
        *derived,
    )
    if parent is not None:  # list channels this step did not write keep their base
        for ch, info in parent.lists.items():
            if ch not in lists and str(p.versions.get(ch)) == info.version:
                lists[ch] = info
    head = Head(p.checkpoint_id, p.versions, p.ts, lists, kept, depth)
    return blob_rows, checkpoint_row, head


def _blob_row(thread_id: str, ns: str, r: BlobRow) -> tuple[Any, ...]:
    return (
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


def _max_rows(conn: sqlite3.Connection, width: int) -> int:
    limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(limit, 30_000) // width)


@lru_cache(maxsize=256)
def _insert_sql(verb: str, table: str, columns: str, width: int, rows: int) -> str:
    one = "(" + ",".join("?" * width) + ")"
    return f"{verb} INTO {table} ({columns}) VALUES " + ",".join([one] * rows)


def _insert(
    conn: sqlite3.Connection,
    verb: str,
    table: str,
    columns: str,
    width: int,
    rows: list[tuple[Any, ...]],
) -> None:
    step = _max_rows(conn, width)
    for start in range(0, len(rows), step):
        chunk = rows[start : start + step]
        conn.execute(
            _insert_sql(verb, table, columns, width, len(chunk)),
            [value for row in chunk for value in row],
        )


@lru_cache(maxsize=256)
def _keys_cte(width: int, rows: int) -> str:
    names = "abcd"[:width]
    one = "(" + ",".join("?" * width) + ")"
    return f"WITH k({','.join(names)}) AS (VALUES " + ",".join([one] * rows) + ") "


def _select_keys(
    conn: sqlite3.Connection, select: str, keys: Iterable[tuple[str, ...]]
) -> Iterable[tuple[Any, ...]]:
    """Run ``select`` (which reads the key table ``k(a, b, c[, d])``) for ``keys``."""
    unique = list(dict.fromkeys(keys))
    if not unique:
        return []
    width = len(unique[0])
    step = _max_rows(conn, width)
    out: list[tuple[Any, ...]] = []
    for start in range(0, len(unique), step):
        chunk = unique[start : start + step]
        out.extend(
            conn.execute(_keys_cte(width, len(chunk)) + select, [v for key in chunk for v in key])
        )
    return out


def _metadata_json(metadata: dict[str, Any]) -> str:
    """The metadata as JSON, secrets stripped (scanned as text; copied only if needed)."""
    text = _json_text(metadata)
    return _json_text(strip_secrets(metadata)) if may_hold_secrets(text) else text


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value, ensure_ascii=False, default=str)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
