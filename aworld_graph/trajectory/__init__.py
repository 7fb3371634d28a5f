"""A run read back from a checkpoint store, and its trajectory in AWorld's item shape.

:func:`load_run` reads one thread of any saver as a :class:`Run`: its latest state values
(messages, trace, rewards…), its run metadata, its status and the checkpoint of each of its
supersteps. No graph is needed; with a :class:`~aworld_graph.checkpoint.TrajectorySaver` the
step → checkpoint map comes from its ``trajectory`` view in one query. A run's response
(:meth:`aworld_graph.run.GraphRun.response`) reads the same map with :func:`achain` and decides
its status with the same rule, :func:`run_status`.

:meth:`Run.trajectory` (and :func:`build_trajectory`, from the state values) gives one item
per agent step (an LLM call together with the tool calls it asked for)::

    {"id", "meta": {session_id, task_id, task_name, agent_id, step, execute_time, pre_agent,
                    checkpoint_id},
     "state": {input, messages, context},
     "action": {content, tool_calls, is_agent_finished, ext_info},
     "reward": {tool_outputs, status, score}}

Unlike AWorld, tool calls carry the real tool (and MCP server) names, and ``reward`` is filled
from critic scores and rewards attached through ``Runners.step``/``Runners.reward``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from ..checkpoint import TrajectorySaver, strip_secrets
from ._items import build_trajectory, usage_of

__all__ = [
    "Run",
    "RunFilter",
    "ThreadInfo",
    "achain",
    "build_trajectory",
    "chain",
    "checkpoint_chain",
    "load_run",
    "run_status",
    "stored_status",
    "thread_status",
    "usage_of",
]

Row = tuple[str, str | None, int | None]
"""A checkpoint of a thread: its id, its parent's id, its superstep."""


def checkpoint_chain(rows: Iterable[Row], head: str | None) -> dict[int, str]:
    """Superstep → checkpoint id along the branch that ends at ``head`` (forks left out; the
    latest checkpoint of a superstep wins)."""
    parent_of = {cid: (parent, step) for cid, parent, step in rows}
    out: dict[int, str] = {}
    current = head
    while current is not None and current in parent_of:
        parent, step = parent_of[current]
        out.setdefault(int(step if step is not None else -1), current)
        current = parent
    return out


def _thread(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def _row(config: RunnableConfig, parent: RunnableConfig | None, metadata: Any) -> Row:
    step = (metadata or {}).get("step")
    return (
        config["configurable"]["checkpoint_id"],
        parent["configurable"]["checkpoint_id"] if parent else None,
        None if step is None else int(step),
    )


def chain(saver: BaseCheckpointSaver[Any], thread_id: str, head: str | None) -> dict[int, str]:
    """:func:`checkpoint_chain` of a stored thread (read with ``saver.list``, or the
    ``trajectory`` view of a :class:`~aworld_graph.checkpoint.TrajectorySaver`)."""
    if head is None:
        return {}
    if isinstance(saver, TrajectorySaver):
        rows: Iterable[Row] = [
            (r.checkpoint_id, r.parent_checkpoint_id, r.step)
            for r in saver.transitions(thread_id)
            if r.checkpoint_id is not None  # a failed step made no checkpoint
        ]
    else:
        rows = [_row(t.config, t.parent_config, t.metadata) for t in saver.list(_thread(thread_id))]
    return checkpoint_chain(rows, head)


async def achain(
    saver: BaseCheckpointSaver[Any], thread_id: str, head: str | None
) -> dict[int, str]:
    """:func:`chain`, read with ``saver.alist``."""
    if head is None:
        return {}
    rows = [
        _row(t.config, t.parent_config, t.metadata) async for t in saver.alist(_thread(thread_id))
    ]
    return checkpoint_chain(rows, head)


def run_status(status: Any, *, failed: bool, interrupted: bool, pending: bool) -> str:
    """The status of a run at its latest checkpoint: ``error`` if a node failed, else
    ``interrupted`` if one waits for input, else ``running`` if nodes are still due, else
    the state's ``status`` (``finished`` for a graph that ended with it still ``running``).

    ``pending`` includes a step whose results are saved while its checkpoint is not (the
    process died in between): such a run has not ended; running it again goes on."""
    if failed:
        return "error"
    if interrupted:
        return "interrupted"
    if pending:
        return "running"
    return "finished" if status in (None, "", "running") else str(status)


_ERROR, _INTERRUPT = "__error__", "__interrupt__"


def stored_status(channels: Mapping[str, Any], writes: Sequence[Any]) -> str:
    """:func:`run_status` of a checkpoint read without its graph: its channel values and
    pending writes (``(task id, channel, value)``). Nodes are due when a ``branch:to:``
    channel (or the input's ``__start__``) holds a value, or when a task of the next step
    saved writes (LangGraph's snapshot counts those as its ``tasks`` too)."""
    written = [w[1] for w in writes]
    return run_status(
        channels.get("status"),
        failed=_ERROR in written,
        interrupted=_INTERRUPT in written,
        pending=any(k.startswith("branch:to:") or k == "__start__" for k in channels)
        or any(c not in (_ERROR, _INTERRUPT) for c in written),
    )


def thread_status(saver: BaseCheckpointSaver[Any], thread_id: str) -> str | None:
    """:func:`stored_status` of a thread's latest checkpoint (the status :func:`load_run`
    gives it), or ``None`` for a thread with no checkpoint."""
    tup = saver.get_tuple(_thread(thread_id))
    if tup is None:
        return None
    channels = dict(tup.checkpoint.get("channel_values") or {})
    return stored_status(channels, list(tup.pending_writes or []))


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
        # rewards.episode_reward's rule; rewards imports the runner, which imports this
        return next((r for r in reversed(self.rewards) if r.get("level") == "episode"), None)

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
        """AWorld trajectory items of the run (see :func:`build_trajectory`)."""
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


def load_run(saver: BaseCheckpointSaver[Any], info: ThreadInfo | str) -> Run | None:
    """Read one thread's latest checkpoint as a :class:`Run` (``None`` if it has none)."""
    if isinstance(info, str):
        info = ThreadInfo(thread_id=info)
    tup = saver.get_tuple(_thread(info.thread_id))
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
        status=stored_status(channels, list(tup.pending_writes or [])),
        checkpoint_id=head,
        started_at=info.started_at,
        ended_at=info.ended_at or tup.checkpoint.get("ts"),
        checkpoints=chain(saver, info.thread_id, head),
    )
