"""Turn ``checkpoints`` rows into :class:`CheckpointTuple` s with two batched queries.

For a page of checkpoint rows, one recursive query fetches every blob row they need
(delta chains included, each row once) and one query fetches all their pending writes,
ordered by task path. Nothing is queried per checkpoint.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from ._blobs import DELTA, EMPTY, array_header, split_array

try:  # orjson ships with langsmith; the stdlib parser is the fallback
    from orjson import loads as _json_loads
except ImportError:  # pragma: no cover
    _json_loads = json.loads

__all__ = ["CHECKPOINT_COLUMNS", "Page", "fetch", "load_versions"]


CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata"
)
"""Columns every query that feeds :func:`fetch` selects, in this order."""

CheckpointRow = tuple[str, str, str, str | None, bytes, str]

_BLOB_COLUMNS = "b.channel, b.version, b.kind, b.type, b.value, b.base_version, b.items"
_BLOB_MATCH = (
    "b.thread_id = :t AND b.checkpoint_ns = :ns AND b.channel = {0}.ch AND b.version = {0}.ver"
)


def _ranges_sql(n: int) -> str:
    """Blob rows of ``n`` channels, each within a version range ``:c{i}, :lo{i}, :hi{i}``.

    Versions grow along a thread, so the versions one page of checkpoints needs of a
    channel are (nearly) a contiguous key range: one index range scan per channel.
    """
    return " UNION ALL ".join(
        f"SELECT {_BLOB_COLUMNS} FROM checkpoint_blobs AS b WHERE b.thread_id = :t "
        f"AND b.checkpoint_ns = :ns AND b.channel = :c{i} AND b.version BETWEEN :lo{i} AND :hi{i}"
        for i in range(n)
    )


def _chains_sql(n: int) -> str:
    """The rows for ``n`` (channel, version) pairs and every row their delta chains need."""
    values = ",".join(f"(:c{i},:v{i})" for i in range(n))
    return (
        f"WITH RECURSIVE want(ch, ver) AS (VALUES {values}), "
        "chain(ch, ver) AS (SELECT ch, ver FROM want UNION "
        "SELECT chain.ch, b.base_version FROM chain JOIN checkpoint_blobs AS b ON "
        + _BLOB_MATCH.format("chain")
        + " WHERE b.base_version IS NOT NULL) "
        f"SELECT {_BLOB_COLUMNS} FROM chain JOIN checkpoint_blobs AS b ON "
        + _BLOB_MATCH.format("chain")
    )


_WRITES_SQL = (
    "SELECT checkpoint_id, task_id, channel, type, value FROM checkpoint_writes "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id BETWEEN ? AND ? "
    "ORDER BY checkpoint_id, task_path, task_id, idx"
)
_CHUNK = 400
_CHANNELS_PER_QUERY = 64

ChainRow = tuple[int, str | None, bytes | None, str | None, int | None]
"""A blob row: ``(kind, type, value, base_version, items)``."""


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


def fetch(
    conn: sqlite3.Connection, rows: Sequence[CheckpointRow], serde: SerializerProtocol
) -> Page:
    """Everything the tuples of ``rows`` need, still serialized: two batched queries per
    thread/namespace (blob rows by version range, pending writes by id range)."""
    scopes: dict[tuple[str, str], list[CheckpointRow]] = {}
    for row in rows:
        scopes.setdefault((row[0], row[1]), []).append(row)
    values: dict[tuple[str, str], dict[tuple[str, str], tuple[str, bytes]]] = {}
    writes: dict[tuple[str, str, str], list[tuple[str, str, str, bytes]]] = {}
    skeletons: dict[str, dict[str, Any]] = {}
    for (thread_id, ns), members in scopes.items():
        need: dict[tuple[str, str], None] = {}
        for row in members:
            skeleton = skeletons[row[2]] = serde.loads_typed(("msgpack", row[4]))
            for ch, ver in skeleton["channel_versions"].items():
                need[(ch, str(ver))] = None
        values[(thread_id, ns)] = _fetch_values(conn, thread_id, ns, list(need))
        ids = {row[2] for row in members}
        for checkpoint_id, task_id, channel, type_, value in conn.execute(
            _WRITES_SQL, (thread_id, ns, min(ids), max(ids))
        ):
            if checkpoint_id in ids:
                key = (thread_id, ns, checkpoint_id)
                writes.setdefault(key, []).append((task_id, channel, type_, value))
    return Page(list(rows), values, writes, skeletons)


@dataclass(frozen=True, slots=True)
class Page:
    """Fetched but not decoded: each tuple is decoded as it is handed out, so a long
    history holds no more decoded objects than its consumer keeps (and leaves the garbage
    collector little to do)."""

    rows: list[CheckpointRow]
    values: dict[tuple[str, str], dict[tuple[str, str], tuple[str, bytes]]]
    """(thread, namespace) → (channel, version) → serialized value."""
    writes: dict[tuple[str, str, str], list[tuple[str, str, str, bytes]]]
    """(thread, namespace, checkpoint) → pending writes, in ``writes_sort_key`` order."""
    skeletons: dict[str, dict[str, Any]]
    """checkpoint id → the decoded checkpoint without its values (decoded once, in ``fetch``)."""

    def tuples(
        self, serde: SerializerProtocol, *, lazy_values: Callable[[], Any] | None = None
    ) -> Iterator[CheckpointTuple]:
        """The checkpoint tuples, in row order.

        With ``lazy_values`` (a context-manager factory wrapping decode errors), each tuple's
        ``channel_values`` is decoded on first use (:class:`LazyValues`), so walking a long
        history for ids and metadata does not pay for every state."""
        loads = serde.loads_typed
        for thread_id, ns, checkpoint_id, parent_id, skeleton, metadata in self.rows:
            skel = self.skeletons.pop(checkpoint_id, None) or loads(("msgpack", skeleton))
            found = self.values.get((thread_id, ns), {})
            wanted = [
                (ch, found.get((ch, str(ver)))) for ch, ver in skel["channel_versions"].items()
            ]

            def decode(wanted: list[tuple[str, Any]] = wanted) -> dict[str, Any]:
                return {ch: loads(typed) for ch, typed in wanted if typed is not None}

            skel["id"] = checkpoint_id
            if lazy_values is None:
                skel["channel_values"] = decode()
            else:
                skel["channel_values"] = LazyValues(decode, lazy_values)
            writes = self.writes.get((thread_id, ns, checkpoint_id), ())
            yield CheckpointTuple(
                _config(thread_id, ns, checkpoint_id),
                skel,
                _json_loads(metadata) if metadata else {},
                _config(thread_id, ns, parent_id) if parent_id else None,
                [(task, ch, loads((type_, value))) for task, ch, type_, value in writes],
            )


class LazyValues(dict):  # type: ignore[type-arg]
    """A checkpoint's ``channel_values`` that decodes itself on first use.

    Behaves as the plain dict it becomes: every read or write first decodes. Handed out by
    ``list()`` only; ``get_tuple`` (what a running graph reads) decodes eagerly.
    """

    __slots__ = ("_decode", "_guard")

    def __init__(self, decode: Callable[[], dict[str, Any]], guard: Callable[[], Any]) -> None:
        super().__init__()
        self._decode: Callable[[], dict[str, Any]] | None = decode
        self._guard = guard

    def _fill(self) -> None:
        decode = self._decode
        if decode is not None:
            self._decode = None
            with self._guard():
                dict.update(self, decode())


def _filled(name: str) -> Callable[..., Any]:
    method = getattr(dict, name)

    def call(self: LazyValues, *args: Any, **kwargs: Any) -> Any:
        self._fill()
        return method(self, *args, **kwargs)

    call.__name__ = name
    return call


for _name in (
    "__getitem__",
    "__setitem__",
    "__delitem__",
    "__contains__",
    "__iter__",
    "__len__",
    "__reversed__",
    "__repr__",
    "__or__",
    "__ror__",
    "__ior__",
    "keys",
    "values",
    "items",
    "get",
    "pop",
    "popitem",
    "setdefault",
    "update",
    "clear",
):
    setattr(LazyValues, _name, _filled(_name))


def _compare(self: LazyValues, other: Any) -> Any:
    self._fill()
    if isinstance(other, LazyValues):
        other._fill()
    return dict.__eq__(self, other)


LazyValues.__eq__ = _compare  # type: ignore[method-assign,assignment]
LazyValues.__ne__ = lambda self, other: (lambda r: r if r is NotImplemented else not r)(
    _compare(self, other)
)  # type: ignore[method-assign,assignment]
LazyValues.copy = lambda self: (self._fill(), dict(dict.items(self)))[1]  # type: ignore[method-assign]
LazyValues.__hash__ = None  # type: ignore[assignment]
LazyValues.__reduce__ = lambda self: (dict, (dict(self.items()),))  # type: ignore[method-assign]


def _fetch_values(
    conn: sqlite3.Connection, thread_id: str, ns: str, keys: list[tuple[str, str]]
) -> dict[tuple[str, str], tuple[str, bytes]]:
    """Serialized values ``(type, bytes)`` of the wanted (channel, version) pairs.

    Empty versions are left out. Lists stored as deltas are joined from their chains.
    """
    wanted = set(keys)
    ranges: dict[str, tuple[str, str]] = {}
    for ch, ver in keys:
        lo, hi = ranges.get(ch, (ver, ver))
        ranges[ch] = (min(lo, ver), max(hi, ver))
    rows: dict[tuple[str, str], ChainRow] = {}
    channels = list(ranges.items())
    for start in range(0, len(channels), _CHANNELS_PER_QUERY):
        chunk = channels[start : start + _CHANNELS_PER_QUERY]
        params: dict[str, Any] = {"t": thread_id, "ns": ns}
        for i, (ch, (lo, hi)) in enumerate(chunk):
            params[f"c{i}"], params[f"lo{i}"], params[f"hi{i}"] = ch, lo, hi
        for ch, ver, kind, type_, value, base, items in conn.execute(
            _ranges_sql(len(chunk)), params
        ):
            rows[(ch, ver)] = (kind, type_, value, base, items)
    missing = list(
        {
            (key[0], row[3]): None
            for key in wanted
            if (row := rows.get(key)) is not None
            and row[0] == DELTA
            and row[3] is not None
            and (key[0], row[3]) not in rows
        }
    )
    for start in range(0, len(missing), _CHUNK):
        chunk_keys = missing[start : start + _CHUNK]
        params = {"t": thread_id, "ns": ns}
        for i, (ch, ver) in enumerate(chunk_keys):
            params[f"c{i}"], params[f"v{i}"] = ch, ver
        for ch, ver, kind, type_, value, base, items in conn.execute(
            _chains_sql(len(chunk_keys)), params
        ):
            rows[(ch, ver)] = (kind, type_, value, base, items)
    out: dict[tuple[str, str], tuple[str, bytes]] = {}
    bodies: dict[tuple[str, str], list[bytes | memoryview]] = {}
    for key in keys:
        row = rows.get(key)
        if row is None or row[0] == EMPTY:
            continue
        if row[0] != DELTA:
            out[key] = (row[1] or "null", row[2] or b"")
            continue
        parts = _parts(rows, bodies, key)
        out[key] = (row[1] or "msgpack", array_header(row[4] or 0) + b"".join(parts))
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
        if row is None or row[2] is None:
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
