"""Connections, write batches and read batches for one database file.

Writes are *group-committed*. A sync caller queues its payload and takes the per-file lock;
whoever holds the lock stores every queued payload together and commits once (the others
find theirs done). A batch whose apply function offers ``one_statement`` and needs no reads
is stored with that single statement (its own transaction); otherwise it runs in one
``BEGIN IMMEDIATE`` transaction. Async callers queue for a writer thread that does the same,
so the event loop never waits on the disk. If a batch fails, each payload is retried alone,
so one bad write does not fail the others. With ``full`` durability each caller returns only
after a flush of the write-ahead log that started after its commit (:meth:`Store._durable`),
and a caller may first wait a moment for another's commit to take its payload along (the
``delay`` of :meth:`Store.submit`), so both share one flush. With ``normal`` durability a
task's ordinary writes may be *deferred* (:meth:`Store.defer`): the caller returns at once
and they are stored with the next commit — in LangGraph's loop the next checkpoint's — or
by the writer thread a moment later, and before any read or write through a store on the
same file in this process.
Writers in this process never spin in SQLite's busy handler against each other; writers in
other processes wait on SQLite's busy timeout. Readers use pooled connections without the
lock (WAL lets them read beside a writer); async lookups are batched by a reader thread.

Threads here hand the GIL back and forth with the caller's: every SQLite call releases it,
and getting it back can take a whole switch interval while an event loop is busy, so the
code keeps the number of SQLite calls per batch small rather than each call cheap.
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ConfigError, RuntimeFailure
from ._schema import Durability, connect, database_error, ensure_schema

__all__ = ["Store", "Head", "flush_file"]

T = TypeVar("T")

log = logging.getLogger(__name__)

_FILE_LOCKS: dict[str, threading.RLock] = {}


class _Peers:
    """The stores open on one file in this process (a read or write through any of them
    first stores the others' deferred writes)."""

    def __init__(self) -> None:
        self.refs: tuple[weakref.ref[Store], ...] = ()

    def add(self, store: Store) -> None:
        with _FILE_LOCKS_GUARD:
            live = tuple(ref for ref in self.refs if ref() is not None)
            self.refs = (*live, weakref.ref(store))

    def stores(self) -> list[Store]:
        return [store for ref in self.refs if (store := ref()) is not None]


_FILE_STORES: dict[str, _Peers] = {}
"""Realpath → the stores open on it in this process."""
_FILE_LOCKS_GUARD = threading.Lock()
_POOL_SIZE = 8
_CACHE_SIZE = 4096
_BATCH = 512
_IDLE_S = 30.0


_FORKS = [0]
"""Bumped in a forked child, so a store notices the fork without a syscall per write."""


def _reset_file_locks() -> None:
    global _FILE_LOCKS_GUARD
    _FILE_LOCKS_GUARD = threading.Lock()  # a parent thread may have held it while forking
    _FILE_LOCKS.clear()
    _FILE_STORES.clear()
    _FORKS[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_file_locks)


def _file_lock(path: Path) -> threading.RLock:
    key = os.path.realpath(path)
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(key, threading.RLock())


def _file_stores(path: Path) -> _Peers:
    key = os.path.realpath(path)
    with _FILE_LOCKS_GUARD:
        return _FILE_STORES.setdefault(key, _Peers())


def flush_file(path: Path) -> None:
    """Store what the stores open on ``path`` in this process have queued (for readers
    that open their own connection)."""
    peers = _FILE_STORES.get(os.path.realpath(path))
    for store in peers.stores() if peers is not None else ():
        store.flush()


def _flush_all() -> None:
    """At interpreter exit, store every write still deferred (daemon writers stop unasked)."""
    for peers in list(_FILE_STORES.values()):
        for store in peers.stores():
            try:
                store.flush()
            except Exception as exc:  # noqa: BLE001 - exiting: report, do not raise
                log.error("aworld-graph: deferred writes to %s were lost: %s", store.path, exc)


atexit.register(_flush_all)


@dataclass(frozen=True, slots=True)
class Head:
    """The last checkpoint this process wrote in a thread/namespace."""

    checkpoint_id: str
    """Its id."""
    versions: dict[str, Any]
    """Its channel versions."""
    ts: str
    """Its timestamp."""
    lists: dict[str, Any] = field(default_factory=dict)
    """Channel → ``BaseInfo`` of the list values it stored (what the next delta extends)."""
    shape: dict[str, Any] | None = None
    """Its skeleton, when big enough for the next one to be stored as a delta of it."""
    depth: int = 0
    """Deltas between its stored skeleton and the nearest whole one."""


Apply = Callable[["Store", sqlite3.Connection, list[Any]], list[Any]]
"""Stores a list of payloads inside the open transaction; returns one result per payload."""

ReadBatch = Callable[[sqlite3.Connection, list[Any]], dict[Any, Any]]
"""Answers a list of read keys inside one read transaction: key → result (absent: ``None``)."""


@dataclass(eq=False, slots=True)
class _Ticket:
    """One queued write (or async read) and, once done, its outcome."""

    apply: Apply | ReadBatch
    payload: Any
    future: asyncio.Future[Any] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    done: bool = False
    committed: bool = False
    """The transaction that held it has ended (committed or failed)."""
    seq: int = 0
    """The number of the commit that stored it (0: not stored)."""
    result: Any = None
    error: BaseException | None = None
    settled: threading.Event | None = None
    """Set once the ticket is stored and durable (for a caller waiting on someone else's
    commit, see :meth:`Store.submit`'s ``delay``)."""
    due: float = 0.0
    """When the writer thread stores it (``time.monotonic()``; 0: at once). Deferred
    tickets (:meth:`Store.defer`) wait for another commit until then."""
    owner: Any = None
    """Whose deferred write it is (a failure is reported to the owner's next write)."""


def _call_each(store: Store, conn: sqlite3.Connection, ops: list[Any]) -> list[Any]:
    return [op(conn) for op in ops]


def _nothing(conn: sqlite3.Connection) -> None:
    """An empty write (:meth:`Store.aflush` queues one to have the writer commit the queue)."""


def _lost_error(path: Path, exc: BaseException) -> RuntimeFailure:
    error = RuntimeFailure(
        f"checkpoint database {path}: a checkpoint or a task's writes, queued for the next "
        f"commit, could not be stored ({exc}); the run can resume from its last stored "
        "checkpoint, which redoes what came after it"
    )
    error.__cause__ = exc
    return error


def _settle(tickets: list[_Ticket]) -> None:
    for ticket in tickets:
        future = ticket.future
        if future is None or future.done():
            continue
        if ticket.error is not None:
            future.set_exception(ticket.error)
        else:
            future.set_result(ticket.result)


@dataclass(eq=False)
class Store:
    """Shared by a saver and its copies: the file, the connection pool, small caches."""

    path: Path
    """Database file."""
    durability: Durability
    """``normal`` or ``full`` (see :data:`._schema.Durability`)."""
    write_lock: threading.RLock = field(init=False)
    _pool: list[sqlite3.Connection] = field(default_factory=list, init=False)
    _pool_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _cache_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    """Guards the caches below (apart from the pool lock, which readers take: a writer
    waiting on a reader that waits for the GIL would lose a thread switch interval)."""
    _ready: bool = field(default=False, init=False)
    _pid: int = field(default_factory=os.getpid, init=False)
    _forks: int = field(default_factory=lambda: _FORKS[0], init=False)
    _executor: ThreadPoolExecutor | None = field(default=None, init=False)
    _queue: list[_Ticket] = field(default_factory=list, init=False)
    _queue_cond: threading.Condition = field(default_factory=threading.Condition, init=False)
    _writer: threading.Thread | None = field(default=None, init=False)
    _stopping: bool = field(default=False, init=False)
    _seq: int = field(default=0, init=False)
    _reads: list[_Ticket] = field(default_factory=list, init=False)
    _reads_cond: threading.Condition = field(default_factory=threading.Condition, init=False)
    _reader: threading.Thread | None = field(default=None, init=False)
    _synced: int = field(default=0, init=False)
    """Every commit numbered up to this one is known to be on disk (``full``). Inline
    commits set it without the flush lock: a lost update leaves it lower than it could be,
    which costs at most one extra flush, never a missing one."""
    _inline: sqlite3.Connection | None = field(default=None, init=False)
    _callers: tuple[int, ...] = field(default=(0, 0, 0, 0), init=False)
    """The last few threads that wrote through :meth:`submit` (0: none yet)."""
    _defers: int = field(default=0, init=False)
    """Deferred tickets queued so far (the writer polls while this grows)."""
    _watching: bool = field(default=False, init=False)
    """The writer thread is polling for deferred tickets (a new one need not wake it)."""
    _window: float = field(default=0.0, init=False)
    """The longest a deferred ticket waits (the writer's polling interval)."""
    _lost: dict[Any, BaseException] = field(default_factory=dict, init=False)
    """Owner → why its deferred writes could not be stored (raised by its next write through
    here; owner ``None``: by the next write of anyone)."""
    _sync_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    heads: OrderedDict[tuple[str, str], Head] = field(default_factory=OrderedDict, init=False)
    children: OrderedDict[tuple[str, str, str], str] = field(
        default_factory=OrderedDict, init=False
    )
    ran: OrderedDict[tuple[str, str, str], list[str]] = field(
        default_factory=OrderedDict, init=False
    )
    written: OrderedDict[tuple[str, str], str] = field(default_factory=OrderedDict, init=False)
    """Thread/namespace → the newest checkpoint id tasks have written on top of."""
    saved: OrderedDict[tuple[str, str], str] = field(default_factory=OrderedDict, init=False)
    """Thread/namespace → the newest checkpoint id put."""
    failed: OrderedDict[tuple[str, str], str] = field(default_factory=OrderedDict, init=False)
    """Thread/namespace → the newest checkpoint id a failed write was for."""
    ended: OrderedDict[tuple[str, str, str], None] = field(default_factory=OrderedDict, init=False)
    """Checkpoints an error, interrupt or resume was written for (the run may stop there)."""

    def __post_init__(self) -> None:
        self.write_lock = _file_lock(self.path)
        self._wal_path = f"{self.path}-wal"
        self._peers = _file_stores(self.path)
        self._peers.add(self)

    # -- connections -------------------------------------------------------------------

    def _after_fork(self) -> None:
        """In a forked child, start afresh: never share connections, locks or threads."""
        if self._forks != _FORKS[0] and self._pid != os.getpid():
            self._pool, self._pool_lock, self._pid = [], threading.Lock(), os.getpid()
            self._cache_lock = threading.Lock()
            self._forks = _FORKS[0]
            self._ready, self._executor, self._writer = False, None, None
            self._queue, self._queue_cond = [], threading.Condition()
            self._reads, self._reads_cond, self._reader = [], threading.Condition(), None
            self.write_lock = _file_lock(self.path)
            self._seq, self._synced, self._sync_lock = 0, 0, threading.Lock()
            self._inline = None  # the parent's: never used here
            self._defers, self._watching, self._lost = 0, False, {}
            self._peers = _file_stores(self.path)
            self._peers.add(self)

    def _acquire(self) -> sqlite3.Connection:
        self._after_fork()
        with self._pool_lock:
            if self._pool:
                return self._pool.pop()
        conn: sqlite3.Connection | None = None
        try:
            if not self._ready:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = connect(self.path, self.durability)
            if not self._ready:
                with self.write_lock:
                    ensure_schema(conn, self.path)
                self._ready = True
            return conn
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise database_error(self.path, exc) from None
            if isinstance(exc, UnicodeDecodeError):  # SQLite's message about a garbled file
                raise database_error(self.path, sqlite3.DatabaseError("malformed")) from None
            if isinstance(exc, OSError):
                raise ConfigError(f"cannot open checkpoint database {self.path}: {exc}") from None
            raise

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
        """A connection inside a read transaction (one consistent snapshot), which sees
        every write this process deferred (:meth:`defer`)."""
        self._flush_peers()
        conn = self._acquire()
        try:
            conn.execute("BEGIN")
            yield conn
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise database_error(self.path, exc) from None
        except UnicodeDecodeError:  # text SQLite could not hand back: a garbled file
            raise database_error(self.path, sqlite3.DatabaseError("malformed")) from None
        finally:
            self._release(conn)

    def run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``op(conn)`` in a write transaction (see :meth:`submit`)."""
        return self.submit(_call_each, op)  # type: ignore[no-any-return]

    def submit(self, apply: Apply, payload: Any, delay: float = 0.0, owner: Any = None) -> Any:
        """Store ``payload`` with ``apply`` inside a write transaction, possibly together
        with other writers' payloads; returns its result or raises its error.

        With ``delay`` (seconds) the caller first waits that long for another caller's
        commit to take its payload along, and commits it itself only if none did (a commit
        delay, as PostgreSQL's ``commit_delay``): with ``full`` durability a task's writes
        then share the flush of the checkpoint LangGraph saves next, one flush per step
        instead of two. It still returns only once its payload is stored and flushed. A
        caller that alone wrote lately does not wait (it would wait for itself).
        Without ``delay`` the caller never waits for company; payloads queued by other
        threads meanwhile do share the commit. Deferred payloads of ``owner`` (see
        :meth:`defer`) that could not be stored fail this call, before or after its commit.
        """
        self._after_fork()
        self.check_lost(owner)
        self._flush_peers(others_only=True)
        ticket = _Ticket(apply, payload)
        me, recent = threading.get_ident(), self._callers
        if delay > 0 and any(caller not in (0, me) for caller in recent):
            ticket.settled = threading.Event()
        if recent[-1] != me:
            self._callers = (*recent[1:], me)
        with self._queue_cond:
            self._queue.append(ticket)
        if ticket.settled is not None and ticket.settled.wait(delay):
            if ticket.error is not None:
                raise ticket.error
            self.check_lost(owner)
            return ticket.result
        self._store_queued(ticket)
        if ticket.error is not None:
            raise ticket.error
        self.check_lost(owner)  # a write of the owner's this commit took along failed
        return ticket.result

    def defer(self, apply: Apply, payload: Any, window: float, owner: Any = None) -> None:
        """Queue ``payload`` to be stored with the next commit, and return at once.

        The next caller of :meth:`submit` takes it along (in LangGraph's loop: the checkpoint
        saved after the task whose writes these are); if none has within ``window``
        seconds, the writer thread commits it. Reads and writes through any store on the
        same file in this process store it first, so they see it; so do :meth:`close` and
        interpreter exit. If it cannot be stored, the next write of ``owner`` (any write,
        for ``None``) through this store raises why. A killed process loses deferred
        payloads not yet committed (at most ``window`` seconds' worth, give or take the
        interpreter's thread switch interval).
        """
        self._after_fork()
        self.check_lost(owner)
        if not self._ready:  # a file that is not a checkpoint store fails here, not later
            self._release(self._acquire())
        ticket = _Ticket(apply, payload, due=time.monotonic() + window, owner=owner)
        with self._queue_cond:
            self._queue.append(ticket)
            self._defers += 1
            if not self._watching or window < self._window:
                self._window = min(window, self._window) if self._watching else window
                self._watching = True
                self._writer = self._running(self._writer, self._write_forever, "writer")
                self._queue_cond.notify()

    def flush(self) -> None:
        """Store every queued payload now (deferred ones included), and wait for a batch
        the writer thread has taken but not committed yet."""
        self._after_fork()
        with self._queue_cond:
            last = self._queue[-1] if self._queue else None
        if last is not None:
            self._store_queued(last)
        with self.write_lock:  # the writer commits holding it
            pass

    def _store_queued(self, until: _Ticket | None = None) -> None:
        """Commit queued tickets, a batch at a time, until ``until`` is committed (or, without
        it, one batch); then wait for their flush (``full``) and hand out the outcomes."""
        done: list[_Ticket] = []
        with self.write_lock:
            while until is None or not until.committed:
                batch = self._drain()
                if not batch:
                    break
                self._commit(batch)
                done += batch
                if until is None:
                    break
        self._durable(max([t.seq for t in done] + [until.seq if until is not None else 0]))
        if done:
            self._finish(done)

    def _flush_peers(self, *, others_only: bool = False) -> None:
        """Store the deferred payloads of every store on this file (or of the others)."""
        if others_only and len(self._peers.refs) < 2:
            return
        for store in self._peers.stores():
            if store._queue and not (others_only and store is self):
                store.flush()

    def check_lost(self, owner: Any = None, *, flush: bool = True) -> None:
        """Raise, once, why deferred writes of ``owner`` (or of no owner) could not be
        stored (see :meth:`defer`). What is still queued is stored first (``flush``; async
        callers use :meth:`acheck_lost` instead): the caller's run stops here, and no later
        write of it would take the queue along."""
        exc = self._take_lost(owner)
        if exc is None:
            return
        if flush:
            try:
                self.flush()
            except Exception as more:  # noqa: BLE001 - the first failure is the one to report
                log.error("aworld-graph: queued writes to %s failed: %s", self.path, more)
        raise _lost_error(self.path, exc)

    async def acheck_lost(self, owner: Any = None) -> None:
        """:meth:`check_lost` for the event loop: the writer thread stores the queue."""
        exc = self._take_lost(owner)
        if exc is None:
            return
        try:
            await self.aflush()
        except Exception as more:  # noqa: BLE001 - the first failure is the one to report
            log.error("aworld-graph: queued writes to %s failed: %s", self.path, more)
        raise _lost_error(self.path, exc)

    async def aflush(self) -> None:
        """:meth:`flush` for the event loop: the writer thread commits what is queued (an
        empty write queued behind it resolves once a batch it had already taken is in)."""
        await self.submit_async(_call_each, _nothing)

    def _take_lost(self, owner: Any) -> BaseException | None:
        if not self._lost:
            return None
        return self._lost.pop(owner, None) or self._lost.pop(None, None)

    def discard_lost(self, thread_ids: set[str]) -> None:
        """Drop the failures kept for deleted threads (a new thread of the same id starts
        clean)."""
        for owner in list(self._lost):
            if isinstance(owner, tuple) and owner[0] in thread_ids:
                self._lost.pop(owner, None)

    def submit_async(self, apply: Apply, payload: Any) -> asyncio.Future[Any]:
        """Queue ``payload`` for the writer thread; the future resolves once committed."""
        self._after_fork()
        loop = asyncio.get_running_loop()
        ticket = _Ticket(apply, payload, loop.create_future(), loop)
        with self._queue_cond:
            self._queue.append(ticket)
            self._writer = self._running(self._writer, self._write_forever, "writer")
            self._queue_cond.notify()
        assert ticket.future is not None
        return ticket.future

    def _running(
        self, thread: threading.Thread | None, target: Callable[[], None], role: str
    ) -> threading.Thread:
        """``thread`` if it is alive, else a new daemon thread running ``target``."""
        if thread is not None and thread.is_alive():
            return thread
        self._stopping = False
        thread = threading.Thread(target=target, name=f"aworld-checkpoint-{role}", daemon=True)
        thread.start()
        return thread

    def submit_read(self, load: ReadBatch, key: Any) -> asyncio.Future[Any]:
        """Queue a read for the reader thread, which answers every read queued meanwhile
        with ``load(conn, keys)`` inside one read transaction (a few SQLite calls for many
        concurrent reads, instead of a worker-thread hop and a transaction each)."""
        self._after_fork()
        loop = asyncio.get_running_loop()
        ticket = _Ticket(load, key, loop.create_future(), loop)
        with self._reads_cond:
            self._reads.append(ticket)
            self._reader = self._running(self._reader, self._read_forever, "reader")
            self._reads_cond.notify()
        assert ticket.future is not None
        return ticket.future

    def _read_forever(self) -> None:
        while True:
            with self._reads_cond:
                if not self._reads_cond.wait_for(
                    lambda: self._reads or self._stopping, timeout=_IDLE_S
                ):
                    self._reader = None
                    return
                if not self._reads:
                    return
                batch, self._reads = self._reads, []
            groups: dict[Any, list[_Ticket]] = {}
            for ticket in batch:
                groups.setdefault(ticket.apply, []).append(ticket)
            for load, tickets in groups.items():
                try:
                    with self.read() as conn:
                        found = load(conn, [t.payload for t in tickets])  # type: ignore[call-arg,arg-type]
                except BaseException as exc:  # handed to each waiting caller
                    for ticket in tickets:
                        ticket.error = exc
                    continue
                handed: set[Any] = set()
                for ticket in tickets:
                    ticket.result = found.get(ticket.payload)
                    if ticket.payload in handed:  # asked twice: each caller its own copy
                        ticket.result = copy.deepcopy(ticket.result)
                    handed.add(ticket.payload)
            self._finish(batch)

    def _drain(self) -> list[_Ticket]:
        with self._queue_cond:
            batch, self._queue = self._queue[:_BATCH], self._queue[_BATCH:]
        return batch

    def _write_forever(self) -> None:
        while True:
            with self._queue_cond:
                if not self._wait_for_due():
                    return
            self._store_queued()

    def _wait_for_due(self) -> bool:
        """In the writer thread, holding the queue's condition: wait until a queued ticket
        is due (``True``), or return ``False`` when stopping or idle.

        Async tickets are due at once. Deferred ones are due ``window`` after they were
        queued; another commit usually takes them first. While deferred tickets keep coming
        the writer polls every ``window`` (one wake-up per window, not one per ticket, which
        would cost the caller a thread switch); once none came in a whole window it sleeps
        until woken."""
        seen = -1  # polls at least one window (it was woken or has just committed)
        while True:
            if self._stopping:
                self._watching = False  # the next deferred write starts a writer again
                if self._queue:
                    return True
                self._writer = None  # a write queued from now on starts a new thread
                return False
            if self._queue:
                wait = min(t.due for t in self._queue) - time.monotonic()
                if wait <= 0:
                    return True
            elif self._defers != seen:  # deferred tickets came since the last look
                seen, wait = self._defers, self._window
            else:
                self._watching = False
                if not self._queue_cond.wait(timeout=_IDLE_S) and not (
                    self._queue or self._watching or self._stopping
                ):
                    self._writer = None  # idle: the next async write starts a new thread
                    return False
                continue  # a deferred ticket that woke it counts as new: it polls on
            self._queue_cond.wait(timeout=wait)

    def _commit(self, batch: list[_Ticket]) -> None:
        """One transaction for ``batch``; if it fails, each ticket alone, to isolate errors.

        With ``full`` durability a caller committing for itself (not the writer thread) uses
        a connection with ``synchronous=FULL``: SQLite flushes the log inside the commit,
        which for calls that come one after another (LangGraph's sync loop) is cheaper than
        a separate flush after it (measured ~0.1 ms per step of two commits). The writer
        thread commits with ``NORMAL`` and flushes after the lock is released
        (:meth:`_durable`), so one flush covers the commits of many async callers.
        """
        conn: sqlite3.Connection | None = None
        inline = self.durability == "full" and threading.current_thread() is not self._writer
        try:
            conn = self._inline_connection() if inline else self._acquire()
            self._store_batch(conn, batch)
            if inline:  # flushed inside COMMIT: this and every earlier commit are on disk
                self._synced = max(self._synced, self._seq)
        except BaseException as exc:
            self.forget()  # heads cached inside the failed transaction were not stored
            if conn is not None and conn.in_transaction:
                conn.execute("ROLLBACK")
            if len(batch) > 1 and isinstance(exc, Exception):
                self._put_back(conn)
                conn = None
                for ticket in batch:
                    self._commit([ticket])
                return
            error = database_error(self.path, exc) if isinstance(exc, sqlite3.Error) else exc
            for ticket in batch:
                ticket.error, ticket.committed = error, True
        finally:
            self._put_back(conn)

    def _store_batch(self, conn: sqlite3.Connection, batch: list[_Ticket]) -> None:
        one = getattr(batch[0].apply, "one_statement", None)
        results: list[Any] | None = None
        if one is not None and all(t.apply is batch[0].apply for t in batch):
            # the whole batch as one statement (its own transaction): a writer thread
            # gives the GIL away at each SQLite call and may wait a switch interval
            # to get it back, so fewer calls is what keeps it fast under load
            results = one(self, conn, [t.payload for t in batch])
        if results is not None:
            for ticket, result in zip(batch, results, strict=True):
                ticket.result = result
        else:
            conn.execute("BEGIN IMMEDIATE")
            start = 0
            while start < len(batch):  # consecutive tickets with one apply go together
                end = start
                while end < len(batch) and batch[end].apply is batch[start].apply:
                    end += 1
                group = batch[start:end]
                results = group[0].apply(self, conn, [t.payload for t in group])
                for ticket, result in zip(group, results, strict=True):
                    ticket.result = result
                start = end
            conn.execute("COMMIT")
        self._seq += 1
        for ticket in batch:
            ticket.seq, ticket.committed = self._seq, True

    def _inline_connection(self) -> sqlite3.Connection:
        """The ``synchronous=FULL`` connection of callers that commit for themselves."""
        if self._inline is None:
            conn = self._acquire()
            conn.execute("PRAGMA synchronous=FULL")
            self._inline = conn
        return self._inline

    def _put_back(self, conn: sqlite3.Connection | None) -> None:
        if conn is None:
            return
        if conn is not self._inline:
            self._release(conn)
        elif conn.in_transaction:
            conn.execute("ROLLBACK")

    def _durable(self, seq: int) -> None:
        """With ``full`` durability, return once commit ``seq`` is on disk.

        The writer thread commits with ``synchronous=NORMAL``; this flushes the write-ahead
        log after its commits, outside the write lock, so the next transaction runs while the disk syncs
        and one flush covers every commit made before it started (group commit).
        """
        if seq <= self._synced or self.durability != "full":
            return
        with self._sync_lock:
            if seq <= self._synced:
                return
            covered = self._seq  # every commit numbered so far has written its frames
            try:
                fd = os.open(self._wal_path, os.O_RDONLY)
            except FileNotFoundError:  # checkpointed into the database and removed
                self._synced = max(self._synced, covered)
                return
            try:
                (getattr(os, "fdatasync", None) or os.fsync)(fd)
            finally:
                os.close(fd)
            self._synced = max(self._synced, covered)

    def _finish(self, batch: list[_Ticket]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[_Ticket]] = {}
        for ticket in batch:
            ticket.done = True
            if ticket.settled is not None:
                ticket.settled.set()
            if ticket.due and ticket.error is not None:
                # deferred: nobody waits for it, so its owner's next write says why
                log.error("aworld-graph: deferred writes to %s failed: %s", self.path, ticket.error)
                self._lost[ticket.owner] = ticket.error
            if ticket.loop is not None:
                by_loop.setdefault(ticket.loop, []).append(ticket)
        for loop, tickets in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle, tickets)
            except RuntimeError:  # the loop was closed meanwhile
                pass

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
        """Finish queued writes, close pooled connections and stop the worker threads."""
        self.flush()
        with self._queue_cond:
            writer, self._stopping = self._writer, True
            self._queue_cond.notify_all()
        if writer is not None and writer is not threading.current_thread():
            writer.join()
        with self._reads_cond:
            reader = self._reader
            self._reads_cond.notify_all()
        if reader is not None and reader is not threading.current_thread():
            reader.join()
        with self.write_lock:
            inline, self._inline = self._inline, None
        with self._pool_lock:
            pool, self._pool = self._pool, []
            executor, self._executor = self._executor, None
        for conn in [*pool, *([inline] if inline is not None else [])]:
            conn.close()
        if executor is not None:
            executor.shutdown(wait=True)

    # -- small caches --------------------------------------------------------------------

    def remember(self, thread_id: str, ns: str, parent_id: str | None, head: Head) -> None:
        """Note the checkpoint just written (its versions serve the next delta)."""
        with self._cache_lock:
            self.heads[(thread_id, ns)] = head
            self.heads.move_to_end((thread_id, ns))
            if len(self.heads) > _CACHE_SIZE:
                self.heads.popitem(last=False)
            if parent_id:
                self.children[(thread_id, ns, parent_id)] = head.checkpoint_id
                if len(self.children) > _CACHE_SIZE:
                    self.children.popitem(last=False)

    def note_node(self, thread_id: str, ns: str, checkpoint_id: str, node: str) -> None:
        """Note that ``node`` wrote at ``checkpoint_id`` (it ran in the step after it)."""
        key = (thread_id, ns, checkpoint_id)
        with self._cache_lock:
            names = self.ran.get(key)
            if names is None:
                self.ran[key] = [node]
                if len(self.ran) > _CACHE_SIZE:
                    self.ran.popitem(last=False)
            elif node not in names:
                names.append(node)

    def note_writes(self, thread_id: str, ns: str, checkpoint_id: str, *, special: bool) -> None:
        """Note that a task wrote on top of ``checkpoint_id`` (see :meth:`superseded`), an
        error, interrupt or resume if ``special`` (see :meth:`may_defer_writes`)."""
        self._note_newest(self.written, (thread_id, ns), checkpoint_id)
        if special:
            with self._cache_lock:
                self.ended[(thread_id, ns, checkpoint_id)] = None
                if len(self.ended) > _CACHE_SIZE:
                    self.ended.popitem(last=False)

    def may_defer_writes(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        """Whether a later save of the run will take ordinary writes for ``checkpoint_id``
        along: not when the checkpoint after it is already put, nor when an error,
        interrupt or resume was written for it (the run may stop there)."""
        key = (thread_id, ns, checkpoint_id)
        with self._cache_lock:
            return key not in self.children and key not in self.ended

    def note_failure(self, thread_id: str, ns: str, checkpoint_id: str) -> None:
        """Note that a write for ``checkpoint_id`` failed before it was queued: LangGraph may
        skip saves after it, so earlier checkpoints of the thread are not queued."""
        self._note_newest(self.failed, (thread_id, ns), checkpoint_id)

    def superseded(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        """Note that ``checkpoint_id`` is being put, and say whether a later save of its run
        is already on its way: tasks have written on top of a newer checkpoint of the thread
        (ids are time-ordered) that nobody has put yet, and no write failed since (in
        LangGraph's loop that checkpoint's save is chained after this one)."""
        key = (thread_id, ns)
        with self._cache_lock:
            newest = self.written.get(key, "")
            later = (
                newest > checkpoint_id
                and newest > self.saved.get(key, "")
                and self.failed.get(key, "") < checkpoint_id
            )
        self._note_newest(self.saved, key, checkpoint_id)
        return later

    def _note_newest(
        self, cache: OrderedDict[tuple[str, str], str], key: tuple[str, str], value: str
    ) -> None:
        with self._cache_lock:
            if value > cache.get(key, ""):
                cache[key] = value
                cache.move_to_end(key)
                if len(cache) > _CACHE_SIZE:
                    cache.popitem(last=False)

    def nodes_at(self, thread_id: str, ns: str, checkpoint_id: str) -> list[str]:
        """Nodes this process saw writing at ``checkpoint_id``, sorted."""
        with self._cache_lock:
            return sorted(self.ran.get((thread_id, ns, checkpoint_id), ()))

    def head(self, thread_id: str, ns: str) -> Head | None:
        """The cached last checkpoint of ``(thread_id, ns)``, if this process wrote it."""
        with self._cache_lock:
            return self.heads.get((thread_id, ns))

    def child(self, thread_id: str, ns: str, parent_id: str) -> str | None:
        """A checkpoint this process wrote on top of ``parent_id``, if any."""
        with self._cache_lock:
            return self.children.get((thread_id, ns, parent_id))

    def forget(self, thread_ids: set[str] | None = None) -> None:
        """Drop cached heads (all, or those of ``thread_ids``) after deletions."""
        with self._cache_lock:
            for cache in (self.heads, self.children, self.ran, self.written):
                for key in list(cache):
                    if thread_ids is None or key[0] in thread_ids:
                        del cache[key]
