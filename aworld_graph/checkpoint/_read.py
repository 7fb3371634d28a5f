"""Reading: checkpoint rows into :class:`CheckpointTuple` s, a page at a time.

For a page of checkpoint rows, one range query per channel group fetches every blob row
they need (delta chains joined, each row once) and one query fetches all their pending
writes, ordered by task path. Nothing is queried per checkpoint. ``list()`` hands out
:class:`HistoryTuple` s that run this for their page only when a field is first read
(:class:`LazyPage`); :func:`lookup_rows` finds the rows of many ``get_tuple`` lookups at once.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..errors import RuntimeFailure
from ._blobs import DELTA, EMPTY, array_header, split_array
from ._skeleton import resolve

try:  # orjson ships with langsmith; the stdlib parser is the fallback
    from orjson import loads as _json_loads
except ImportError:  # pragma: no cover
    _json_loads = json.loads

__all__ = [
    "CHECKPOINT_COLUMNS",
    "HistoryTuple",
    "LazyPage",
    "Page",
    "fetch",
    "lookup_rows",
    "msgpack_loader",
]


CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata"
)
"""Columns every query that feeds :func:`fetch` selects, in this order."""

CheckpointRow = tuple[str, str, str, str | None, bytes, str]

_BLOB_COLUMNS = "b.channel, b.version, b.kind, b.type, b.value, b.base_version, b.items"
_BLOB_MATCH = (
    "b.thread_id = :t AND b.checkpoint_ns = :ns AND b.channel = {0}.ch AND b.version = {0}.ver"
)


@lru_cache(maxsize=256)
def _ranges_sql(sizes: tuple[int, ...]) -> str:
    """Blob rows within version ranges ``:lo{i}..:hi{i}`` of the channels ``:c{i}_{j}``.

    Versions grow along a thread, so the versions one page of checkpoints needs are (nearly)
    one contiguous key range, shared by the channels written along it (plus single versions
    of channels written long before): one index range scan per range, whichever order the
    blob key has (version first in files created since session 4, channel first before).
    """
    return " UNION ALL ".join(
        f"SELECT {_BLOB_COLUMNS} FROM checkpoint_blobs AS b WHERE b.thread_id = :t "
        f"AND b.checkpoint_ns = :ns AND b.version BETWEEN :lo{i} AND :hi{i} AND b.channel IN ("
        + ",".join(f":c{i}_{j}" for j in range(n))
        + ")"
        for i, n in enumerate(sizes)
    )


def _merged_ranges(ranges: dict[str, list[str]]) -> list[tuple[str, str, list[str]]]:
    """Per-channel version ranges merged where they overlap: ``(lo, hi, channels)``."""
    merged: list[tuple[str, str, list[str]]] = []
    for ch, (lo, hi) in sorted(ranges.items(), key=lambda item: item[1][0]):
        if merged and lo <= merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], hi), [*last[2], ch])
        else:
            merged.append((lo, hi, [ch]))
    return merged


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


_LATEST_SQL = (
    "WITH k(a, b) AS (VALUES {keys}) SELECT k.a, k.b, "
    + ", ".join(f"c.{col.strip()}" for col in CHECKPOINT_COLUMNS.split(","))
    + " FROM k JOIN checkpoints AS c ON c.thread_id = k.a AND c.checkpoint_ns = k.b "
    "AND c.checkpoint_id = (SELECT max(checkpoint_id) FROM checkpoints "
    "WHERE thread_id = k.a AND checkpoint_ns = k.b)"
)
_BY_ID_SQL = (
    "WITH k(a, b, c) AS (VALUES {keys}) SELECT "
    + ", ".join(f"c.{col.strip()}" for col in CHECKPOINT_COLUMNS.split(","))
    + " FROM k JOIN checkpoints AS c ON c.thread_id = k.a AND c.checkpoint_ns = k.b "
    "AND c.checkpoint_id = k.c"
)
_ONE_SQL = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "AND checkpoint_id = ?"
)
_ONE_LATEST_SQL = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
_LOOKUP_CHUNK = 300


def lookup_rows(
    conn: sqlite3.Connection, keys: Sequence[tuple[str, str, str | None]]
) -> dict[tuple[str, str, str | None], CheckpointRow]:
    """Checkpoint rows for ``(thread, namespace, id)`` keys, ``id=None`` meaning the latest
    of the thread: one query per few hundred keys, not one per key."""
    if len(keys) == 1:  # get_tuple: the plain key lookups, no key table
        thread_id, ns, checkpoint_id = keys[0]
        if checkpoint_id:
            one = conn.execute(_ONE_SQL, (thread_id, ns, checkpoint_id)).fetchone()
        else:
            one = conn.execute(_ONE_LATEST_SQL, (thread_id, ns)).fetchone()
        return {keys[0]: one} if one is not None else {}
    out: dict[tuple[str, str, str | None], CheckpointRow] = {}
    latest = list(dict.fromkeys((t, ns) for t, ns, cid in keys if not cid))
    exact = list(dict.fromkeys((t, ns, cid) for t, ns, cid in keys if cid))
    for start in range(0, len(latest), _LOOKUP_CHUNK):
        chunk = latest[start : start + _LOOKUP_CHUNK]
        sql = _LATEST_SQL.format(keys=",".join(["(?,?)"] * len(chunk)))
        for a, b, *row in conn.execute(sql, [v for key in chunk for v in key]):
            out[(a, b, None)] = tuple(row)  # type: ignore[assignment]
    for start in range(0, len(exact), _LOOKUP_CHUNK):
        chunk3 = exact[start : start + _LOOKUP_CHUNK]
        sql = _BY_ID_SQL.format(keys=",".join(["(?,?,?)"] * len(chunk3)))
        for row in conn.execute(sql, [v for key in chunk3 for v in key]):
            out[(row[0], row[1], row[2])] = row
    return out


def msgpack_loader(serde: SerializerProtocol) -> Callable[[bytes], Any]:
    """Decode msgpack bytes as ``serde.loads_typed(("msgpack", data))`` does, without its
    per-call type dispatch (LangGraph's serializer keeps its extension hook on itself)."""
    hook = getattr(serde, "_unpack_ext_hook", None)
    if hook is None:
        return lambda data: serde.loads_typed(("msgpack", data))
    return partial(ormsgpack.unpackb, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)


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
    writes: dict[tuple[str, str], dict[str, list[tuple[str, str, str, str, bytes]]]] = {}
    skeletons: dict[tuple[str, str, str], dict[str, Any]] = {}
    unpack = msgpack_loader(serde)
    for (thread_id, ns), members in scopes.items():
        need: dict[tuple[str, str], None] = {}
        known = {row[2]: (row[3], row[4]) for row in members}
        for cid, skeleton in resolve(conn, thread_id, ns, known, unpack, known).items():
            skeletons[(thread_id, ns, cid)] = skeleton
        for row in members:
            for ch, ver in skeletons[row[:3]]["channel_versions"].items():
                need[(ch, ver if ver.__class__ is str else str(ver))] = None
        values[(thread_id, ns)] = _fetch_values(conn, thread_id, ns, need)
        ids = {row[2] for row in members}
        scope = writes[(thread_id, ns)] = {}
        for row in conn.execute(_WRITES_SQL, (thread_id, ns, min(ids), max(ids))):
            found = scope.get(row[0])
            if found is None:
                if row[0] not in ids:
                    continue
                found = scope[row[0]] = []
            found.append(row)
    return Page(list(rows), values, writes, skeletons)


@dataclass(frozen=True, slots=True)
class Page:
    """A page of rows with everything their tuples need, fetched but not decoded yet."""

    rows: list[CheckpointRow]
    values: dict[tuple[str, str], dict[tuple[str, str], tuple[str, bytes]]]
    """(thread, namespace) → (channel, version) → serialized value."""
    writes: dict[tuple[str, str], dict[str, list[tuple[str, str, str, str, bytes]]]]
    """(thread, namespace) → checkpoint → its pending-write rows ``(checkpoint, task, channel,
    type, value)``, in ``writes_sort_key`` order."""
    skeletons: dict[tuple[str, str, str], dict[str, Any]]
    """(thread, namespace, checkpoint id) → the decoded checkpoint without its values
    (decoded once, in ``fetch``)."""

    def tuples(self, serde: SerializerProtocol) -> Iterator[CheckpointTuple]:
        """The checkpoint tuples, in row order, fully decoded."""
        loads = serde.loads_typed
        unpack = msgpack_loader(serde)
        skeletons = self.skeletons
        twice = len(skeletons) < len(self.rows)  # a row listed twice: each tuple its own copy
        handed: set[tuple[str, str, str]] = set()
        for thread_id, ns, checkpoint_id, parent_id, _skeleton, metadata in self.rows:
            skel: Any = skeletons[(thread_id, ns, checkpoint_id)]
            if twice:
                key = (thread_id, ns, checkpoint_id)
                if key in handed:
                    skel = copy.deepcopy(skel)
                handed.add(key)
            found = self.values.get((thread_id, ns), {})
            skel["id"] = checkpoint_id
            channel_values = skel["channel_values"] = {}
            for ch, ver in skel["channel_versions"].items():
                typed = found.get((ch, ver if ver.__class__ is str else str(ver)))
                if typed is not None:
                    channel_values[ch] = unpack(typed[1]) if typed[0] == "msgpack" else loads(typed)
            writes = self.writes.get((thread_id, ns), {}).get(checkpoint_id, ())
            yield CheckpointTuple(
                _config(thread_id, ns, checkpoint_id),
                skel,
                _json_loads(metadata) if metadata else {},
                _config(thread_id, ns, parent_id) if parent_id else None,
                [
                    (task, ch, unpack(value) if type_ == "msgpack" else loads((type_, value)))
                    for _, task, ch, type_, value in writes
                ],
            )


class _Pending:
    """Stands in a :class:`HistoryTuple`'s storage for the fields not decoded yet.

    Not a dict or list on purpose: code that reads a tuple's storage directly from C
    (``json.dumps``, ``orjson``) fails loudly on it instead of writing an empty value.
    """

    __slots__ = ("page", "index")

    def __init__(self, page: LazyPage, index: int) -> None:
        self.page, self.index = page, index

    def __repr__(self) -> str:
        return "<not decoded yet>"


_FIELDS = range(5)


class HistoryTuple(CheckpointTuple):
    """A :class:`CheckpointTuple` from ``list()`` whose checkpoint, metadata and pending
    writes are read from the database and decoded when first used, a page of 200 tuples at
    a time. ``config`` and ``parent_config`` are there from the start.

    It behaves as the plain tuple it stands for: fields by name, by index, unpacking,
    ``_replace``/``_asdict``, equality and ``repr`` all give the decoded values.
    """

    __slots__ = ()

    def _field(self, i: int) -> Any:
        value = tuple.__getitem__(self, i)
        if type(value) is _Pending:
            return value.page.load()[value.index][i]
        return value

    checkpoint = property(lambda self: self._field(1))  # type: ignore[assignment]
    metadata = property(lambda self: self._field(2))  # type: ignore[assignment]
    pending_writes = property(lambda self: self._field(4))  # type: ignore[assignment]

    def __getitem__(self, index: Any) -> Any:  # type: ignore[override]
        if isinstance(index, slice):
            return tuple(self)[index]
        return self._field(_FIELDS[index])

    def __iter__(self) -> Iterator[Any]:
        return map(self._field, _FIELDS)

    def __contains__(self, value: object) -> bool:
        return value in tuple(self)

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, HistoryTuple) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)
        )
        return f"{type(self).__name__}({fields})"

    def __add__(self, other: Any) -> Any:
        return tuple(self) + other

    def __radd__(self, other: Any) -> Any:
        return other + tuple(self)

    def __mul__(self, n: Any) -> Any:
        return tuple(self) * n

    __rmul__ = __mul__

    def index(self, value: Any, *args: Any) -> int:
        return tuple(self).index(value, *args)

    def count(self, value: Any) -> int:
        return tuple(self).count(value)


_new_tuple = tuple.__new__

LazyRow = tuple[str, str, str, str | None]
"""``(thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id)``."""

_SELECT_PAGE = (
    "WITH k(a, b, c) AS (VALUES {keys}) SELECT "
    + ", ".join(f"c.{col.strip()}" for col in CHECKPOINT_COLUMNS.split(","))
    + " FROM k JOIN checkpoints AS c ON c.thread_id = k.a AND c.checkpoint_ns = k.b "
    "AND c.checkpoint_id = k.c"
)


class LazyPage:
    """A page of ``list()`` rows (ids only); the rest is fetched and decoded, for the whole
    page at once, when any of its tuples is first used."""

    __slots__ = ("_rows", "_read", "_serde", "_lock", "_tuples")

    def __init__(
        self,
        rows: Sequence[LazyRow],
        read: Callable[[], Any],
        serde: SerializerProtocol,
    ) -> None:
        self._rows = rows
        self._read = read
        self._serde = serde
        self._lock = threading.Lock()
        self._tuples: list[CheckpointTuple] | None = None

    def load(self) -> list[CheckpointTuple]:
        """Fetch and decode every tuple of the page (once), in row order.

        ``read`` gives a context manager yielding a connection in a read transaction (and
        turning decode errors into clear ones)."""
        loaded = self._tuples
        if loaded is not None:
            return loaded
        with self._lock:
            if self._tuples is None:
                keys = list(dict.fromkeys((r[0], r[1], r[2]) for r in self._rows))
                with self._read() as conn:
                    sql = _SELECT_PAGE.format(keys=",".join(["(?,?,?)"] * len(keys)))
                    rows = conn.execute(sql, [v for key in keys for v in key]).fetchall()
                    page = fetch(conn, rows, self._serde)
                    found = {
                        row[:3]: t
                        for row, t in zip(page.rows, page.tuples(self._serde), strict=True)
                    }
                missing = [k[2] for k in keys if k not in found]
                if missing:
                    raise RuntimeFailure(
                        f"checkpoint {missing[0]} was deleted (pruned or its thread removed) "
                        "after list() returned it; list the thread again"
                    )
                self._tuples = [found[(r[0], r[1], r[2])] for r in self._rows]
            return self._tuples

    def tuples(self) -> Iterator[CheckpointTuple]:
        """A :class:`HistoryTuple` per row, in row order, nothing fetched yet."""
        for i, (thread_id, ns, checkpoint_id, parent_id) in enumerate(self._rows):
            pending = _Pending(self, i)
            yield _new_tuple(
                HistoryTuple,
                (
                    {
                        "configurable": {
                            "thread_id": thread_id,
                            "checkpoint_ns": ns,
                            "checkpoint_id": checkpoint_id,
                        }
                    },
                    pending,
                    pending,
                    {
                        "configurable": {
                            "thread_id": thread_id,
                            "checkpoint_ns": ns,
                            "checkpoint_id": parent_id,
                        }
                    }
                    if parent_id
                    else None,
                    pending,
                ),
            )


def _fetch_values(
    conn: sqlite3.Connection,
    thread_id: str,
    ns: str,
    keys: Iterable[tuple[str, str]],
) -> dict[tuple[str, str], tuple[str, bytes]]:
    """Serialized values ``(type, bytes)`` of the wanted (channel, version) pairs.

    Empty versions are left out. Lists stored as deltas are joined from their chains.
    """
    wanted = keys if isinstance(keys, dict) else dict.fromkeys(keys)
    ranges: dict[str, list[str]] = {}
    for ch, ver in wanted:
        span = ranges.get(ch)
        if span is None:
            ranges[ch] = [ver, ver]
        elif ver < span[0]:
            span[0] = ver
        elif ver > span[1]:
            span[1] = ver
    out: dict[tuple[str, str], tuple[str, bytes]] = {}
    rows: dict[tuple[str, str], ChainRow] = {}  # what delta chains may need
    spans = [
        (lo, hi, chans[i : i + _CHANNELS_PER_QUERY])
        for lo, hi, chans in _merged_ranges(ranges)
        for i in range(0, len(chans), _CHANNELS_PER_QUERY)
    ]
    for start in range(0, len(spans), _CHANNELS_PER_QUERY):
        chunk = spans[start : start + _CHANNELS_PER_QUERY]
        params: dict[str, Any] = {"t": thread_id, "ns": ns}
        for i, (lo, hi, chans) in enumerate(chunk):
            params[f"lo{i}"], params[f"hi{i}"] = lo, hi
            for j, ch in enumerate(chans):
                params[f"c{i}_{j}"] = ch
        sql = _ranges_sql(tuple(len(chans) for _, _, chans in chunk))
        for ch, ver, kind, type_, value, base, items in conn.execute(sql, params):
            key = (ch, ver)
            if kind == DELTA or items is not None:  # list rows: bases and deltas
                rows[key] = (kind, type_, value, base, items)
            if kind != DELTA and kind != EMPTY and key in wanted:
                out[key] = (type_ or "null", value or b"")
    if not any(row[0] == DELTA for row in rows.values()):
        return out
    # follow each wanted delta's chain through the rows fetched so far; the first version
    # missing is read with the rest of its chain (a fork can put a chain's middle in the
    # page's range and its start below it)
    gaps: dict[tuple[str, str], None] = {}
    for key, row in rows.items():
        if row[0] != DELTA or key not in wanted:
            continue
        cursor, seen = key, set()
        while (found := rows.get(cursor)) is not None:
            if found[0] != DELTA or found[3] is None or cursor in seen:
                break
            seen.add(cursor)
            cursor = (cursor[0], found[3])
        else:
            gaps[cursor] = None
    missing = list(gaps)
    for start in range(0, len(missing), _CHUNK):
        chunk_keys = missing[start : start + _CHUNK]
        params = {"t": thread_id, "ns": ns}
        for i, (ch, ver) in enumerate(chunk_keys):
            params[f"c{i}"], params[f"v{i}"] = ch, ver
        for ch, ver, kind, type_, value, base, items in conn.execute(
            _chains_sql(len(chunk_keys)), params
        ):
            rows[(ch, ver)] = (kind, type_, value, base, items)
    bodies: dict[tuple[str, str], list[bytes | memoryview]] = {}
    for key, row in rows.items():
        if row[0] == DELTA and key in wanted:
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
