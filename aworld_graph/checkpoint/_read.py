"""Reading checkpoints back as LangGraph ``CheckpointTuple`` s, a page at a time: per
thread/namespace, one query reads the page's rows, one every value they need with the delta
chains behind them (a recursive query), one their pending writes. Each tuple decodes its own
values, so no two share a mutable object. A schema-2 skeleton may be a delta of its parent's
(:mod:`._schema`): :func:`skeleton` reads it through its chain.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..errors import ConfigError, RuntimeFailure, UnsafeCheckpointValue
from ._blobs import DELTA, EMPTY, array_header, split_array
from ._db import AT_CHECKPOINT, Tx, Unpack

__all__ = ["config_of", "decoding", "list_keys", "skeleton", "stored_values", "to_tuples"]

Key = tuple[str, str, str]
"""A checkpoint's ``(thread_id, checkpoint_ns, checkpoint_id)``."""
ChainRow = tuple[int, str | None, bytes | None, str | None, int | None]
"""A blob row: ``(kind, type, value, base_version, items)``."""

_FILTER_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PAIRS_PER_QUERY = 400


@contextmanager
def decoding(label: str) -> Iterator[None]:
    """Values that cannot be decoded mean a damaged store: say so, naming it."""
    try:
        yield
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        raise RuntimeFailure(
            f"checkpoint database {label} holds a value that cannot be decoded "
            f"({type(exc).__name__}: {exc}); it may be damaged. Restore a backup, or delete "
            "the thread (TrajectorySaver.delete_thread)"
        ) from exc


def list_keys(
    tx: Tx,
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> list[Key]:
    """The ``(thread, namespace, checkpoint id)`` of every checkpoint a ``list()`` yields,
    newest first. Filter keys must be identifiers; values are bound, never spliced in."""
    clauses: list[str] = []
    params: list[Any] = []
    if config is not None:
        conf = config["configurable"]
        clauses.append("thread_id = ?")
        params.append(str(conf["thread_id"]))
        if (ns := conf.get("checkpoint_ns")) is not None:
            clauses.append("checkpoint_ns = ?")
            params.append(ns)
        if checkpoint_id := get_checkpoint_id(config):
            clauses.append("checkpoint_id = ?")
            params.append(checkpoint_id)
    for key, value in (filter or {}).items():
        if not isinstance(key, str) or not _FILTER_KEY.match(key):
            raise ConfigError(
                f"invalid metadata filter key {key!r}: use a plain identifier (letters, "
                "digits and '_', not starting with a digit)"
            )
        # a value matches exactly (not by containment); null matches null and a missing key,
        # as in LangGraph's in-memory saver, on both back ends
        if tx.dialect == "postgres":
            clauses.append("coalesce(metadata -> ?, 'null') = CAST(? AS jsonb)")
            params.extend((key, json.dumps(value, default=str)))
        else:
            clauses.append("json_extract(metadata, ?) IS json_extract(?, '$')")
            params.extend((f'$."{key}"', json.dumps(value, default=str)))
    if before is not None and (before_id := get_checkpoint_id(before)):
        clauses.append("checkpoint_id < ?")
        params.append(before_id)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    tail = "" if limit is None else f" LIMIT {int(limit)}"
    return tx.all(
        f"SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints {where} "
        f"ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC{tail}",
        params,
    )


def config_of(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config naming one checkpoint."""
    return {
        "configurable": dict(thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id)
    }


_IMMUTABLE = frozenset({str, int, float, bool, bytes, type(None)})
"""Value types two tuples may share: nothing can change them in place."""


def to_tuples(tx: Tx, keys: list[Key], serde: SerializerProtocol) -> list[CheckpointTuple]:
    """The tuples of the checkpoints ``keys`` name that are still stored, in their order,
    values and pending writes included."""
    unpack: Unpack = lambda data: serde.loads_typed(("msgpack", data))  # noqa: E731
    scopes: dict[tuple[str, str], list[str]] = {}
    for thread_id, ns, cid in keys:
        scopes.setdefault((thread_id, ns), []).append(cid)
    done: dict[Key, CheckpointTuple] = {}
    for (thread_id, ns), ids in scopes.items():
        members = tx.all(
            "SELECT checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN "
            f"({', '.join('?' * len(ids))})",
            (thread_id, ns, *ids),
        )
        if not members:
            continue
        shapes = {
            cid: skeleton(tx, unpack, thread_id, ns, cid, blob) for cid, _, blob, _ in members
        }
        need = {
            (ch, str(v)): None
            for sh in shapes.values()
            for ch, v in sh["channel_versions"].items()
            if ch not in sh.get("channel_values", ())
        }
        found = stored_values(tx, thread_id, ns, list(need))
        writes: dict[str, list[tuple[str, str, Any]]] = {cid: [] for cid in shapes}
        for cid, task, ch, type_, value in tx.all(
            "SELECT checkpoint_id, task_id, channel, type, value FROM checkpoint_writes "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id BETWEEN ? AND ? "
            "ORDER BY checkpoint_id, task_path, task_id, idx",
            (thread_id, ns, min(shapes), max(shapes)),
        ):
            if cid in writes:
                write = (type_, bytes(value or b""))
                writes[cid].append((task, ch, _decode(serde, write, thread_id, cid, ch)))
        scalars: dict[tuple[str, str], Any] = {}  # immutable values: decoded once, shared
        for cid, parent_id, _, metadata in members:
            inline = dict(shapes[cid].get("channel_values") or {})
            checkpoint: dict[str, Any] = {**shapes[cid], "id": cid, "channel_values": inline}
            for ch, ver in checkpoint["channel_versions"].items():
                key = (ch, str(ver))
                if ch not in inline and key in scalars:
                    inline[ch] = scalars[key]
                elif ch not in inline and (typed := found.get(key)) is not None:
                    inline[ch] = _decode(serde, typed, thread_id, cid, ch)
                    if type(inline[ch]) in _IMMUTABLE:
                        scalars[key] = inline[ch]
            done[(thread_id, ns, cid)] = CheckpointTuple(
                config_of(thread_id, ns, cid),
                checkpoint,  # type: ignore[arg-type]
                cast(CheckpointMetadata, tx.json(metadata) or {}),
                config_of(thread_id, ns, parent_id) if parent_id else None,
                writes[cid],
            )
    return [done[key] for key in keys if key in done]


def _decode(
    serde: SerializerProtocol, typed: tuple[str, bytes], thread_id: str, cid: str, ch: str
) -> Any:
    try:
        return serde.loads_typed(typed)
    except UnsafeCheckpointValue as exc:
        raise UnsafeCheckpointValue(
            f"thread {thread_id!r}, checkpoint {cid}, channel {ch!r}: {exc}"
        ) from None


def stored_values(
    tx: Tx, thread_id: str, ns: str, wanted: list[tuple[str, str]]
) -> dict[tuple[str, str], tuple[str, bytes]]:
    """Serialized values ``(type, bytes)`` of the wanted (channel, version) pairs; lists
    stored as deltas are joined from their chains; empty versions are left out."""
    rows: dict[tuple[str, str], ChainRow] = {}
    mark = "(?, ?)" if tx.dialect == "sqlite" else "(CAST(? AS text), CAST(? AS text))"
    for start in range(0, len(wanted), _PAIRS_PER_QUERY):
        chunk = wanted[start : start + _PAIRS_PER_QUERY]
        match = "b.thread_id = ? AND b.checkpoint_ns = ? AND b.channel = w.ch AND b.version = w.ver"
        sql = (
            f"WITH RECURSIVE want(ch, ver) AS (VALUES {', '.join([mark] * len(chunk))}), "
            "w(ch, ver) AS (SELECT ch, ver FROM want UNION SELECT b.channel, b.base_version "
            f"FROM w JOIN checkpoint_blobs AS b ON {match} WHERE b.base_version IS NOT NULL) "
            "SELECT b.channel, b.version, b.kind, b.type, b.value, b.base_version, b.items "
            f"FROM w JOIN checkpoint_blobs AS b ON {match}"
        )
        params = [*(v for pair in chunk for v in pair), thread_id, ns, thread_id, ns]
        for ch, ver, kind, type_, value, base, items in tx.all(sql, params):
            rows[(ch, ver)] = (kind, type_, None if value is None else bytes(value), base, items)
    out: dict[tuple[str, str], tuple[str, bytes]] = {}
    memo: dict[tuple[str, str], list[bytes | memoryview]] = {}
    for key in wanted:
        row = rows.get(key)
        if row is None or row[0] == EMPTY:
            continue
        if row[0] == DELTA:
            body = b"".join(_parts(rows, memo, key))
            out[key] = (row[1] or "msgpack", array_header(row[4] or 0) + body)
        else:
            out[key] = (row[1] or "null", row[2] or b"")
    return out


def _parts(
    rows: dict[tuple[str, str], ChainRow],
    memo: dict[tuple[str, str], list[bytes | memoryview]],
    key: tuple[str, str],
) -> list[bytes | memoryview]:
    """The array bodies a list version is made of, oldest first (memoized per version)."""
    path: list[tuple[str, str]] = []
    cursor: tuple[str, str] | None = key
    while cursor is not None and cursor not in memo:
        row = rows.get(cursor)
        if row is None or row[2] is None or cursor in path:
            raise ValueError(f"broken delta chain for channel {key[0]!r}: {cursor[1]} is missing")
        path.append(cursor)
        cursor = (cursor[0], row[3]) if row[0] == DELTA and row[3] is not None else None
    parts = list(memo[cursor]) if cursor is not None else []
    for step in reversed(path):
        data = rows[step][2] or b""
        split = split_array(data)
        if split is None:
            raise ValueError(f"corrupt list value for channel {key[0]!r} at {step[1]}")
        parts = [*parts, memoryview(data)[split[1] :]]
        memo[step] = parts
    return parts


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
    """A stored skeleton, decoded; a schema-2 delta is read through its chain (one query)."""
    if not _is_delta(blob := bytes(blob)):
        return unpack(blob)  # type: ignore[no-any-return]
    rows: dict[str | None, tuple[str | None, bytes]] = {
        key: (parent, bytes(data))
        for key, parent, data in tx.all(_ANCESTORS, (thread_id, ns, cid, thread_id, ns))
    }
    chain: list[str | None] = []
    current: str | None = cid
    while current in rows and _is_delta(rows[current][1]) and current not in chain:
        chain.append(current)
        current = rows[current][0]
    if current not in rows or _is_delta(rows[current][1]):
        raise RuntimeFailure(
            f"checkpoint {cid} of thread {thread_id!r} is stored as a delta of "
            f"checkpoint {current}, which is missing: the file was changed outside "
            "aworld-graph. TrajectorySaver.delete_thread removes the thread"
        )
    whole = unpack(rows[current][1])
    for key in reversed(chain):
        whole = _apply(whole, unpack(rows[key][1][1:]))
    return whole  # type: ignore[no-any-return]


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
