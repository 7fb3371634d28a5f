"""``Task`` and ``TaskResponse``: what to run and what came of it (AWorld's shapes)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .config import TaskConfig
from .errors import DefinitionError

if TYPE_CHECKING:
    from .agent import Agent
    from .swarm.graph import GraphSource

__all__ = ["Task", "TaskResponse"]


@dataclass(kw_only=True, eq=False)
class Task:
    """One input for an agent or a swarm. Its run is checkpointed under thread ``id``."""

    input: str
    """The user's request."""
    agent: Agent | None = None
    """Run a single agent…"""
    swarm: GraphSource | None = None
    """…or a swarm (exactly one of the two)."""
    conf: TaskConfig = field(default_factory=TaskConfig)
    """Run settings (``max_steps``, ``run_mode``…)."""
    id: str = ""
    """Task id (random when empty); also the checkpoint thread id, so a run can be resumed by it."""
    session_id: str | None = None
    """Groups tasks of one conversation (kept in run metadata)."""
    name: str | None = None
    """Human-readable name (defaults to the agent's or swarm's name)."""
    expected: Any = None
    """Ground truth, when known (used by reward functions and exports)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form tags, kept in the run's checkpoint metadata (no secrets)."""
    new_thread: bool = False
    """Thread ``id`` holds nothing yet, so a run starts it without reading it first. True for
    a generated id (and for a thread a server has just made); a run sets it back to False."""

    def __post_init__(self) -> None:
        if not self.id:
            self.id = uuid.uuid4().hex
            self.new_thread = True
        if (self.agent is None) == (self.swarm is None):
            raise DefinitionError(
                f"task {self.id}: give exactly one of agent= or swarm= "
                f"(got {'both' if self.agent is not None else 'neither'})"
            )
        if self.name is None:
            self.name = self.source.name

    @property
    def source(self) -> GraphSource:
        """The agent or swarm this task runs."""
        from .swarm.graph import as_source

        return as_source(self.agent if self.agent is not None else self.swarm)


@dataclass(kw_only=True)
class TaskResponse:
    """What a run produced (AWorld's ``TaskResponse`` plus what resuming needs)."""

    id: str
    """The task id (= checkpoint thread id)."""
    answer: str | None = None
    """The final answer, if the run reached one."""
    success: bool = False
    """True when the run finished with an answer."""
    msg: str | None = None
    """Why the run did not succeed (error, limit, interrupt), or ``None``."""
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    """AWorld trajectory items, one per agent step (see :mod:`aworld_graph.trajectory`)."""
    llm_calls: int = 0
    """Number of model calls made in the run."""
    usage: dict[str, int] = field(default_factory=dict)
    """Summed token usage."""
    time_cost: float = 0.0
    """Seconds this call to the runner took."""
    status: str = "running"
    """``finished`` | ``max_steps`` | ``interrupted`` | ``error`` | ``running`` (stepping)."""
    thread_id: str = ""
    """Checkpoint thread holding the run."""
    checkpoint_id: str | None = None
    """Latest checkpoint of the run: resume or fork from here."""
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    """Pending human-input requests (``Runners.resume(task_id, ..., value=...)`` answers them)."""
    state: dict[str, Any] = field(default_factory=dict)
    """The final graph state (``SwarmState`` values)."""
    retried: list[str] = field(default_factory=list)
    """Why earlier attempts of this run were lost and where it went on (a Ray worker that died
    mid-task: the run was retried on another worker and resumed from its last checkpoint)."""

    @property
    def unavailable_servers(self) -> dict[str, str]:
        """MCP servers the run went on without (they could not be started or reached), and
        why; their tools were not offered to the model."""
        down: dict[str, str] = {}
        for record in self.state.get("trace") or []:
            for server, reason in (record.get("unavailable_servers") or {}).items():
                down.setdefault(str(server), str(reason))
        return down

    def summary(self) -> str:
        """A few lines for a terminal: answer, status and the steps taken."""
        lines = [f"task {self.id}: {self.status}" + (f" ({self.msg})" if self.msg else "")]
        for server, reason in self.unavailable_servers.items():
            lines.append(f"  without MCP server {server!r}: {reason[:300]}")
        for item in self.trajectory:
            action = item["action"]
            if item["meta"].get("kind") == "error":  # the step was tried and did not happen
                error = str(action["ext_info"].get("error") or "unknown error")
                lines.append(
                    f"  step {item['meta']['step']:>3} {item['meta']['agent_id'] or '?'} "
                    f"failed: {error[:200]}"
                )
                continue
            what = ", ".join(
                f"{tc['function']['name']}({tc['function']['arguments']})"
                for tc in action["tool_calls"]
            ) or repr((action["content"] or "")[:80])
            outs = item["reward"]["tool_outputs"]
            got = (" -> " + "; ".join(str(o["content"])[:60] for o in outs)) if outs else ""
            lines.append(
                f"  step {item['meta']['step']:>3} {item['meta']['agent_id']}: {what}{got}"
            )
        lines.append(
            f"  {self.llm_calls} LLM calls, {self.usage.get('total_tokens', 0)} tokens, {self.time_cost:.2f}s"
        )
        return "\n".join(lines)
