"""Connections and write transactions for one database file.

Writers in this process take one lock per file (so they never spin in SQLite's busy
handler against each other) and open ``BEGIN IMMEDIATE`` transactions; writers in other
processes wait on SQLite's busy timeout. Readers use pooled connections without the lock
(WAL lets them run beside a writer).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import AWorldGraphError, ConfigError
from ._schema import Durability, connect, database_error, ensure_schema

__all__ = ["Store", "Head"]

_FILE_LOCKS: dict[str, threading.Lock] = {}
_FILE_LOCKS_GUARD = threading.Lock()
_POOL_SIZE = 8
_CACHE_SIZE = 4096


def _file_lock(path: Path) -> threading.Lock:
    key = os.path.realpath(path)
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(key, threading.Lock())


@dataclass(frozen=True, slots=True)
class Head:
    """The last checkpoint this process wrote in a thread/namespace."""

    checkpoint_id: str
    """Its id."""
    versions: dict[str, Any]
    """Its channel versions."""
    ts: str
    """Its timestamp."""


@dataclass(eq=False)
class Store:
    """Shared by a saver and its copies: the file, the connection pool, small caches."""

    path: Path
    """Database file."""
    durability: Durability
    """``normal`` or ``full`` (see :data:`._schema.Durability`)."""
    write_lock: threading.Lock = field(init=False)
    _pool: list[sqlite3.Connection] = field(default_factory=list, init=False)
    _pool_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _ready: bool = field(default=False, init=False)
    _pid: int = field(default_factory=os.getpid, init=False)
    _executor: ThreadPoolExecutor | None = field(default=None, init=False)
    heads: OrderedDict[tuple[str, str], Head] = field(default_factory=OrderedDict, init=False)
    children: OrderedDict[tuple[str, str, str], str] = field(
        default_factory=OrderedDict, init=False
    )

    def __post_init__(self) -> None:
        self.write_lock = _file_lock(self.path)

    # -- connections -------------------------------------------------------------------

    def _acquire(self) -> sqlite3.Connection:
        if self._pid != os.getpid():  # forked: never share connections with the parent
            self._pool, self._pool_lock, self._pid = [], threading.Lock(), os.getpid()
            self._ready, self._executor = False, None
            self.write_lock = _file_lock(self.path)
        with self._pool_lock:
            if self._pool:
                return self._pool.pop()
        try:
            if not self._ready:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = connect(self.path, self.durability)
        except sqlite3.Error as exc:
            raise database_error(self.path, exc) from None
        except OSError as exc:
            raise ConfigError(f"cannot open checkpoint database {self.path}: {exc}") from None
        if not self._ready:
            try:
                with self.write_lock:
                    ensure_schema(conn, self.path)
            except BaseException:
                conn.close()
                raise
            self._ready = True
        return conn

    def _release(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        with self._pool_lock:
            if len(self._pool) < _POOL_SIZE:
                self._pool.append(conn)
                return
        conn.close()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A connection inside a read transaction (one consistent snapshot)."""
        conn = self._acquire()
        try:
            conn.execute("BEGIN")
            yield conn
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise database_error(self.path, exc) from None
        finally:
            self._release(conn)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A connection inside ``BEGIN IMMEDIATE``; commits on success, rolls back on error."""
        conn = self._acquire()
        try:
            with self.write_lock:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise database_error(self.path, exc) from None
        finally:
            self._release(conn)

    @contextmanager
    def autocommit(self) -> Iterator[sqlite3.Connection]:
        """A connection outside any transaction, holding the write lock (for VACUUM)."""
        conn = self._acquire()
        try:
            with self.write_lock:
                yield conn
        except sqlite3.Error as exc:
            raise database_error(self.path, exc) from None
        finally:
            self._release(conn)

    def executor(self) -> ThreadPoolExecutor:
        """Worker threads that run the async methods' disk I/O off the event loop."""
        with self._pool_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(4, thread_name_prefix="aworld-checkpoint")
            return self._executor

    def close(self) -> None:
        """Close pooled connections and stop the worker threads."""
        with self._pool_lock:
            pool, self._pool = self._pool, []
            executor, self._executor = self._executor, None
        for conn in pool:
            conn.close()
        if executor is not None:
            executor.shutdown(wait=True)

    # -- small caches --------------------------------------------------------------------

    def remember(self, thread_id: str, ns: str, parent_id: str | None, head: Head) -> None:
        """Note the checkpoint just written (its versions serve the next delta)."""
        with self._pool_lock:
            self.heads[(thread_id, ns)] = head
            self.heads.move_to_end((thread_id, ns))
            if len(self.heads) > _CACHE_SIZE:
                self.heads.popitem(last=False)
            if parent_id:
                self.children[(thread_id, ns, parent_id)] = head.checkpoint_id
                if len(self.children) > _CACHE_SIZE:
                    self.children.popitem(last=False)

    def head(self, thread_id: str, ns: str) -> Head | None:
        """The cached last checkpoint of ``(thread_id, ns)``, if this process wrote it."""
        with self._pool_lock:
            return self.heads.get((thread_id, ns))

    def child(self, thread_id: str, ns: str, parent_id: str) -> str | None:
        """A checkpoint this process wrote on top of ``parent_id``, if any."""
        with self._pool_lock:
            return self.children.get((thread_id, ns, parent_id))

    def forget(self, thread_ids: set[str] | None = None) -> None:
        """Drop cached heads (all, or those of ``thread_ids``) after deletions."""
        with self._pool_lock:
            for cache in (self.heads, self.children):
                for key in list(cache):
                    if thread_ids is None or key[0] in thread_ids:
                        del cache[key]


def wrap_errors(path: Path, exc: BaseException) -> BaseException:
    """Library errors pass through; SQLite errors become project errors naming the file."""
    if isinstance(exc, AWorldGraphError):
        return exc
    if isinstance(exc, sqlite3.Error):
        return database_error(path, exc)
    return exc
