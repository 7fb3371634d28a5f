"""Nodes that are not LLM agents: ``Critic``, ``Human`` and plain function nodes (``Node``).

Each is a dataclass definition; :mod:`aworld_graph.swarm.compile` turns it into a graph node whose
return value is an explicit state delta (plus one trace record).
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from .. import tracing
from ..agent import resolve_model
from ..config import AgentConfig
from ..errors import DefinitionError
from ..model import ChatModel
from ..records import Reward, TraceRecord
from ..state import SwarmState
from ._asking import ask

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["Critic", "Human", "Node", "Verdict"]

Verdict = float | tuple[float, str] | dict[str, Any]
"""What a scorer returns: a score in [0, 1], optionally with feedback."""


def _step(config: RunnableConfig) -> int:
    return int((config.get("metadata") or {}).get("langgraph_step", 0))


def _check_name(kind: str, name: Any) -> None:
    if (
        not isinstance(name, str)
        or not name.strip()
        or "|" in name
        or ":" in name
        or name.startswith("__")
    ):
        raise DefinitionError(
            f"{kind}.name must be a non-empty string without '|', ':' or a leading '__', got {name!r}"
        )


@dataclass(kw_only=True, eq=False)
class Critic:
    """Scores the output of the node it ``judges`` and routes: back with feedback, or onwards.

    Give either ``scorer`` (a function ``(output, state) -> score | (score, feedback)``) or a
    ``system_prompt`` for an LLM judge that answers ``{"score": 0..1, "feedback": "..."}``.
    The score and feedback go into ``state.rewards`` and so into the trajectory.
    """

    name: str
    """Unique node name."""
    judges: Any
    """The node (or its name) whose output is judged; it is retried on a low score."""
    system_prompt: str | None = None
    """Instructions for an LLM judge."""
    scorer: Callable[[str, SwarmState], Verdict | Awaitable[Verdict]] | None = None
    """A Python scorer instead of an LLM judge."""
    threshold: float = 0.7
    """Scores at or above this pass."""
    max_rounds: int = 3
    """Most verdicts per run for the judged node; after that the output passes as it is."""
    conf: AgentConfig | None = None
    """Model settings of an LLM judge."""
    model: ChatModel | None = None
    """A model object for the LLM judge (e.g. a ``FunctionModel`` in tests)."""
    description: str = ""
    """What this critic checks."""

    def __post_init__(self) -> None:
        _check_name("Critic", self.name)
        if (self.scorer is None) == (self.system_prompt is None):
            raise DefinitionError(
                f"critic {self.name!r}: give exactly one of scorer= or system_prompt="
            )
        if not 0.0 <= self.threshold <= 1.0:
            raise DefinitionError(
                f"critic {self.name!r}: threshold must be within [0, 1], got {self.threshold}"
            )
        if self.max_rounds < 1:
            raise DefinitionError(f"critic {self.name!r}: max_rounds must be at least 1")

    @property
    def judged_name(self) -> str:
        return self.judges if isinstance(self.judges, str) else self.judges.name

    def card(self) -> dict[str, Any]:
        return {
            "kind": "critic",
            "name": self.name,
            "judges": self.judged_name,
            "threshold": self.threshold,
            "max_rounds": self.max_rounds,
            "system_prompt": self.system_prompt,
            "description": self.description,
            "scorer": getattr(self.scorer, "__name__", None),
        }

    async def _judge(self, output: str, state: SwarmState) -> tuple[float, str, TraceRecord]:
        if self.scorer is not None:
            verdict = self.scorer(output, state)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            return (*_parse_verdict(verdict, self.name), {})
        model = self.model or resolve_model(self.conf)
        self.model = model
        prompt = [
            {"role": "system", "content": str(self.system_prompt)},
            {
                "role": "user",
                "content": f"Task:\n{state.get('input', '')}\n\nAnswer to judge:\n{output}\n\n"
                'Reply with JSON only: {"score": <number from 0 to 1>, "feedback": "<how to improve>"}',
            },
        ]
        response = await tracing.model_call(model, prompt)
        score, feedback = _parse_llm_verdict(response.content)
        llm: TraceRecord = {
            "model": response.model,
            "usage": response.usage.as_dict(),
            "latency_ms": round(response.latency_ms, 3),
            "content": response.content,
        }
        if response.retried:
            llm["retried"] = list(response.retried)
        return score, feedback, llm

    @tracing.critic_step
    async def node(self, state: SwarmState, config: RunnableConfig) -> dict[str, Any]:
        judged = self.judged_name
        output = str((state.get("outputs") or {}).get(judged, state.get("answer") or ""))
        rounds = 1 + sum(
            1
            for r in state.get("rewards", [])
            if r.get("source") == self.name and r.get("judged") == judged
        )
        score, feedback, llm = await self._judge(output, state)
        passed = score >= self.threshold
        status = "pass" if passed else ("max_rounds" if rounds >= self.max_rounds else "retry")
        step = _step(config)
        reward: Reward = {
            "step": step,
            "score": score,
            "status": status,
            "source": self.name,
            "feedback": feedback,
            "judged": judged,
            "round": rounds,
        }
        record: TraceRecord = {
            "kind": "critic",
            "at": time.time(),
            "node": self.name,
            "agent": self.name,
            "step": step,
            "score": score,
            "feedback": feedback,
            "status": status,
            "judged": judged,
            "round": rounds,
            "content": json.dumps({"score": score, "feedback": feedback}),
            "tool_calls": [],
            **llm,
        }
        if not llm:
            record["usage"] = None
        return {
            "rewards": reward,
            "trace": record,
            "steps": 1,
            "outputs": {self.name: {"score": score, "feedback": feedback, "status": status}},
        }

    def route(self, onwards: Callable[[SwarmState], Any]) -> Callable[[SwarmState], Any]:
        judged = self.judged_name

        def route(state: SwarmState) -> Any:
            mine = [r for r in state.get("rewards", []) if r.get("source") == self.name]
            if mine and mine[-1].get("status") == "retry":
                return judged
            return onwards(state)

        return route


def _parse_verdict(verdict: Any, name: str) -> tuple[float, str]:
    score: Any  # whatever the scorer gave: float() below rejects what is not a number
    if isinstance(verdict, dict):
        score, feedback = verdict.get("score"), verdict.get("feedback", "")
    elif isinstance(verdict, tuple):
        score, feedback = verdict[0], verdict[1] if len(verdict) > 1 else ""
    else:
        score, feedback = verdict, ""
    try:
        value = float(score)
    except (TypeError, ValueError):
        raise DefinitionError(
            f"critic {name!r}: scorer returned {verdict!r}; return a number in [0, 1] or (score, feedback)"
        ) from None
    return max(0.0, min(1.0, value)), str(feedback or "")


def _parse_llm_verdict(text: str) -> tuple[float, str]:
    """Read a score from a judge's reply: JSON first, else the first number (0..1 or 0..10)."""
    match = re.search(r"\{.*\}", text, re.S)
    if match:
        try:
            data = json.loads(match.group(0))
            return _parse_verdict(data, "llm judge")
        except (ValueError, DefinitionError):
            pass
    number = re.search(r"(\d+(?:\.\d+)?)", text)
    if number is None:
        return 0.0, f"the judge gave no score: {text[:200]}"
    value = float(number.group(1))
    return (value / 10 if value > 1 else value), text.strip()[:500]


@dataclass(kw_only=True, eq=False)
class Human:
    """Stops the run for a person's input (LangGraph ``interrupt``).

    ``Runners.resume(task_id, swarm=..., value=...)`` (or ``aworld-graph resume ID --value``)
    continues with the value: it is appended as a user message and kept in
    ``context[<name>]`` and ``outputs[<name>]``.

    The interrupt's value and how an answer is read: :mod:`aworld_graph.swarm._asking` (the
    Agent Chat UI's form answers it too). An answer it cannot read is not kept: the step asks
    again, and records the refused answer with why in the trace once it is answered.
    """

    name: str
    """Unique node name."""
    prompt: str = "Review the answer and reply (for example 'approve' or a correction)."
    """What the person is asked."""
    description: str = ""

    def __post_init__(self) -> None:
        _check_name("Human", self.name)

    def card(self) -> dict[str, Any]:
        return {
            "kind": "human",
            "name": self.name,
            "prompt": self.prompt,
            "description": self.description,
        }

    async def node(self, state: SwarmState, config: RunnableConfig) -> dict[str, Any]:
        value, refused = ask(self.name, self.prompt, state.get("answer"), self.description)
        trace: list[TraceRecord] = []
        for given, error in refused:  # kept in the trajectory with why it was not taken
            trace.append(self._record(config, json.dumps(given, default=str)[:2000]))
            trace[-1]["error"] = error
        text = value if isinstance(value, str) else json.dumps(value)
        return {
            "messages": [{"role": "user", "content": text, "_agent": self.name}],
            "context": {self.name: value},
            "outputs": {self.name: value},
            "trace": [*trace, self._record(config, text)],
            "steps": 1,
        }

    def _record(self, config: RunnableConfig, content: str) -> TraceRecord:
        return {
            "kind": "human",
            "at": time.time(),
            "node": self.name,
            "agent": self.name,
            "step": _step(config),
            "content": content,
            "tool_calls": [],
        }


@dataclass(kw_only=True, eq=False)
class Node:
    """A plain function as a graph node: ``fn(state) -> dict`` of state updates (sync or async).

    Return keys of :class:`~aworld_graph.state.SwarmState` (``context``, ``answer``,
    ``outputs``…). A returned ``"output"`` key is stored as this node's output.
    """

    name: str
    """Unique node name."""
    fn: Callable[[SwarmState], dict[str, Any] | Awaitable[dict[str, Any]]]
    """The function."""
    description: str = ""
    agent: Agent | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _check_name("Node", self.name)
        if not callable(self.fn):
            raise DefinitionError(f"node {self.name!r}: fn must be callable")

    def card(self) -> dict[str, Any]:
        return {
            "kind": "function",
            "name": self.name,
            "function": getattr(self.fn, "__qualname__", str(self.fn)),
            "description": self.description,
        }

    async def node(self, state: SwarmState, config: RunnableConfig) -> dict[str, Any]:
        result = self.fn(state)
        if inspect.isawaitable(result):
            result = await result
        update = dict(result or {})
        if "output" in update:
            output = update.pop("output")
            update["outputs"] = {**update.get("outputs", {}), self.name: output}
            update.setdefault("answer", output if isinstance(output, str) else json.dumps(output))
        record: TraceRecord = {
            "kind": "node",
            "at": time.time(),
            "node": self.name,
            "agent": self.name,
            "step": _step(config),
            "tool_calls": [],
            "content": json.dumps(
                {k: v for k, v in update.items() if k not in ("messages", "trace")}, default=str
            )[:2000],
        }
        update["trace"] = [
            record,
            *(
                [update["trace"]]
                if isinstance(update.get("trace"), dict)
                else update.get("trace", [])
            ),
        ]
        update["steps"] = 1
        return update
