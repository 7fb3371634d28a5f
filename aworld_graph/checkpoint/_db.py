"""Where checkpoints live: a SQLite file or a PostgreSQL database, behind one small interface:
:class:`Tx` inside a database's ``read()`` (one snapshot), or given to ``each(fn)`` (one write
transaction, committed before ``each`` returns, or rolled back and raised; ``aeach`` is
``each`` in a worker thread, for an event loop).

The write path, and what the rest of the package relies on:

1. A SQLite write is, in the caller's thread: the database's ``threading.Lock``, an exclusive
   ``flock`` of ``<file>-lock`` (every saver of every process takes it, so processes take turns
   without SQLite's busy polling), ``BEGIN IMMEDIATE``, ``fn(tx)``, ``COMMIT``; the flock and
   the lock are let go in reverse order. So at most one write transaction runs on a file at
   a time, and a write reads the state every earlier write committed. Writers that take no
   flock (another program) meet SQLite's own write lock and its busy timeout.
2. A PostgreSQL write is one transaction on a pooled connection; several run at once. What
   must not interleave takes a transaction-level advisory lock inside the transaction
   (:mod:`._lease`, :mod:`._write`), released by its commit or rollback.
3. ``fn`` raising, or the commit failing, rolls the whole transaction back: a write is
   stored whole or not at all. A process killed between two statements of a write leaves
   nothing of it: SQLite rolls back the uncommitted tail of the log when the file is next
   opened, PostgreSQL aborts the transaction of a dropped connection; the kernel lets go of
   a dead process's flock. Each ``put`` and ``put_writes`` is one write, so a crash between
   two of them leaves every earlier one whole (LangGraph resumes from the last checkpoint and
   runs again the tasks whose writes are missing).
4. Who may write a thread: a saver that holds the thread's lease row (``checkpoint_leases``,
   :mod:`._lease`), or any saver while no live holder has it. ``put`` and ``put_writes`` read
   the lease in their own transaction before they write; taking the lease reads and writes
   it in one transaction (on PostgreSQL under the thread's exclusive advisory lock, which
   waits for writes of the thread in progress). So a check and the write it allows are
   atomic: a second run of a thread fails with ``ThreadBusy`` before it writes anything.
5. Async calls wait in a worker thread (``asyncio.to_thread``); the database starts no
   thread, keeps no queue and no timer. A cancelled ``aeach`` stops its caller waiting; the
   write in its thread commits or rolls back whole, as in 3.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import orjson

from ..errors import ConfigError, RuntimeFailure

__all__ = ["AT_CHECKPOINT", "Durability", "Tx", "Unpack", "is_url", "open_database"]

T = TypeVar("T")

Durability = Literal["normal", "full"]
"""``normal``: a committed write survives a killed process (SQLite ``synchronous=NORMAL``;
PostgreSQL ``synchronous_commit=off``, so a server crash may lose the last commits).
``full``: it also survives power loss or a server crash (``FULL``; ``on``)."""

AT_CHECKPOINT = "thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
"""The ``WHERE`` condition naming one checkpoint (of ``checkpoints`` or ``checkpoint_writes``)."""
Unpack = Callable[[bytes], Any]
"""Decodes a stored msgpack value (the saver's serializer)."""
BUSY_TIMEOUT_S = 60.0
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_CORRUPT = ("not a database", "malformed", "encrypted", "Could not decode")  # not a sound file


def is_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(_POSTGRES_SCHEMES)


def store_target(target: str | os.PathLike[str]) -> str | Path:
    """``target`` as a PostgreSQL URL or a SQLite path; any other URL is a ConfigError (a
    ``mysql://`` string would otherwise name a SQLite file ``mysql:/…``)."""
    if is_url(target):
        return str(target)
    if "://" in str(target):
        raise ConfigError(
            f"checkpoint store {str(target)!r}: use a postgresql:// URL or a SQLite file path"
        )
    return Path(target).expanduser()


class Tx:
    """A connection inside a transaction (or a read snapshot), ``?`` placeholders on both."""

    def __init__(self, dialect: Literal["sqlite", "postgres"], cursor: Any) -> None:
        self.dialect = dialect
        self._cursor = cursor  # a sqlite3 connection or a psycopg cursor: both execute()
        self._sql: Any = str if dialect == "sqlite" else _pg

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._cursor.execute(self._sql(sql), params).fetchall()  # type: ignore[no-any-return]

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        return self._cursor.execute(self._sql(sql), params).fetchone()  # type: ignore[no-any-return]

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._cursor.execute(self._sql(sql), params)

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if len(rows) == 1:  # psycopg's executemany sets up a pipeline even for one row
            self._cursor.execute(self._sql(sql), rows[0])
        elif rows:
            self._cursor.executemany(self._sql(sql), rows)

    def json(self, value: Any) -> Any:
        """A JSON column's value as read here: text on SQLite, decoded already on PostgreSQL."""
        return orjson.loads(value) if isinstance(value, (str, bytes)) else value


class SqliteDatabase:
    """A SQLite file (created with its folders on first use) in WAL mode: readers read beside
    the one writer. ``vet(tx)`` looks at a file not in WAL mode yet (new, or not made by a
    saver) before a connection switches it, and raises to leave it as it is."""

    dialect: Literal["sqlite"] = "sqlite"

    def __init__(
        self, path: Path, durability: Durability, vet: Callable[[Tx], object] | None = None
    ) -> None:
        self.path = path
        self.label = str(path)
        self._vet = vet
        self._sync = "FULL" if durability == "full" else "NORMAL"
        # the connection given back last is handed out first: SQLite keeps a connection's page
        # cache only while no other connection has written since it last read
        self._idle: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._lock = threading.Lock()  # this saver's writers, one at a time
        self._lock_fd: int | None = None
        self._lock_pid = 0  # a forked child shares its parent's open file: it opens its own

    @property
    def read_only(self) -> bool:
        """Whether the file is there but not writable here (mode, folder, read-only mount,
        immutable): then it is opened for reading only."""
        if not self.path.exists():  # first: another connection may be making it right now
            return False
        return not (os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK))

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """This process's and every other's writers one at a time: the saver's lock, then an
        exclusive ``flock`` of ``<file>-lock``, both let go when the block ends (the kernel
        lets go of the flock of a process that dies)."""
        with self._lock:
            if self._lock_fd is None or self._lock_pid != os.getpid():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._lock_fd = os.open(f"{self.path}-lock", os.O_RDWR | os.O_CREAT, 0o644)
                self._lock_pid = os.getpid()
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _connect(self, in_turn: bool) -> sqlite3.Connection:
        """A new connection; a file not in WAL mode yet is vetted and switched in a write
        turn (``in_turn``: the caller has it), so two processes never switch it at once."""
        if self.read_only:  # with no -wal beside it, nothing is being written: immutable
            mode = "mode=ro" if Path(f"{self.path}-wal").exists() else "immutable=1"
            uri = f"file:{quote(str(self.path.resolve()))}?{mode}"
            return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                with nullcontext() if in_turn else self._turn():
                    self._to_wal(conn)
            conn.execute(f"PRAGMA synchronous={self._sync}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _to_wal(self, conn: sqlite3.Connection) -> None:
        if self._vet is not None:
            self._vet(Tx("sqlite", conn))
        if (mode := str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])).lower() != "wal":
            raise ConfigError(
                f"cannot switch {self.path} to WAL journal mode (got {mode!r}); put the "
                "database on a local filesystem"
            )

    @contextmanager
    def _connection(self, in_turn: bool) -> Iterator[sqlite3.Connection]:
        """A pooled connection, given back when the block ends (closed instead if a
        transaction is still open on it: one whose rollback failed)."""
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = self._connect(in_turn)
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.close()
            else:
                self._idle.put(conn)

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """A read transaction: one consistent snapshot for every statement in it."""
        with self._errors(writes=False), self._connection(in_turn=False) as conn:
            conn.execute("BEGIN")
            try:
                yield Tx("sqlite", conn)
            finally:
                conn.execute("ROLLBACK")  # it wrote nothing

    def each(self, fn: Callable[[Tx], T]) -> T:
        """``fn(tx)`` in a write transaction, committed before this returns; if ``fn`` or the
        commit raises, nothing of it is stored and this raises."""
        with self._errors(writes=True), self._turn(), self._connection(in_turn=True) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(Tx("sqlite", conn))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

    async def aeach(self, fn: Callable[[Tx], T]) -> T:
        """:meth:`each` in a worker thread. Cancelled, the caller stops waiting; the write
        goes on in its thread and commits or rolls back whole."""
        return await asyncio.to_thread(self.each, fn)

    def vacuum(self) -> None:
        """``VACUUM`` (outside any transaction), then the write-ahead log truncated."""
        with self._errors(writes=True), self._turn(), self._connection(in_turn=True) as conn:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @contextmanager
    def _errors(self, writes: bool) -> Iterator[None]:
        """SQLite's errors as the project's, saying what to do; a write that failed (the lock
        file or SQLite's) on a store that is read-only here says so."""
        try:
            yield
        except (OSError, sqlite3.Error) as exc:
            if writes and self.read_only:  # asked only then: a write checks nothing first
                raise ConfigError(
                    f"checkpoint database {self.path} is read-only here (file or folder not "
                    "writable, a read-only mount or immutable): threads, history and export "
                    "work on it; to run or change runs, copy it somewhere writable or point "
                    "AWORLD_GRAPH_DB / --db at another file"
                ) from None
            if isinstance(exc, OSError):
                raise
            text = str(exc)
            if isinstance(exc, sqlite3.DatabaseError) and any(word in text for word in _CORRUPT):
                raise ConfigError(
                    f"checkpoint database {self.path} is not a valid SQLite file or is corrupt "
                    f"({text}). Move it aside (or restore a backup) and run again, or point "
                    "AWORLD_GRAPH_DB / --db at another file"
                ) from exc
            if "unable to open" in text or "readonly" in text:
                raise ConfigError(
                    f"checkpoint database {self.path}: {text}. Check that the file and its "
                    "folder exist and are writable (SQLite also writes <file>-wal and "
                    "<file>-shm beside it), or point AWORLD_GRAPH_DB / --db at another file"
                ) from exc
            raise RuntimeFailure(f"checkpoint database {self.path}: {exc!r}") from exc

    def close(self) -> None:
        """Close the idle connections and the lock file, once the write in progress (if
        any) has ended; used again, the database opens what it needs anew."""
        with self._lock:
            with suppress(queue.Empty):
                while True:
                    self._idle.get_nowait().close()
            if self._lock_fd is not None and self._lock_pid == os.getpid():
                os.close(self._lock_fd)
            self._lock_fd = None


@lru_cache(maxsize=512)
def _pg(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresDatabase:
    """A PostgreSQL database through a psycopg 3 connection pool."""

    dialect: Literal["postgres"] = "postgres"

    def __init__(self, url: str, durability: Durability, max_connections: int = 8) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise ConfigError(
                "TrajectorySaver('postgresql://…') needs psycopg 3 and psycopg-pool: "
                "pip install 'aworld-graph[postgres]'"
            ) from None
        self._psycopg, self._url = psycopg, url
        scheme, _, rest = url.partition("://")
        creds, at, host = rest.rpartition("@")  # messages name the URL without its password
        self.label = f"{scheme}://{creds.split(':', 1)[0]}@{host}" if at else url
        commit = "on" if durability == "full" else "off"

        def configure(conn: Any) -> None:
            conn.execute(f"SET synchronous_commit = {commit}")
            conn.commit()

        try:  # one direct connection first: its error says what is wrong, at once
            psycopg.connect(url, connect_timeout=10).close()
            self._pool = ConnectionPool(
                url,
                min_size=1,
                max_size=max_connections,
                configure=configure,
                open=False,
                timeout=BUSY_TIMEOUT_S,
            )
            self._pool.open(wait=True, timeout=30.0)
        except Exception as exc:  # psycopg.Error, or the pool timing out
            if hasattr(self, "_pool"):
                self._pool.close()
            raise ConfigError(
                f"cannot connect to the checkpoint database {self.label}: {exc}. Check the "
                "URL (postgresql://user@host:port/db), that the server runs and accepts you"
            ) from None

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except self._psycopg.Error as exc:
            raise RuntimeFailure(
                f"checkpoint database {self.label}: {type(exc).__name__}: {exc}"
            ) from exc

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """A read-only ``REPEATABLE READ`` snapshot. Here and in :meth:`each` psycopg begins the
        transaction, the pool's block ends it."""
        with self._errors(), self._pool.connection() as conn:
            conn.isolation_level = self._psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            yield Tx("postgres", conn.cursor())

    def each(self, fn: Callable[[Tx], T]) -> T:
        """``fn(tx)`` in a write transaction committed before this returns, or raising."""
        with self._errors(), self._pool.connection() as conn:
            conn.isolation_level, conn.read_only = None, False
            return fn(Tx("postgres", conn.cursor()))

    async def aeach(self, fn: Callable[[Tx], T]) -> T:
        return await asyncio.to_thread(self.each, fn)  # a pooled connection, in a thread

    def vacuum(self) -> None:
        with self._errors(), self._psycopg.connect(self._url, autocommit=True) as conn:
            conn.execute("VACUUM")  # on a connection of its own: it may take long

    def close(self) -> None:
        self._pool.close()


def open_database(
    target: str | Path, durability: Durability, vet: Callable[[Tx], object] | None = None
) -> SqliteDatabase | PostgresDatabase:
    """A :class:`PostgresDatabase` for a ``postgresql://`` URL, else a :class:`SqliteDatabase`
    (with ``vet``)."""
    if is_url(target):
        return PostgresDatabase(str(target), durability)
    text = str(target)
    if "://" in text:
        raise ConfigError(f"checkpoint store {text!r}: use a postgresql:// URL or SQLite file")
    if text == ":memory:" or text.startswith("file::memory"):
        raise ConfigError(
            "TrajectorySaver needs a database file, not ':memory:' (use a temporary file, "
            "or LangGraph's InMemorySaver)"
        )
    return SqliteDatabase(Path(target).expanduser(), durability, vet)
