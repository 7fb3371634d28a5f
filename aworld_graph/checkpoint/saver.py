"""``TrajectorySaver``: a LangGraph checkpointer on SQLite that keeps every transition."""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, get_args

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from ..errors import ConfigError
from . import _retention
from ._inspect import ThreadSummary, TransitionRow, thread_summaries, transitions
from ._query import decoding, where_clause
from ._read import LazyPage, fetch, lookup_rows
from ._schema import Durability
from ._serde import StrictSerializer
from ._store import Store, flush_file
from ._write import (
    PutRecord,
    WritesRecord,
    apply_batch,
    derive_early,
    own_shape,
    prepare_put,
    prepare_writes,
)

__all__ = ["TrajectorySaver"]

log = logging.getLogger(__name__)

T = TypeVar("T")
_PAGE = 200


def _owner(record: PutRecord | WritesRecord) -> tuple[str, str]:
    """Whose queued write a record is: its thread and namespace (a failure to store it is
    reported to that thread's next save, not another run's)."""
    return record.thread_id, record.ns


def _lookup_key(config: RunnableConfig) -> tuple[str, str, str | None]:
    """``(thread, namespace, checkpoint id or None for the latest)`` of a get_tuple call."""
    conf = config["configurable"]
    return str(conf["thread_id"]), conf.get("checkpoint_ns", ""), get_checkpoint_id(config)


class TrajectorySaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer on one SQLite file, with a queryable ``trajectory`` table.

    Drop-in for any LangGraph app: ``graph.compile(checkpointer=TrajectorySaver(path))``.
    Each channel value is stored once per version; lists that grow by appending (message
    lists, traces, rewards) are stored as deltas. Safe for many asyncio tasks, threads and
    processes writing one file. Values are msgpack without pickle; types outside the
    allow-list fail when written. API keys and authorization headers are stripped from
    metadata before it is written.

    Args:
        path: The database file (parent folders are created on first use).
        durability: ``"normal"`` (WAL, ``synchronous=NORMAL``: survives a killed process)
            or ``"full"`` (each write returns once the log holding it is flushed to disk:
            also survives power loss; writes that commit together share one flush).
        allowed_types: Extra classes (or ``(module, name)`` pairs) that may be stored in
            channel values besides plain data and the types LangGraph trusts.
        snapshot_every: Store a list channel in full every this many versions, bounding
            the delta chain a read follows.
        commit_delay: With ``full`` durability, how long (seconds) a sync ``put_writes``
            waits for another commit to take its writes along before committing them itself
            (one flush per step instead of two in LangGraph's sync loop); ``0`` turns it off.
        defer_writes: With ``normal`` durability, how long (seconds) a sync ``put_writes`` of
            ordinary channels may leave its writes queued for the next commit: it returns
            at once, and the checkpoint LangGraph saves next (or a writer thread, after this
            long) stores them. LangGraph does not wait for ``put_writes`` before it goes on,
            so this changes nothing it relies on; reads and writes in this process see the
            queued writes, and they are stored at exit. A process killed meanwhile loses
            them (the task runs again on resume). In both durabilities a ``put`` is queued
            the same way when a later save of its run is already on its way (see
            :meth:`put`). ``0``: return once they are committed.
    """

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        durability: Durability = "normal",
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        snapshot_every: int = 64,
        commit_delay: float = 0.001,
        defer_writes: float = 0.002,
    ) -> None:
        super().__init__(serde=StrictSerializer(allowed_types=allowed_types))
        if durability not in get_args(Durability):
            raise ConfigError(f"TrajectorySaver(durability={durability!r}): use 'normal' or 'full'")
        if str(path) == ":memory:" or str(path).startswith("file::memory"):
            raise ConfigError(
                "TrajectorySaver needs a database file, not ':memory:' (use a temporary file, "
                "or LangGraph's InMemorySaver)"
            )
        if snapshot_every < 1:
            raise ConfigError("TrajectorySaver(snapshot_every=...) must be at least 1")
        self.path = Path(path)
        """The database file."""
        self.durability: Durability = durability
        """``normal`` or ``full``."""
        self.snapshot_every = snapshot_every
        """Full list snapshot every this many versions."""
        if commit_delay < 0:
            raise ConfigError("TrajectorySaver(commit_delay=...) must be 0 or more seconds")
        self.commit_delay = commit_delay
        """Seconds a ``full`` sync ``put_writes`` waits to share the next commit's flush."""
        if defer_writes < 0:
            raise ConfigError("TrajectorySaver(defer_writes=...) must be 0 or more seconds")
        self.defer_writes = defer_writes
        """Seconds a queued write (``normal`` sync ``put_writes``; a ``put`` whose run has a
        later save on its way) may wait for the next commit."""
        self._store = Store(self.path, durability)

    def __repr__(self) -> str:
        return f"TrajectorySaver({str(self.path)!r}, durability={self.durability!r})"

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close connections and worker threads (the saver reopens them if used again)."""
        self._store.close()

    def flush(self) -> None:
        """Store what any saver on this file in this process has queued for the next commit
        (reads through a saver do this themselves; call it before reading the file with a
        connection of your own in this process)."""
        flush_file(self.path)

    def __enter__(self) -> TrajectorySaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> TrajectorySaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._store.executor(), partial(fn, *args, **kwargs))

    # -- reading ---------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (the latest of its thread without an id)."""
        key = _lookup_key(config)
        with self._store.read() as conn:
            return self._lookup(conn, [key]).get(key)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints matching ``config``/``filter``, newest first.

        The tuples are :class:`HistoryTuple` s: ids and configs come with the listing, and a
        tuple's checkpoint, metadata and pending writes are fetched and decoded when first
        read (a page of 200 tuples at a time, with a few batched queries), so walking a long
        history for ids costs little and reading every state costs what eager decoding does.

        ``filter`` keys must be identifiers (letters, digits, ``_``); they match top-level
        metadata keys.
        """
        for page in self._pages(config, filter, before, limit):
            yield from page.tuples()

    def _pages(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[LazyPage]:
        where, params = where_clause(config, filter, before)
        conf = config["configurable"] if config is not None else {}
        thread_id = str(conf["thread_id"]) if "thread_id" in conf else None
        ns = conf.get("checkpoint_ns")
        # a thread (and namespace) named in the config is not read back for every row
        columns = ("thread_id, " if thread_id is None else "") + (
            "checkpoint_ns, " if ns is None else ""
        )
        sql = (
            f"SELECT {columns}checkpoint_id, parent_checkpoint_id "
            f"FROM checkpoints {where} ORDER BY checkpoint_id DESC"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._store.read() as conn, decoding(self.path):
            rows = conn.execute(sql, params).fetchall()
        if thread_id is not None and ns is not None:
            rows = [(thread_id, ns, cid, parent) for cid, parent in rows]
        elif thread_id is not None:
            rows = [(thread_id, *row) for row in rows]
        for start in range(0, len(rows), _PAGE):
            yield LazyPage(rows[start : start + _PAGE], self._reading, self.serde)

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._store.read() as conn, decoding(self.path):
            yield conn

    def threads(self, limit: int | None = None) -> list[ThreadSummary]:
        """The threads in the database, most recently active first."""
        with self._store.read() as conn:
            return thread_summaries(conn, limit)

    def transitions(self, thread_id: str, checkpoint_ns: str = "") -> list[TransitionRow]:
        """A thread's rows of the ``trajectory`` view, oldest first, forks included."""
        with self._store.read() as conn, decoding(self.path):
            return transitions(conn, str(thread_id), checkpoint_ns)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`: answered by the reader thread, together with the other
        lookups queued meanwhile (one query for all of them)."""
        return await self._store.submit_read(self._lookup, _lookup_key(config))  # type: ignore[no-any-return]

    def _lookup(
        self, conn: sqlite3.Connection, keys: list[tuple[str, str, str | None]]
    ) -> dict[tuple[str, str, str | None], CheckpointTuple]:
        """The tuples for ``(thread, namespace, id or None for the latest)`` keys."""
        with decoding(self.path):
            rows = lookup_rows(conn, keys)
            if not rows:
                return {}
            page = fetch(conn, list(rows.values()), self.serde)  # a tuple per key
            return dict(zip(rows, page.tuples(self.serde), strict=True))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`: each page is fetched and decoded in a worker thread."""
        pages = await self._run(self._pages, config, filter, before, limit)
        while (page := await self._run(next, pages, None)) is not None:
            await self._run(page.load)
            for item in page.tuples():
                yield item

    # -- writing ---------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; only channels in ``new_versions`` get new value rows.

        It is committed (with ``full`` durability: and flushed) before this returns, unless
        a later save of the same run is already on its way. LangGraph's default ``async``
        durability saves checkpoints from a chain of background threads, each save waiting
        for the one before, while the next steps run; the chain falls behind. When tasks
        have already written on top of a newer checkpoint of the thread, that checkpoint's
        save has been handed to the chain and comes after this one, so this one is queued
        (see ``defer_writes``) and that save's commit takes it along (the writer thread
        commits it after ``defer_writes`` if nothing else has). The newest save of a run
        always commits, so a run that returns or raises has its last checkpoint stored; with
        ``durability="sync"`` LangGraph waits for each save before the next step, so
        nothing is queued. (With two runs on one thread at once, a run's last checkpoint
        may wait for the other run's next save, at most ``defer_writes``.)"""
        record, stored = self._prepared(
            self._prepare_put, config, checkpoint, metadata, new_versions
        )
        if not self._queued(record):
            self._store.submit(apply_batch, record, owner=_owner(record))
        return stored

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`: values are serialized here, the disk write runs in the
        writer thread (group-committed with other pending writes). A checkpoint whose run
        already has a later save on its way is queued, as in :meth:`put`."""
        try:
            record, stored = self._prepare_put(config, checkpoint, metadata, new_versions)
        except BaseException:
            await self._afailed(config)
            raise
        owner = _owner(record)
        await self._store.acheck_lost(owner)  # before _queued: defer() would flush inline
        if not self._queued(record):
            await self._store.submit_async(apply_batch, record)
            await self._store.acheck_lost(owner)
        return stored

    def _queued(self, record: PutRecord) -> bool:
        """Queue ``record`` for the next commit when a later save of its run is already on
        its way (see :meth:`put`); ``False`` when it must be committed now."""
        store = self._store
        later = store.superseded(record.thread_id, record.ns, record.checkpoint_id)
        if not later or record.derived is None or self.defer_writes <= 0:
            return False
        # cached first, so a task's late writes name their node on it (see _write_rows)
        store.remember(record.thread_id, record.ns, record.parent_id, record.derived[2])
        record.remembered = True
        try:
            store.defer(apply_batch, record, self.defer_writes, owner=_owner(record))
        except BaseException:
            store.forget({record.thread_id})
            raise
        return True

    def _prepared(self, prepare: Callable[..., T], config: RunnableConfig, *rest: Any) -> T:
        """``prepare(config, *rest)``; if it fails, :meth:`_failed` and what is queued is
        stored before the error is raised."""
        try:
            return prepare(config, *rest)
        except BaseException:
            self._failed(config)
            self._store.flush()
            raise

    async def _afailed(self, config: RunnableConfig) -> None:
        """:meth:`_failed`, then the writer thread stores what is queued (the error being
        raised is the one to report, whatever that commit says)."""
        self._failed(config)
        try:
            await self._store.aflush()
        except Exception as exc:  # noqa: BLE001
            log.error("aworld-graph: queued writes to %s failed: %s", self.path, exc)

    def _failed(self, config: RunnableConfig) -> None:
        """A save or task write for ``config`` failed before it was queued (a value the
        serializer refuses): the run may stop here with no later commit to take the queue
        along (LangGraph skips a save whose task writes failed), so the thread's earlier
        checkpoints are no longer queued."""
        conf = config.get("configurable") or {}
        if conf.get("thread_id") is not None:
            self._store.note_failure(
                str(conf["thread_id"]),
                conf.get("checkpoint_ns", ""),
                str(conf.get("checkpoint_id") or ""),
            )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the checkpoint in ``config``.

        Writes to special channels (errors, interrupts), which end a step, are committed
        before this returns. With ``normal`` durability ordinary writes are queued for the
        next commit, at most ``defer_writes`` seconds away (the checkpoint LangGraph saves
        next usually takes them). With ``full`` durability they first wait up to
        ``commit_delay`` seconds for that checkpoint's commit, so both share one flush, and
        this returns once they are on disk. Writes saved after the checkpoint that follows
        them (LangGraph saves both in background threads), or after an error or interrupt
        was written for the same checkpoint (the run may stop there), are committed at once:
        no later save of the run would take them along."""
        store = self._store
        record = self._prepared(self._prepare_writes, config, writes, task_id, task_path)
        owner = _owner(record)
        if record.special:
            store.submit(apply_batch, record, owner=owner)
        elif self.durability == "full":
            store.submit(apply_batch, record, self.commit_delay, owner)
        elif self.defer_writes > 0 and store.may_defer_writes(
            record.thread_id, record.ns, record.checkpoint_id
        ):
            store.defer(apply_batch, record, self.defer_writes, owner)
        else:
            store.submit(apply_batch, record, owner=owner)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes` (disk write in the writer thread)."""
        try:
            record = self._prepare_writes(config, writes, task_id, task_path)
        except BaseException:
            await self._afailed(config)
            raise
        owner = _owner(record)
        await self._store.acheck_lost(owner)
        await self._store.submit_async(apply_batch, record)
        await self._store.acheck_lost(owner)

    def _prepare_put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[PutRecord, RunnableConfig]:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        merged = dict(get_checkpoint_metadata(config, metadata))
        merged.pop("writes", None)
        record = prepare_put(
            self.serde,
            thread_id=thread_id,
            ns=ns,
            parent_id=conf.get("checkpoint_id"),
            checkpoint=checkpoint,
            metadata=merged,
            new_versions=new_versions,
            snapshot_every=self.snapshot_every,
        )
        derive_early(self._store, record)
        own_shape(record)
        stored: RunnableConfig = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }
        return record, stored

    def _prepare_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> WritesRecord:
        conf = config["configurable"]
        record = prepare_writes(
            self.serde,
            thread_id=str(conf["thread_id"]),
            ns=conf.get("checkpoint_ns", ""),
            checkpoint_id=conf["checkpoint_id"],
            writes=writes,
            task_id=task_id,
            task_path=task_path,
        )
        if record.node is not None:  # seen by the next checkpoint's early rows
            self._store.note_node(record.thread_id, record.ns, record.checkpoint_id, record.node)
        self._store.note_writes(
            record.thread_id, record.ns, record.checkpoint_id, special=bool(record.special)
        )
        return record

    def get_next_version(self, current: str | int | float | None, channel: None = None) -> str:
        """``"<12-digit counter>.<8 random hex>"``: increasing, and distinct across forks.

        (Two forks of one checkpoint both write version n+1 of a channel; the random part
        keeps their values apart.) Versions written by other savers keep working: their
        counter is read back, and the shorter string still sorts after theirs.
        """
        if current is None:
            number = 0
        elif isinstance(current, str):
            number = int(current.split(".", 1)[0])
        else:
            number = int(current)
        return f"{number + 1:012d}.{random.getrandbits(32):08x}"

    # -- deleting, copying, pruning ------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write, blob and trajectory row of ``thread_id``."""
        self._store.run(partial(_retention.delete_threads, thread_ids=[str(thread_id)]))
        self._store.forget({str(thread_id)})
        self._store.discard_lost({str(thread_id)})

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata ``run_id`` is listed."""
        if not run_ids:
            return
        ids = [str(r) for r in run_ids]
        threads = self._store.run(lambda conn: _retention.delete_runs(conn, self.serde, ids))
        self._store.forget(threads)  # (their failures stay: other runs of them may go on)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy all of ``source_thread_id`` (checkpoints, writes, values) to a new thread."""
        source, target = str(source_thread_id), str(target_thread_id)
        self._store.run(lambda conn: _retention.copy_thread(conn, source, target))
        self._store.forget({str(target_thread_id)})

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's newest checkpoint; ``delete``: drop all."""
        ids = [str(t) for t in thread_ids]
        if not ids:
            return
        if strategy == "delete":
            self._store.run(partial(_retention.delete_threads, thread_ids=ids))
            self._store.discard_lost(set(ids))
        elif strategy == "keep_latest":
            self.prune_keep_last(1, ids)
        else:
            raise ConfigError(f"prune(strategy={strategy!r}): use 'keep_latest' or 'delete'")
        self._store.forget(set(ids))

    def prune_keep_last(self, keep: int, thread_ids: Sequence[str] | None = None) -> int:
        """Keep the ``keep`` newest checkpoints per thread/namespace (all threads if ``None``).

        Returns the number of checkpoints deleted.
        """
        if keep < 1:
            raise ConfigError(f"prune_keep_last(keep={keep}): keep at least 1 checkpoint")
        deleted = self._store.run(
            lambda conn: _retention.keep_last(conn, self.serde, keep, thread_ids)
        )
        self._store.forget(None if thread_ids is None else set(thread_ids))
        return deleted

    def prune_older_than(
        self,
        age: timedelta | float,
        thread_ids: Sequence[str] | None = None,
        *,
        keep_latest: bool = True,
    ) -> int:
        """Delete checkpoints older than ``age`` (a timedelta, or days).

        With ``keep_latest`` (the default) each thread's newest checkpoint stays so the
        thread can still be resumed. Returns the number of checkpoints deleted.
        """
        delta = age if isinstance(age, timedelta) else timedelta(days=float(age))
        cutoff = (datetime.now(UTC) - delta).isoformat()
        deleted = self._store.run(
            lambda conn: _retention.delete_older_than(
                conn, self.serde, cutoff, thread_ids, keep_latest
            )
        )
        self._store.forget(None if thread_ids is None else set(thread_ids))
        return deleted

    def vacuum(self) -> None:
        """Compact the file (``VACUUM``) and truncate the write-ahead log."""
        with self._store.autocommit() as conn:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await self._run(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await self._run(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await self._run(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        await self._run(self.prune, thread_ids, strategy=strategy)
