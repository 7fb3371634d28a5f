"""Where checkpoints live: a SQLite file or a PostgreSQL database, behind one small interface:
:class:`Tx` inside a database's ``read()``, or given to ``each(fn)`` (one write transaction,
committed before ``each`` returns, or rolled back; ``aeach`` for an event loop). SQLite:
``BEGIN IMMEDIATE`` on a pooled connection in WAL mode, one writer at a time (the writes
asked for meanwhile commit together next); PostgreSQL: a psycopg 3 pool, writers at once.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import queue
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
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
HANDOVER_S = 0.05
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_CORRUPT = ("not a database", "malformed", "encrypted", "Could not decode")  # not a sound file


def is_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(_POSTGRES_SCHEMES)


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


def _to_wal(conn: sqlite3.Connection) -> str:
    """Switch the file to WAL (a no-op once it is), tried again while another connection opening
    it at once has it locked (SQLite's busy handler does not cover this) up to the timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class SqliteDatabase:
    """A SQLite file (created with its folders on first use). ``vet(tx)`` looks at a file
    not in WAL mode yet (new, or not made by a saver) before a connection switches it, and
    raises to leave it as it is."""

    dialect: Literal["sqlite"] = "sqlite"

    def __init__(
        self, path: Path, durability: Durability, vet: Callable[[Tx], object] | None = None
    ) -> None:
        self.path = path
        self.label = str(path)
        self._vet = vet
        self._sync = "FULL" if durability == "full" else "NORMAL"
        # the one used last comes first: its page cache is still good unless another wrote
        self._idle: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._lock = threading.Lock()  # held by the thread running a transaction
        self._lock_fd: int | None = None
        self._lock_pid = 0  # a forked child shares its parent's open file: its own then
        self._waiting: deque[_Job] = deque()  # for the next group (a deque: thread-safe)

    def _lock_file(self) -> int:
        """``<file>-lock``, which every process's writers ``flock`` one at a time (this one's
        hold ``self._lock`` first): the kernel wakes a waiter at once (SQLite's busy handler
        sleeps 1-100 ms between tries: two processes writing one file idled a third of the time)."""
        if self._lock_fd is None or self._lock_pid != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(f"{self.path}-lock", os.O_RDWR | os.O_CREAT, 0o644)
            self._lock_pid = os.getpid()
        return self._lock_fd

    @contextmanager
    def _writer(self, taken: bool = False) -> Iterator[None]:
        """The file's lock (``taken``: already), let go when the block ends."""
        if not taken:
            fcntl.flock(self._lock_file(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)  # type: ignore[arg-type]

    @property
    def read_only(self) -> bool:
        """Whether the file is there but not writable here (mode, folder, read-only mount,
        immutable): then it is opened for reading only."""
        if not self.path.exists():  # first: another connection may be making it right now
            return False
        return not (os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK))

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:  # with no -wal beside it, nothing is being written: immutable
            mode = "mode=ro" if Path(f"{self.path}-wal").exists() else "immutable=1"
            uri = f"file:{quote(str(self.path.resolve()))}?{mode}"
            return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        if self._vet is not None and conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            try:
                self._vet(Tx("sqlite", conn))
            except BaseException:
                conn.close()
                raise
        if (mode := _to_wal(conn)).lower() != "wal":
            raise ConfigError(
                f"cannot switch {self.path} to WAL journal mode (got {mode!r}); put the "
                "database on a local filesystem"
            )
        conn.execute(f"PRAGMA synchronous={self._sync}")
        return conn

    def read(self) -> AbstractContextManager[Tx]:
        """A read transaction: one consistent snapshot for every statement in it."""
        return self._session("BEGIN")

    def each(self, fn: Callable[[Tx], T]) -> T:
        """``fn(tx)`` in a write transaction committed before this returns, or raising. Group
        commit: writes asked for while a transaction runs go in the next, in order, each in a
        savepoint (one that raises is undone alone; a failed transaction raises in each)."""
        self._waiting.append(job := _Job(fn))
        self._lock.acquire()  # the transaction before has ended: commit what waits, this too
        self._drain()
        return self._outcome(job)  # type: ignore[no-any-return]

    async def aeach(self, fn: Callable[[Tx], T]) -> T:
        """:meth:`each` for an event loop, whose thread no write blocks: the write waits on a
        future (not in a thread). While the file is free its group commits here at once (it
        holds the loop for the commit, a fraction of a millisecond); else a thread waits for
        the file and hands the group back to this loop. Cancelled, the write still commits."""
        loop = asyncio.get_running_loop()
        self._waiting.append(job := _Job(fn, loop, future := loop.create_future()))
        self._start(loop)
        await future
        return self._outcome(job)  # type: ignore[no-any-return]

    def _outcome(self, job: _Job) -> Any:
        with self._errors(writes=True):  # as a write failing here would say (in this thread)
            if job.error is not None:
                raise job.error
        return job.result

    def _take(self) -> list[_Job]:
        return [self._waiting.popleft() for _ in range(len(self._waiting))]

    def _drain(self, taken: bool = False) -> None:
        """(Holding ``self._lock``.) Commit what waits, a group at a time, and let
        ``self._lock`` go: taken again if a write came meanwhile that nobody took."""
        while True:
            try:
                while self._waiting or taken:
                    self._commit(self._take(), taken)
                    taken = False
            finally:
                self._lock.release()
            if not self._waiting or not self._lock.acquire(blocking=False):
                return

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        """(In ``loop``.) Unless this process commits already, commit what waits: here if the
        file's lock is free, else once a thread has waited for it (:meth:`_handover`)."""
        while self._waiting and self._lock.acquire(blocking=False):
            try:  # no lock file (a read-only folder): the thread's commit says so
                fcntl.flock(self._lock_file(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return self._in_thread(self._handover, loop)
            self._commit_here()

    def _commit_here(self) -> None:
        """(Holding both locks, in a loop.) Commit what waits; SQLite's own lock taken (by a
        program not using ``<file>-lock``): a thread waits for it instead."""
        if self._commit(group := self._take(), taken=True, wait=False):
            self._lock.release()
        else:
            self._waiting.extendleft(reversed(group))
            self._in_thread(self._drain)

    def _in_thread(self, target: Callable[..., None], *args: Any) -> None:
        """``target(*args)`` in a thread of its own, holding ``self._lock``; if no thread can
        start (the interpreter exiting), what waits is committed here."""
        try:
            threading.Thread(
                target=target, args=args, name="aworld-graph-write", daemon=True
            ).start()
        except RuntimeError:
            self._drain()

    def _handover(self, loop: asyncio.AbstractEventLoop) -> None:
        """(A thread holding ``self._lock``.) Wait for the file's lock, then let ``loop``
        commit: its thread does not wait for the GIL at every statement, as this one would
        behind the busy loop. A loop that has not begun to within ``HANDOVER_S`` (closed, or
        blocked, say in a sync write of its own) leaves the commit to this thread."""
        try:
            fcntl.flock(self._lock_file(), fcntl.LOCK_EX)
        except OSError:
            return self._drain()  # its commit fails each write with the error, named
        claim, claimed = threading.Lock(), threading.Event()

        def on_loop() -> None:
            if claim.acquire(blocking=False):
                claimed.set()
                self._commit_here()
                self._start(loop)

        try:
            loop.call_soon_threadsafe(on_loop)
        except RuntimeError:  # closed
            pass
        else:
            if claimed.wait(HANDOVER_S):
                return
        if claim.acquire(blocking=False):
            self._drain(taken=True)

    def _commit(self, group: list[_Job], taken: bool = False, wait: bool = True) -> bool:
        """Commit ``group`` (``taken``: the file's lock is held already; let go after);
        ``False``, with nothing done, if not ``wait`` and SQLite's lock is taken."""
        try:
            with self._session("BEGIN IMMEDIATE", taken, wait) as tx:
                for job in group:
                    tx.run("SAVEPOINT job")
                    try:
                        job.result = job.fn(tx)
                    except Exception as exc:
                        job.error = exc
                        tx.run("ROLLBACK TO job")
                    tx.run("RELEASE job")
        except _Busy:
            return False
        except BaseException as exc:  # nothing of the group is stored
            for job in group:
                job.error = job.error or exc
        for job in group:
            if job.future is not None:
                with suppress(RuntimeError):  # its loop has closed: nobody waits
                    job.loop.call_soon_threadsafe(_settle, job.future)  # type: ignore[union-attr]
        return True

    def vacuum(self) -> None:
        """``VACUUM`` (outside any transaction), then the write-ahead log truncated."""
        self._lock.acquire()
        try:
            with self._session(None) as tx:
                tx.run("VACUUM")
                tx.run("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._drain()  # the writes that came meanwhile

    @contextmanager
    def _session(self, begin: str | None, taken: bool = False, wait: bool = True) -> Iterator[Tx]:
        writes = begin != "BEGIN"
        with self._errors(writes), self._writer(taken) if writes else nullcontext():
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                if not wait:  # opening one may wait (for WAL mode, for the schema)
                    raise _Busy from None
                conn = self._connect()
            if begin and not wait:  # SQLite's busy handler would block the event loop
                conn.execute("PRAGMA busy_timeout = 0")
                try:
                    conn.execute(begin)
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc):
                        raise
                    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
                    self._idle.put(conn)
                    raise _Busy from None
                conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            elif begin:
                conn.execute(begin)
            with conn:  # commits when the block ends, rolls back if it raises
                yield Tx("sqlite", conn)
            self._idle.put(conn)

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
        with suppress(queue.Empty):
            while True:
                self._idle.get_nowait().close()
        self._lock.acquire()
        try:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
        finally:
            self._drain()  # writes that came meanwhile reopen what they need


@dataclass(slots=True)
class _Job:
    """A write waiting for its group's transaction, then what it gave (an async one's
    ``future`` is set on its loop once it is done)."""

    fn: Callable[[Tx], Any]
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future[None] | None = None
    result: Any = None
    error: BaseException | None = None


class _Busy(Exception):
    """SQLite's write lock is taken, or no connection is open (raised before anything is done)."""


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():  # not cancelled
        future.set_result(None)


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
                url, min_size=1, max_size=max_connections, configure=configure, open=False,
                timeout=BUSY_TIMEOUT_S,
            )  # fmt: skip
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
        transaction, the pool's block ends it (no pipeline mode: it cost more than it saved)."""
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
