"""``TrajectorySaver``: a LangGraph checkpointer keeping every transition (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import builtins
import functools
import random
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar, get_args

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from ..errors import ConfigError, ThreadBusy
from . import _lease, _retention, _schema
from ._db import Durability, PostgresDatabase, SqliteDatabase, Tx, open_database, store_target
from ._inspect import ThreadSummary, TransitionRow, thread_summaries, transitions
from ._read import config_of, decoding, list_keys, to_tuples
from ._serde import StrictSerializer
from ._texts import reading_texts
from ._write import prepare_put, prepare_writes, store_put, store_writes

__all__ = ["PAGE", "TrajectorySaver"]


@dataclass(slots=True)
class _Queue:
    """The holds of one thread on one event loop: they take ``turn`` one after another."""

    turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


T = TypeVar("T")
PAGE = 50
"""How many tuples ``list()`` reads and decodes at once (each page one read snapshot)."""


def _in_thread(method: Callable[..., T]) -> Callable[..., Any]:
    """The async twin of a sync method: the same code in a worker thread (the event loop never
    waits on the database; a subclass overriding the sync method changes both), showing its
    signature (LangGraph reads ``aput_writes``' to decide whether to pass ``task_path``)."""
    name = method.__name__

    async def run(self: Any, *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(getattr(self, name), *args, **kwargs)

    functools.update_wrapper(run, method, assigned=())  # only __wrapped__: the signature
    run.__name__ = f"a{name}"
    run.__doc__ = f"Async :meth:`{name}` (in a worker thread)."
    return run


class TrajectorySaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer with a queryable ``trajectory`` view, on one SQLite file or
    a PostgreSQL database: ``graph.compile(checkpointer=TrajectorySaver(path))``.

    Every ``put`` and ``put_writes`` (sync or async) returns once its rows are committed, or
    raises. A channel value is stored once per version, a list that grows by appending as
    deltas, as msgpack without pickle; metadata and the trajectory are stored without secrets.

    Args:
        target: A SQLite file path (folders are created on first use) or a
            ``postgresql://user@host:port/db`` URL (needs the ``postgres`` extra).
        durability: ``"normal"`` (a commit survives a killed process) or ``"full"`` (it
            also survives power loss or a database server crash).
        allowed_types: Extra classes (or ``(module, name)`` pairs) that may be rebuilt from
            stored values besides those the serializer's rule allows (see ``_serde``).
        snapshot_every: Store a list channel in full every this many versions, bounding
            the delta chain a read follows.
        lease_seconds: How long a :meth:`hold` lasts without a write of its thread (each
            write renews it); a holder that died on another host blocks its thread at most
            this long (one on this host: not at all).
        share_file: Let the checkpoint tables be added to a SQLite file that already holds
            another application's tables. Without it such a file is refused (ConfigError):
            the saver creates its tables only in a new or empty file, or opens one it made.
            (A PostgreSQL database may always hold other tables.)
    """

    def __init__(
        self,
        target: str | PathLike[str],
        *,
        durability: Durability = "normal",
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        snapshot_every: int = 64,
        lease_seconds: float = 300.0,
        share_file: bool = False,
    ) -> None:
        super().__init__(serde=StrictSerializer(allowed_types=allowed_types))
        if durability not in get_args(Durability):
            raise ConfigError(f"TrajectorySaver(durability={durability!r}): use 'normal' or 'full'")
        if snapshot_every < 1:
            raise ConfigError("TrajectorySaver(snapshot_every=...) must be at least 1")
        if lease_seconds <= 0:
            raise ConfigError("TrajectorySaver(lease_seconds=...) must be more than 0")
        self.durability: Durability = durability
        self.snapshot_every = snapshot_every
        self.lease_seconds = lease_seconds
        self.share_file = share_file
        where = store_target(target)
        self.url: str | None = where if isinstance(where, str) else None
        """The PostgreSQL URL, or ``None`` for a SQLite file."""
        self.path: Path | None = where if isinstance(where, Path) else None
        """The SQLite file, or ``None`` on PostgreSQL."""
        self._target: str | Path = where
        self._db: Any = None
        self._version: int | None = None
        self._guard = threading.Lock()
        self._me = f"{_lease.HOST}:{uuid.uuid4().hex[:12]}"
        self._held: set[str] = set()  # threads a hold of this saver has (self._guard)
        self._queues: dict[tuple[asyncio.AbstractEventLoop, str], _Queue] = {}  # (self._guard)
        self._database()  # a bad path, or a URL without the extra, fails here

    @property
    def label(self) -> str:
        """The store as messages name it (a URL without its password)."""
        return str(self._database().label)

    @property
    def database(self) -> SqliteDatabase | PostgresDatabase:
        """The store's database layer (a :class:`~aworld_graph.checkpoint.Database`), for tables
        kept beside the checkpoints (the optimizer's): read snapshots and write transactions on
        this saver's connections and locks. Bring the store to this schema first
        (:meth:`migrate`)."""
        return self._database()  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"TrajectorySaver({str(self.path or self.label)!r}, durability={self.durability!r})"

    def _database(self) -> Any:
        with self._guard:
            if self._db is None:
                self._db = open_database(self._target, self.durability, self._vet)
            return self._db

    def _vet(self, tx: Tx) -> None:
        """A SQLite file's first look, before it is switched to WAL: another program's is
        refused and left as it is (unless ``share_file``)."""
        _schema.schema_version(tx, str(self._target), share_file=self.share_file)

    def _unpack(self, data: bytes) -> Any:
        return self.serde.loads_typed(("msgpack", data))

    @contextmanager
    def _reading(self) -> Iterator[Tx]:
        """A read snapshot of a store of this schema or an older one (checked in it: a newer
        aworld-graph elsewhere may have migrated the store since this saver first looked)."""
        db = self._database()
        known = self._version is not None
        if not known:
            with db.read() as tx:
                self._version = _schema.schema_version(tx, db.label, share_file=self.share_file)
            if self._version is None:  # a new store: its tables are made on first use
                self._write(lambda tx: None)
        with db.read() as tx, decoding(db.label), reading_texts(tx, db.label):
            if known:
                _schema.check_version(tx, db.label)
            yield tx

    def _admit(self, tx: Tx, thread_id: str, columns: Any) -> None:
        """A put's or put_writes' check of the store (``columns``: ``_lease.LEASE_COLUMNS``)."""
        _schema.known_version(columns[0], self.label)
        held = thread_id in self._held
        _lease.admit(tx, thread_id, self._me, held, self.lease_seconds, columns[1:])

    def _write(self, fn: Callable[..., T], *args: Any, checks: bool = False) -> T:
        """``fn(tx, *args)`` in one write transaction on this schema (a store of an older one
        is migrated first, a newer one refused: by ``fn`` through :meth:`_admit` if it
        ``checks``), committed before this returns."""
        db = self._database()
        result: T = db.each(self._job(db, fn, args, checks))
        self._version = _schema.SCHEMA_VERSION
        return result

    async def _awrite(self, fn: Callable[..., T], *args: Any, checks: bool = False) -> T:
        """Async :meth:`_write`: the same transaction, in a worker thread."""
        db = self._database()
        result: T = await db.aeach(self._job(db, fn, args, checks))
        self._version = _schema.SCHEMA_VERSION
        return result

    def _job(
        self, db: Any, fn: Callable[..., T], args: tuple[Any, ...], checks: bool
    ) -> Callable[[Tx], T]:
        def job(tx: Tx) -> T:
            with reading_texts(tx, db.label):
                if self._version != _schema.SCHEMA_VERSION:
                    _schema.upgrade(tx, self.serde, db.label, share_file=self.share_file)
                elif not checks:  # a newer aworld-graph elsewhere may have moved it on since
                    _schema.check_version(tx, db.label)
                return fn(tx, *args)

        return job

    def migrate(self) -> bool:
        """Bring an older store to this schema now (it also happens on the first write);
        ``True`` when there was something to do."""
        with self._reading() as tx:
            before = _schema.schema_version(tx, self.label, share_file=self.share_file)
        self._write(lambda tx: None)
        return before is not None and before < _schema.SCHEMA_VERSION

    def close(self) -> None:
        """Give back held threads and close connections (reopened if used again)."""
        with self._guard:
            db, self._db = self._db, None
        if db is None:
            return
        for thread_id in list(self._held):
            db.each(lambda tx, t=thread_id: _lease.release(tx, t, self._me))
        self._held.clear()
        db.close()

    def __enter__(self) -> TrajectorySaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> TrajectorySaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    @contextmanager
    def _claim(self, thread_id: str) -> Iterator[None]:
        """Mark ``thread_id`` held by this saver for the block, or raise :class:`ThreadBusy`
        if a hold of this saver has it already."""
        with self._guard:
            if thread_id in self._held:
                raise ThreadBusy(
                    f"thread {thread_id!r} is already being run by this process ({self._me}); "
                    "wait for that run to finish or use another thread id",
                    thread_id=thread_id,
                    holder=self._me,
                )
            self._held.add(thread_id)
        try:
            yield
        finally:
            with self._guard:
                self._held.discard(thread_id)

    @contextmanager
    def hold(self, thread_id: str) -> Iterator[None]:
        """Run ``thread_id`` alone: while held, other savers (processes, workers) get
        :class:`~aworld_graph.errors.ThreadBusy` for it; so does a second ``hold`` here."""
        thread_id = str(thread_id)
        with self._claim(thread_id):
            self._write(_lease.acquire, thread_id, self._me, self.lease_seconds)
            try:
                yield
            finally:
                self._write(_lease.release, thread_id, self._me)

    @asynccontextmanager
    async def ahold(self, thread_id: str) -> AsyncIterator[None]:
        """Async :meth:`hold`. Holds of the thread on this event loop take turns, in the order
        they came (in-process runs of one thread queue, as LangGraph's ``enqueue``); a hold
        of it by this saver elsewhere (a sync ``hold``, another event loop) or by another
        saver or process raises :class:`~aworld_graph.errors.ThreadBusy` at once."""
        thread_id = str(thread_id)
        key = (asyncio.get_running_loop(), thread_id)
        with self._guard:
            queue = self._queues.setdefault(key, _Queue())
            queue.users += 1
        try:
            async with queue.turn:
                with self._claim(thread_id):
                    acquire = asyncio.ensure_future(
                        self._awrite(_lease.acquire, thread_id, self._me, self.lease_seconds)
                    )
                    try:
                        await asyncio.shield(acquire)
                    except asyncio.CancelledError:  # the write goes on in its thread
                        await asyncio.shield(self._give_back(acquire, thread_id))
                        raise
                    try:
                        yield
                    finally:
                        await self._awrite(_lease.release, thread_id, self._me)
        finally:
            with self._guard:
                queue.users -= 1
                if not queue.users:
                    del self._queues[key]

    async def _give_back(self, acquire: asyncio.Future[None], thread_id: str) -> None:
        """Once a cancelled hold's lease write has ended, give back what it took."""
        with suppress(Exception):  # not taken (ThreadBusy, a failed write): nothing to give
            await acquire
            await self._awrite(_lease.release, thread_id, self._me)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (the latest of its thread without an id)."""
        conf = {"checkpoint_ns": "", **config["configurable"]}  # the root's, unless named
        with self._reading() as tx:
            keys = list_keys(tx, {"configurable": conf}, None, None, 1)
            return to_tuples(tx, keys, self.serde)[0] if keys else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints matching ``config`` and ``filter`` (top-level metadata keys, which must
        be identifiers), newest first, read a page at a time."""
        with self._reading() as tx:
            keys = list_keys(tx, config, filter, before, limit)
        for start in range(0, len(keys), PAGE):
            with self._reading() as tx:
                page = to_tuples(tx, keys[start : start + PAGE], self.serde)
            yield from page

    def thread_of(self, checkpoint_id: str) -> str | None:
        """The thread holding root-namespace checkpoint ``checkpoint_id``, or ``None``; of
        several (a copied thread keeps its source's ids), the first by name."""
        with self._reading() as tx:
            row = tx.one(
                "SELECT thread_id FROM checkpoints WHERE checkpoint_id = ? AND checkpoint_ns = '' "
                "ORDER BY thread_id LIMIT 1",
                (str(checkpoint_id),),
            )
        return None if row is None else str(row[0])

    def threads(self, limit: int | None = None) -> builtins.list[ThreadSummary]:
        """The threads in the store, most recently active first."""
        with self._reading() as tx:
            return thread_summaries(tx, limit)

    def transitions(self, thread_id: str, checkpoint_ns: str = "") -> builtins.list[TransitionRow]:
        """A thread's ``trajectory`` rows, oldest first, forks and failed steps included."""
        with self._reading() as tx:  # failed steps' errors came with schema 3
            errors = (self._version or _schema.SCHEMA_VERSION) >= 3
            return transitions(tx, str(thread_id), checkpoint_ns, errors=errors)

    aget_tuple = _in_thread(get_tuple)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`: each page is read in a worker thread."""
        pages = self.list(config, filter=filter, before=before, limit=limit)
        done = object()
        while (item := await asyncio.to_thread(next, pages, done)) is not done:
            yield item  # type: ignore[misc]

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint (committed before this returns); only new_versions get value rows."""
        record = prepare_put(self.serde, config, checkpoint, metadata, new_versions)
        self._write(store_put, record, self._unpack, self.snapshot_every, self._admit, checks=True)
        return config_of(record.thread_id, record.ns, record.checkpoint_id)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the checkpoint in ``config``; committed before
        this returns. Special channels (error, interrupt) overwrite, others are kept."""
        record = prepare_writes(self.serde, config, writes, task_id, task_path)
        self._write(store_writes, record, self._unpack, self._admit, checks=True)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put` (a subclass's own ``put`` runs in a worker thread)."""
        if type(self).put is not TrajectorySaver.put:
            return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)
        record = prepare_put(self.serde, config, checkpoint, metadata, new_versions)
        await self._awrite(
            store_put, record, self._unpack, self.snapshot_every, self._admit, checks=True
        )
        return config_of(record.thread_id, record.ns, record.checkpoint_id)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes` (a subclass's own ``put_writes`` runs in a worker thread)."""
        if type(self).put_writes is not TrajectorySaver.put_writes:
            return await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)
        record = prepare_writes(self.serde, config, writes, task_id, task_path)
        await self._awrite(store_writes, record, self._unpack, self._admit, checks=True)

    def get_next_version(self, current: str | int | float | None, channel: None = None) -> str:
        """``"<12-digit counter>.<8 random hex>"``: increasing, distinct across forks (both
        write version n+1 of a channel), and after another saver's (its counter read back)."""
        number = int(current.split(".", 1)[0]) if isinstance(current, str) else int(current or 0)
        return f"{number + 1:012d}.{random.getrandbits(32):08x}"

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write, value and trajectory row of ``thread_id``."""
        self._write(_retention.delete_threads, [str(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata ``run_id`` is listed."""
        if ids := [str(r) for r in run_ids]:
            self._write(_retention.delete_runs, self._unpack, ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy all of ``source_thread_id`` (checkpoints, writes, values) to another thread."""
        self._write(_retention.copy_thread, str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's newest checkpoint; ``delete``: drop all."""
        if strategy not in ("keep_latest", "delete"):
            raise ConfigError(f"prune(strategy={strategy!r}): use 'keep_latest' or 'delete'")
        ids = [str(t) for t in thread_ids]
        if ids and strategy == "delete":
            self._write(_retention.delete_threads, ids)
        elif ids:
            self.prune_keep_last(1, ids)

    def prune_keep_last(self, keep: int, thread_ids: Sequence[str] | None = None) -> int:
        """Keep the ``keep`` newest checkpoints per thread/namespace (all threads if ``None``);
        returns the number of checkpoints deleted."""
        if keep < 1:
            raise ConfigError(f"prune_keep_last(keep={keep}): keep at least 1 checkpoint")
        return self._write(_retention.prune, self._unpack, thread_ids, keep, None)

    def prune_older_than(
        self,
        age: timedelta | float,
        thread_ids: Sequence[str] | None = None,
        *,
        keep_latest: bool = True,
    ) -> int:
        """Delete checkpoints older than ``age`` (a timedelta, or days); with ``keep_latest``
        (the default) each thread's newest checkpoint stays, so it can still be resumed.
        Returns the number of checkpoints deleted."""
        delta = age if isinstance(age, timedelta) else timedelta(days=float(age))
        cutoff = (datetime.now(UTC) - delta).isoformat()
        return self._write(_retention.prune, self._unpack, thread_ids, int(keep_latest), cutoff)

    def vacuum(self) -> None:
        """Compact the store (``VACUUM``; on SQLite the write-ahead log is truncated too)."""
        self._database().vacuum()

    adelete_thread = _in_thread(delete_thread)
    adelete_for_runs = _in_thread(delete_for_runs)
    acopy_thread = _in_thread(copy_thread)
    aprune = _in_thread(prune)
