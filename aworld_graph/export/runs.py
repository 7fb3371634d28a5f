"""Runs read back from a checkpoint database, and the filters that select them.

A :class:`Run` is one checkpoint thread: its latest state values (messages, trace,
rewards…), its run metadata, its status and its time span. Runs are read straight from the
saver (``get_tuple``/``list``), so no graph is needed; with a
:class:`~aworld_graph.checkpoint.TrajectorySaver` the thread list and the step → checkpoint
map come from its ``trajectory`` view in one query each.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from .. import checkpoint
from ..checkpoint import TrajectorySaver, default_target, is_url, strip_secrets
from ..errors import ConfigError
from ..rewards import episode_reward
from ..trajectory import build_trajectory

__all__ = ["Run", "RunFilter", "ThreadInfo", "iter_runs", "list_threads", "load_run", "open_saver"]


def open_saver(
    db: str | PathLike[str] | BaseCheckpointSaver[Any] | None,
) -> BaseCheckpointSaver[Any]:
    """A saver for ``db``: a saver as is, a file path, or ``None`` for the default database."""
    if isinstance(db, BaseCheckpointSaver):
        return db
    target = db if db is not None else default_target()
    if not is_url(target) and not Path(target).is_file():
        raise ConfigError(
            f"checkpoint database {target} does not exist; run something first or pass --db FILE"
        )
    return checkpoint.open_saver(target)


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


@dataclass(kw_only=True)
class RunFilter:
    """Which runs to export. Every criterion given must hold."""

    threads: Sequence[str] = ()
    """Only these thread ids (empty: all)."""
    finished: bool = False
    """Only runs that finished with an answer, whatever their score."""
    success_only: bool = False
    """Only successful runs: finished with an answer and not scored ``fail`` by a reward
    function (``numeric`` and the other reward functions say ``fail`` for a score below
    their threshold, so a run scored 0 is left out); see :attr:`Run.success`."""
    min_reward: float | None = None
    """Only runs whose reward (episode reward, else the last step reward) is at least this."""
    agent: str | None = None
    """Only runs in which this agent acted; per-turn exports keep only its turns."""
    workflow_version: str | None = None
    """Only runs whose metadata ``workflow_version`` (or ``version``) equals this."""
    since: datetime | str | None = None
    """Only runs started at or after this time (naive times are UTC)."""
    until: datetime | str | None = None
    """Only runs started at or before this time."""
    include_subruns: bool = False
    """Also export delegated member runs (threads ``<parent>.<call>`` of team swarms)."""


@dataclass(kw_only=True)
class ThreadInfo:
    """A thread as listed by the database, before its values are read."""

    thread_id: str
    started_at: str | None = None
    ended_at: str | None = None
    steps: int = 0


@dataclass(kw_only=True)
class Run:
    """One stored run (a checkpoint thread at its latest checkpoint)."""

    thread_id: str
    """The thread id (= task id)."""
    values: dict[str, Any]
    """The latest state values (``SwarmState`` channels)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Run metadata (task id/name, session, graph name and version, rollout group…)."""
    status: str = "finished"
    """``finished`` | ``max_steps`` | ``error`` | ``interrupted`` | ``running``."""
    checkpoint_id: str | None = None
    """The latest checkpoint."""
    started_at: str | None = None
    """Time of the first checkpoint (ISO-8601 UTC)."""
    ended_at: str | None = None
    """Time of the latest checkpoint."""
    checkpoints: dict[int, str] = field(default_factory=dict)
    """Superstep → id of the checkpoint written after it, along the run (for AWorld items)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.values.get("messages") or [])

    @property
    def trace(self) -> list[dict[str, Any]]:
        """Trace records of this thread (records of delegated sub-runs left out)."""
        return [r for r in self.values.get("trace") or [] if not r.get("thread_id")]

    @property
    def rewards(self) -> list[dict[str, Any]]:
        return list(self.values.get("rewards") or [])

    @property
    def answer(self) -> str | None:
        return self.values.get("answer")

    @property
    def input(self) -> str:
        return str(self.values.get("input") or "")

    @property
    def task_name(self) -> str | None:
        return self.metadata.get("task_name") or self.metadata.get("name")

    @property
    def episode(self) -> dict[str, Any] | None:
        """The episode reward item (from a reward function), if the run was scored."""
        return episode_reward(self.rewards)

    @property
    def reward(self) -> float | None:
        """The episode reward, else the score of the last step reward, else ``None``."""
        item = self.episode or (self.rewards[-1] if self.rewards else None)
        score = item.get("score") if item else None
        return float(score) if isinstance(score, (int, float)) else None

    @property
    def finished(self) -> bool:
        """Finished with an answer (whatever its score)."""
        return self.status == "finished" and self.answer is not None

    @property
    def success(self) -> bool:
        """Finished with an answer, and not scored ``fail`` by a reward function."""
        episode = self.episode
        return self.finished and (episode is None or episode.get("status") != "fail")

    @property
    def ground_truth(self) -> Any:
        """The ground truth the run was scored against (episode reward, else metadata)."""
        episode = self.episode
        if episode is not None and episode.get("ground_truth") is not None:
            return episode["ground_truth"]
        return self.metadata.get("ground_truth", self.metadata.get("expected"))

    @property
    def group(self) -> str:
        """Runs of one task share a group: the rollout group, else the task input."""
        return str(self.metadata.get("rollout_group") or f"input:{self.input}")

    @property
    def agents(self) -> list[str]:
        """Agents that acted in the run, in order of first appearance."""
        return list(dict.fromkeys(str(r["agent"]) for r in self.trace if r.get("agent")))

    @property
    def workflow_version(self) -> str | None:
        version = self.metadata.get("workflow_version", self.metadata.get("version"))
        return None if version is None else str(version)

    def trajectory(self) -> list[dict[str, Any]]:
        """AWorld trajectory items of the run (see :mod:`aworld_graph.trajectory`)."""
        return build_trajectory(
            self.values,
            task_id=str(self.metadata.get("task_id") or self.thread_id),
            task_name=self.task_name,
            session_id=self.metadata.get("session_id"),
            checkpoints=self.checkpoints,
        )

    def matches(self, f: RunFilter) -> bool:
        """Whether the run passes the value-based criteria of ``f``."""
        if f.finished and not self.finished:
            return False
        if f.success_only and not self.success:
            return False
        if f.min_reward is not None and (self.reward is None or self.reward < f.min_reward):
            return False
        if f.agent is not None and f.agent not in self.agents:
            return False
        return f.workflow_version is None or self.workflow_version == str(f.workflow_version)


def list_threads(saver: BaseCheckpointSaver[Any], f: RunFilter | None = None) -> list[ThreadInfo]:
    """Top-level threads in ``saver`` that pass ``f``'s id and time criteria, oldest first."""
    f = f or RunFilter()
    infos: dict[str, ThreadInfo] = {}
    if isinstance(saver, TrajectorySaver):
        for t in saver.threads():
            infos[t.thread_id] = ThreadInfo(
                thread_id=t.thread_id, started_at=t.first_at, ended_at=t.last_at, steps=t.checkpoints
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


def _status(values: dict[str, Any], channels: dict[str, Any], pending: list[Any]) -> str:
    written = {w[1] for w in pending}
    if "__error__" in written:
        return "error"
    if "__interrupt__" in written:
        return "interrupted"
    status = str(values.get("status") or "running")
    if status in ("finished", "running") and any(k.startswith("branch:to:") for k in channels):
        return "running"  # nodes were still due when the run stopped
    return status


def _chain(saver: BaseCheckpointSaver[Any], thread: str, head: str) -> dict[int, str]:
    if not isinstance(saver, TrajectorySaver):
        return {}
    by_id = {
        r.checkpoint_id: (r.checkpoint_id, r.parent_checkpoint_id, r.step)
        for r in saver.transitions(thread)
        if r.checkpoint_id is not None
    }
    chain: dict[int, str] = {}
    current: str | None = head
    while current is not None and current in by_id:
        _, parent, step = by_id[current]
        chain.setdefault(int(step if step is not None else -1), current)
        current = parent
    return chain


def load_run(saver: BaseCheckpointSaver[Any], info: ThreadInfo | str) -> Run | None:
    """Read one thread's latest checkpoint as a :class:`Run` (``None`` if it has none)."""
    if isinstance(info, str):
        info = ThreadInfo(thread_id=info)
    tup = saver.get_tuple({"configurable": {"thread_id": info.thread_id, "checkpoint_ns": ""}})
    if tup is None:
        return None
    channels = dict(tup.checkpoint.get("channel_values") or {})
    values = {k: v for k, v in channels.items() if not k.startswith(("branch:", "__"))}
    head = tup.config["configurable"].get("checkpoint_id")
    metadata = {
        k: v
        for k, v in dict(tup.metadata or {}).items()
        if k not in ("source", "step", "parents", "writes")
    }
    return Run(
        thread_id=info.thread_id,
        values=values,
        metadata=strip_secrets(metadata),
        status=_status(values, channels, list(tup.pending_writes or [])),
        checkpoint_id=head,
        started_at=info.started_at,
        ended_at=info.ended_at or tup.checkpoint.get("ts"),
        checkpoints=_chain(saver, info.thread_id, head) if head else {},
    )


def iter_runs(
    db: str | PathLike[str] | BaseCheckpointSaver[Any] | None = None,
    f: RunFilter | None = None,
    *,
    threads: list[ThreadInfo] | None = None,
) -> Iterator[Run]:
    """Runs in ``db`` (a path, a saver, or the default database) that pass ``f``."""
    f = f or RunFilter()
    saver = open_saver(db)
    try:
        for info in threads if threads is not None else list_threads(saver, f):
            run = load_run(saver, info)
            if run is not None and run.matches(f):
                yield run
    finally:
        if saver is not db and isinstance(saver, TrajectorySaver):
            saver.close()
