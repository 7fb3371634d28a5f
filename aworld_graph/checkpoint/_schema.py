"""The database file: connections, schema (created through sqlite-utils), and checks.

Tables (all readable with any SQLite client):

* ``checkpoints`` — one row per checkpoint: ids, parent, run, step, source, time, the
  checkpoint without its values (msgpack) and its metadata (JSON).
* ``checkpoint_blobs`` — one row per channel version; append-only lists as deltas.
* ``checkpoint_writes`` — pending writes of tasks, per checkpoint.
* ``trajectory`` — a view: one row per transition, plain JSON columns (see
  :mod:`._trajectory`); its data lives in the ``checkpoints`` rows.
* ``aworld_meta`` — format marker and schema version.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal

import sqlite_utils

from ..errors import ConfigError, RuntimeFailure

__all__ = [
    "FORMAT",
    "SCHEMA_VERSION",
    "TABLES",
    "TRAJECTORY_COLUMNS",
    "Durability",
    "connect",
    "ensure_schema",
    "database_error",
]

Durability = Literal["normal", "full"]
"""``normal``: WAL with ``synchronous=NORMAL``; a committed checkpoint survives a killed
process, the last commits may be lost on power failure. ``full``: a write returns only after
the write-ahead log holding it is flushed to disk, so it survives power loss too. Writes that
commit together share one flush (sync callers: SQLite's ``synchronous=FULL`` inside the
commit; the async writer thread: ``fdatasync`` after its commits, outside the write lock)."""

FORMAT = "aworld-graph-checkpoints"
SCHEMA_VERSION = 2
"""1: the first layout. 2: checkpoint skeletons of wide graphs may be stored as deltas of
their parents' (:mod:`._skeleton`), which schema-1 code cannot read: opening a schema-1 file
marks it 2, so older aworld-graph versions refuse it with a clear message."""
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
BUSY_TIMEOUT_S = 60.0


def connect(path: Path, durability: Durability) -> sqlite3.Connection:
    """A new connection in autocommit mode with the pragmas every connection needs."""
    conn = sqlite3.connect(
        str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    # ``full`` durability: sync callers commit on a separate FULL connection, the writer
    # thread flushes after its commits itself (see Store._commit and Store._durable)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA temp_store=MEMORY")
    return conn


def database_error(path: Path, exc: sqlite3.Error) -> Exception:
    """The project error for a low-level SQLite error on ``path``."""
    text = str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text
        or "malformed" in text
        or "encrypted" in text
        or "Could not decode" in text
    ):
        return ConfigError(
            f"checkpoint database {path} is not a valid SQLite file or is corrupt ({text}). "
            "Move it aside (or restore a backup) and run again, or point AWORLD_GRAPH_DB / "
            "--db at another file"
        )
    return RuntimeFailure(f"checkpoint database {path}: {type(exc).__name__}: {text}")


def ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Check that ``path`` is ours (or empty) and create the tables if needed.

    Raises :class:`ConfigError` for a corrupt file, a foreign database, or a newer schema.
    """
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise database_error(path, exc) from None
    if "aworld_meta" in tables:
        if _check_meta(conn, path) < SCHEMA_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "UPDATE aworld_meta SET value = ? WHERE key = 'schema_version' "
                    "AND CAST(value AS INTEGER) < ?",
                    (str(SCHEMA_VERSION), SCHEMA_VERSION),
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return
    foreign = sorted(t for t in tables if not t.startswith("sqlite_"))
    if foreign:
        raise ConfigError(
            f"{path} is a SQLite database but not an aworld-graph checkpoint store (it has "
            f"tables {', '.join(foreign[:8])}). Point AWORLD_GRAPH_DB / --db at a new file"
        )
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal" and str(path) != ":memory:":
        raise ConfigError(
            f"cannot switch {path} to WAL journal mode (got {mode!r}); put the database on "
            "a local filesystem"
        )
    conn.execute("BEGIN IMMEDIATE")
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "aworld_meta" not in tables:
            _create(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    _check_meta(conn, path)


def _check_meta(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version, once it is known to be ours and not newer."""
    meta = dict(conn.execute("SELECT key, value FROM aworld_meta").fetchall())
    if meta.get("format") != FORMAT:
        raise ConfigError(
            f"{path} is not an aworld-graph checkpoint store (format {meta.get('format')!r}). "
            "Point AWORLD_GRAPH_DB / --db at another file"
        )
    version = int(meta.get("schema_version", "0"))
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"{path} was written by a newer aworld-graph (schema {version}, this version reads "
            f"{SCHEMA_VERSION}). Upgrade aworld-graph or use another file"
        )
    return version


TRAJECTORY_COLUMNS = (
    "thread_id",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "run_id",
    "step",
    "nodes",
    "source",
    "created_at",
    "duration_ms",
    "changes",
    "llm_usage",
    "tool_names",
    "reward",
)
"""Columns of the ``trajectory`` view, in order."""


def _create(conn: sqlite3.Connection) -> None:
    db = sqlite_utils.Database(conn, execute_plugins=False, recursive_triggers=False)
    ids = {"thread_id": str, "checkpoint_ns": str}

    def table(
        name: str, columns: dict[str, type], pk: tuple[str, ...], *, clustered: bool = False
    ) -> None:
        if not clustered:
            db[name].create(
                columns, pk=pk, not_null=set(pk), defaults={"checkpoint_ns": ""}, if_not_exists=True
            )
            return
        sql = db.create_table_sql(
            name,
            columns,
            pk=pk,
            not_null=set(pk),
            defaults={"checkpoint_ns": ""},
            if_not_exists=True,
        )
        db.execute(sql.rstrip().rstrip(";") + " WITHOUT ROWID")

    db["aworld_meta"].create({"key": str, "value": str}, pk="key", if_not_exists=True)
    table(
        "checkpoints",
        {
            **ids,
            "checkpoint_id": str,
            "parent_checkpoint_id": str,
            "run_id": str,
            "step": int,
            "source": str,
            "created_at": str,
            "checkpoint": bytes,
            "metadata": str,
            # the transition that produced this checkpoint (see the trajectory view)
            "nodes": str,
            "duration_ms": float,
            "changes": str,
            "llm_usage": str,
            "tool_names": str,
            "reward": float,
        },
        ("thread_id", "checkpoint_ns", "checkpoint_id"),
        clustered=True,
    )
    db.execute(
        "CREATE INDEX IF NOT EXISTS checkpoints_run_id ON checkpoints (run_id) "
        "WHERE run_id IS NOT NULL"
    )
    table(
        "checkpoint_blobs",
        {
            **ids,
            "channel": str,
            "version": str,
            "kind": int,
            "type": str,
            "value": bytes,
            "base_version": str,
            "items": int,
            "nbytes": int,
            "digest": bytes,
            "depth": int,
        },
        # version before channel: the rows one step writes (every channel LangGraph bumps
        # gets the same new version) sit side by side at the end of the thread's range,
        # so a checkpoint's commit touches one leaf page instead of one per channel
        ("thread_id", "checkpoint_ns", "version", "channel"),
        clustered=True,
    )
    table(
        "checkpoint_writes",
        {
            **ids,
            "checkpoint_id": str,
            "task_id": str,
            "idx": int,
            "channel": str,
            "type": str,
            "value": bytes,
            "task_path": str,
        },
        ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
        clustered=True,
    )
    db.create_view(
        "trajectory",
        f"SELECT {', '.join(TRAJECTORY_COLUMNS)} FROM checkpoints",
        ignore=True,
    )
    db["aworld_meta"].insert_all(
        [
            {"key": "format", "value": FORMAT},
            {"key": "schema_version", "value": str(SCHEMA_VERSION)},
        ],
        pk="key",
        ignore=True,
    )
