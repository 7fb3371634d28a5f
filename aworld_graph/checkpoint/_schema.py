"""The tables (the same on SQLite and PostgreSQL, JSON as text or ``jsonb``; what each holds:
docs/checkpoints.md, *What is stored where*), the ``trajectory`` view (a row per checkpoint
and one per failed step: ``source = 'error'``, ``error`` set, no ``checkpoint_id``), and
moving older stores to this schema.

Schema 1 was aworld-graph 0.1's (SQLite); in 2 a skeleton (the checkpoint without its
values) could be what changed from its parent's: ``0xC1`` (a byte msgpack never uses), then
the msgpack of ``{"rest", "cv", "cv-", "vs", "vs-"}`` (the other fields, channel versions and
per-node seen versions set and removed); in 3 skeletons are whole, writes name their node and
error, and leases came; 4 added ``checkpoint_texts``. A file of schema 1 or 2 reads as it is
and is migrated in place by the first write (or ``aworld-graph migrate``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ..errors import ConfigError
from ._db import AT_CHECKPOINT, Tx, Unpack
from ._read import skeleton
from ._trajectory import error_text, node_from_task_path

__all__ = [
    "SCHEMA_VERSION",
    "check_version",
    "columns",
    "known_version",
    "mark",
    "schema_version",
    "upgrade",
    "upsert_sql",
]

FORMAT = "aworld-graph-checkpoints"
SCHEMA_VERSION = 4

_VIEW_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, step, nodes, "
    "source, created_at, duration_ms, changes, llm_usage, tool_names, reward"
)
"""Columns of the ``trajectory`` view, in order, but its last: ``error``."""

_KEY = "thread_id TEXT, checkpoint_ns TEXT, "
# columns as "name TYPE, ..." (TYPE: TEXT, INT, REAL, BLOB, JSON), and the primary key
_TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "checkpoints": (
        _KEY + "checkpoint_id TEXT, parent_checkpoint_id TEXT, run_id TEXT, step INT, "
        "source TEXT, created_at TEXT, checkpoint BLOB, metadata JSON, nodes JSON, "
        "duration_ms REAL, changes JSON, llm_usage JSON, tool_names JSON, reward REAL",
        ("thread_id", "checkpoint_ns", "checkpoint_id"),
    ),
    "checkpoint_blobs": (
        _KEY + "channel TEXT, version TEXT, kind INT, type TEXT, value BLOB, "
        "base_version TEXT, items INT, nbytes INT, digest BLOB, depth INT",
        # version before channel: the rows of one step sit side by side
        ("thread_id", "checkpoint_ns", "version", "channel"),
    ),
    "checkpoint_writes": (
        _KEY + "checkpoint_id TEXT, task_id TEXT, idx INT, channel TEXT, type TEXT, "
        "value BLOB, task_path TEXT, node TEXT, error TEXT, created_at TEXT",
        ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
    ),
    "checkpoint_texts": ("digest BLOB, thread_id TEXT, text TEXT", ("digest", "thread_id")),
    "checkpoint_leases": (
        "thread_id TEXT, holder TEXT, host TEXT, pid INT, expires_at REAL",
        ("thread_id",),
    ),
}
_TYPES = {
    "sqlite": dict(TEXT="TEXT", INT="INTEGER", REAL="FLOAT", BLOB="BLOB", JSON="TEXT"),
    "postgres": dict(
        TEXT="text", INT="bigint", REAL="double precision", BLOB="bytea", JSON="jsonb"
    ),
}


def _columns(table: str) -> list[tuple[str, str]]:
    return [tuple(c.split()) for c in _TABLES[table][0].split(", ")]  # type: ignore[misc]


_JSON = frozenset(n for t in _TABLES for n, kind in _columns(t) if kind == "JSON")


def columns(table: str) -> list[str]:
    """The column names of ``table``, in order."""
    return [name for name, _ in _columns(table)]


def mark(dialect: str, column: str) -> str:
    """The placeholder for a value of ``column`` (JSON text, cast to ``jsonb`` on PostgreSQL)."""
    return "CAST(? AS jsonb)" if dialect == "postgres" and column in _JSON else "?"


@cache
def upsert_sql(dialect: str, table: str, replace: bool = True) -> str:
    """``INSERT`` of a whole row of ``table``; on a key already stored, replace the row
    (``replace``) or keep it."""
    cols, pk = columns(table), _TABLES[table][1]
    update = ", ".join(f"{c} = excluded.{c}" for c in cols if c not in pk)
    action = f"DO UPDATE SET {update}" if replace else "DO NOTHING"
    return (
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES "
        f"({', '.join(mark(dialect, c) for c in cols)}) ON CONFLICT ({', '.join(pk)}) {action}"
    )


def _table_sql(tx: Tx, table: str) -> str:
    pk = _TABLES[table][1]
    types = _TYPES[tx.dialect]
    parts = [
        f"{name} {types[kind]}"
        + (" NOT NULL" if name in pk else "")
        + (" DEFAULT ''" if name == "checkpoint_ns" else "")
        for name, kind in _columns(table)
    ]
    parts.append(f"PRIMARY KEY ({', '.join(pk)})")
    tail = " WITHOUT ROWID" if tx.dialect == "sqlite" else ""
    return f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(parts)}){tail}"


def _view_sql(tx: Tx) -> str:
    one = "json_array(w.node)" if tx.dialect == "sqlite" else "jsonb_build_array(w.node)"
    return (
        f"CREATE VIEW trajectory AS SELECT {_VIEW_COLUMNS}, NULL AS error FROM checkpoints "
        "UNION ALL SELECT w.thread_id, w.checkpoint_ns, NULL, w.checkpoint_id, c.run_id, "
        f"c.step + 1, {one}, 'error', w.created_at, NULL, NULL, NULL, NULL, NULL, w.error "
        "FROM checkpoint_writes AS w JOIN checkpoints AS c ON c.thread_id = w.thread_id "
        "AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id "
        "WHERE w.channel = '__error__'"
    )


def schema_version(tx: Tx, label: str, *, share_file: bool = False) -> int | None:
    """The store's schema version; ``None`` when it has no aworld-graph tables yet. Another
    program's tables of the same names, another format or a newer schema: ConfigError; so
    is a SQLite file holding only another application's tables, unless ``share_file``."""
    if tx.dialect == "sqlite":
        rows = tx.all(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT GLOB 'sqlite_*'"  # SQLite's own (sqlite_sequence, sqlite_stat1)
        )
    else:
        rows = tx.all(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    tables = {r[0] for r in rows}
    if "aworld_meta" not in tables:
        if taken := sorted(tables & {*_TABLES, "trajectory"}):
            raise ConfigError(
                f"{label} has tables named {', '.join(taken)} but is not an aworld-graph "
                "checkpoint store (a LangGraph SqliteSaver/PostgresSaver database?). Point "
                "AWORLD_GRAPH_DB / --db at another database"
            )
        if tables and tx.dialect == "sqlite" and not share_file:
            found = sorted(tables)
            named = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
            raise ConfigError(
                f"{label} holds another application's tables ({named}) and none of "
                "aworld-graph's; checkpoint tables are added only to a new or empty file or "
                "one aworld-graph made, so it was left as it is. Point AWORLD_GRAPH_DB / --db "
                "at another file (a new one is made on first use), or, to keep the checkpoints "
                f"in this file beside those tables, open it with TrajectorySaver({label!r}, "
                "share_file=True)"
            )
        return None
    meta = dict(tx.all("SELECT key, value FROM aworld_meta"))
    if meta.get("format") != FORMAT:
        raise ConfigError(
            f"{label} is not an aworld-graph checkpoint store (format {meta.get('format')!r}). "
            "Point AWORLD_GRAPH_DB / --db at another database"
        )
    return known_version(meta.get("schema_version"), label)


def check_version(tx: Tx, label: str) -> None:
    """Refuse a store whose schema a newer aworld-graph has moved past this version's since
    it was first opened here (ConfigError; a reader or writer of it runs elsewhere now)."""
    row = tx.one("SELECT value FROM aworld_meta WHERE key = 'schema_version'")
    known_version(None if row is None else row[0], label)


def known_version(stored: Any, label: str) -> int:
    """The schema version ``stored`` in ``aworld_meta``, if this version reads and writes it."""
    raw = str(stored or "")
    if not raw.isdigit():
        raise ConfigError(
            f"{label}: aworld_meta.schema_version is {raw!r}, not a number; the store was "
            f"changed by hand. Set it back (this version writes {SCHEMA_VERSION}) or restore "
            "a backup"
        )
    version = int(raw)
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"{label} was written by a newer aworld-graph: its schema is {version}, and this "
            f"version knows schema {SCHEMA_VERSION} and older, so it neither reads nor writes "
            "it. Upgrade aworld-graph here (pip install -U aworld-graph), or point "
            "AWORLD_GRAPH_DB / --db at another database"
        )
    return version


def upgrade(tx: Tx, serde: Any, label: str, *, share_file: bool = False) -> None:
    """Create a new store's tables, index and view, or bring an older one to this schema; on
    PostgreSQL savers opening a new database at once take turns on an advisory lock."""
    if tx.dialect == "postgres":
        tx.one("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (FORMAT,))
    version = schema_version(tx, label, share_file=share_file)
    if version is None:
        tx.run("CREATE TABLE IF NOT EXISTS aworld_meta (key TEXT PRIMARY KEY, value TEXT)")
        for table in _TABLES:
            tx.run(_table_sql(tx, table))
        tx.run(
            "CREATE INDEX IF NOT EXISTS checkpoints_run_id ON checkpoints (run_id) "
            "WHERE run_id IS NOT NULL"
        )
        tx.run(_view_sql(tx))
        meta = [("format", FORMAT), ("schema_version", str(SCHEMA_VERSION))]
        tx.many("INSERT INTO aworld_meta (key, value) VALUES (?, ?)", meta)
    elif version < SCHEMA_VERSION:
        if version < 3:  # schema 1 and 2 (SQLite only) take the same steps
            _older_than_3(tx, serde)
        tx.run(_table_sql(tx, "checkpoint_texts"))
        sql = "UPDATE aworld_meta SET value = ? WHERE key = 'schema_version'"
        tx.run(sql, (str(SCHEMA_VERSION),))


def _older_than_3(tx: Tx, serde: Any) -> None:
    """Delta skeletons stored whole (oldest first, so each parent is whole already), the
    writes' new columns, the lease table, the view."""
    unpack: Unpack = lambda data: serde.loads_typed(("msgpack", data))  # noqa: E731
    for thread_id, ns, cid, blob in tx.all(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint FROM checkpoints "
        "WHERE substr(checkpoint, 1, 1) = x'c1' ORDER BY thread_id, checkpoint_ns, checkpoint_id"
    ):
        whole = serde.dumps_typed(skeleton(tx, unpack, thread_id, ns, cid, blob))[1]
        sql = f"UPDATE checkpoints SET checkpoint = ? WHERE {AT_CHECKPOINT}"
        tx.run(sql, (whole, thread_id, ns, cid))
    have = {r[1] for r in tx.all("PRAGMA table_info(checkpoint_writes)")}
    for name in ("node", "error", "created_at"):
        if name not in have:
            tx.run(f"ALTER TABLE checkpoint_writes ADD COLUMN {name} TEXT")
    _name_write_nodes(tx, serde)
    tx.run(_table_sql(tx, "checkpoint_leases"))
    tx.run("DROP VIEW IF EXISTS trajectory")
    tx.run(_view_sql(tx))


def _name_write_nodes(tx: Tx, serde: Any) -> None:
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
