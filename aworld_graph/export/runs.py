"""Runs read back from a checkpoint database, and the filters that select them.

A :class:`Run` is one checkpoint thread: its latest state values (messages, trace,
rewards…), its run metadata, its status and its time span. :class:`Run`, :class:`RunFilter`,
:class:`ThreadInfo` and :func:`load_run` live in :mod:`aworld_graph.trajectory` (the one
reader of a stored run) and are re-exported here. This module lists a database's threads
and iterates the runs that pass a filter; with a
:class:`~aworld_graph.checkpoint.TrajectorySaver` the thread list comes from its
``trajectory`` view in one query.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from os import PathLike
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..checkpoint import TrajectorySaver, open_store
from ..errors import ConfigError
from ..trajectory import Run, RunFilter, ThreadInfo, load_run

__all__ = ["Run", "RunFilter", "ThreadInfo", "iter_runs", "list_threads", "load_run", "opened"]


@contextmanager
def opened(
    db: str | PathLike[str] | BaseCheckpointSaver[Any] | None,
) -> Iterator[BaseCheckpointSaver[Any]]:
    """``db`` as it is when it is a saver; else the store it names (a SQLite path or a
    ``postgresql://`` URL; ``None``: the default store), which must exist, opened for the block
    and closed after."""
    if isinstance(db, BaseCheckpointSaver):
        yield db
        return
    with open_store(db, create=False) as saver:
        yield saver


def _time(value: datetime | str | None) -> str | None:
    """An ISO-8601 UTC text for comparing with stored timestamps."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ConfigError(
                f"time {value!r} is not ISO-8601 (e.g. 2025-01-31 or 2025-01-31T12:00)"
            ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def list_threads(saver: BaseCheckpointSaver[Any], f: RunFilter | None = None) -> list[ThreadInfo]:
    """Top-level threads in ``saver`` that pass ``f``'s id and time criteria, oldest first."""
    f = f or RunFilter()
    infos: dict[str, ThreadInfo] = {}
    if isinstance(saver, TrajectorySaver):
        for t in saver.threads():
            infos[t.thread_id] = ThreadInfo(
                thread_id=t.thread_id,
                started_at=t.first_at,
                ended_at=t.last_at,
                steps=t.checkpoints,
            )
    else:
        for tup in saver.list(None):
            conf = tup.config["configurable"]
            if conf.get("checkpoint_ns", ""):
                continue
            info = infos.setdefault(conf["thread_id"], ThreadInfo(thread_id=conf["thread_id"]))
            ts = tup.checkpoint["ts"]
            info.started_at = min(info.started_at or ts, ts)
            info.ended_at = max(info.ended_at or ts, ts)
            info.steps += 1
    since, until = _time(f.since), _time(f.until)
    wanted = set(f.threads)
    out = [
        info
        for info in infos.values()
        if (not wanted or info.thread_id in wanted)
        and (since is None or (info.started_at or "") >= since)
        and (until is None or (info.started_at or "") <= until)
    ]
    if not f.include_subruns and not wanted:
        out = [i for i in out if not _is_subrun(saver, i.thread_id, infos)]
    return sorted(out, key=lambda i: (i.started_at or "", i.thread_id))


def _is_subrun(saver: BaseCheckpointSaver[Any], thread: str, infos: dict[str, ThreadInfo]) -> bool:
    """A delegated member's run: ``<parent>.<key>`` where the parent's trace names it."""
    if "." not in thread:
        return False
    parts = thread.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        parent = ".".join(parts[:cut])
        if parent in infos:
            tup = saver.get_tuple({"configurable": {"thread_id": parent, "checkpoint_ns": ""}})
            trace = (tup.checkpoint["channel_values"].get("trace") or []) if tup else []
            if any(r.get("thread_id") == thread for r in trace):
                return True
    return False


def iter_runs(
    db: str | PathLike[str] | BaseCheckpointSaver[Any] | None = None,
    f: RunFilter | None = None,
    *,
    threads: list[ThreadInfo] | None = None,
) -> Iterator[Run]:
    """Runs in ``db`` (a path, a saver, or the default database) that pass ``f``."""
    f = f or RunFilter()
    with opened(db) as saver:
        for info in threads if threads is not None else list_threads(saver, f):
            run = load_run(saver, info)
            if run is not None and run.matches(f):
                yield run
