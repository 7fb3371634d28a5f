"""What every rewrite operator works with: the :class:`OperatorContext` it may look at, the
:class:`Proposal` it returns and the :class:`Operator` protocol (the operators themselves are
in :mod:`.operators`, :mod:`.demos` and :mod:`.instructions`)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..errors import AWorldGraphError
from .candidates import Candidate, materialize, next_version
from .store import Step
from .tasks import TaskSet

__all__ = ["Operator", "OperatorContext", "Proposal"]


@dataclass(kw_only=True)
class Proposal:
    """A child candidate an operator proposes (or an attempt that made none)."""

    spec: dict[str, Any] | None
    """The child's workflow spec; ``None`` when the attempt produced nothing usable."""
    operator: str
    """What made it (``rewrite_prompt``, ``demos``, or the topology edit's kind)."""
    target: str | None = None
    """The node changed."""
    change: str = ""
    """What changed, in words."""
    key: str = ""
    """Identifies the edit (one parent is not given the same edit twice)."""
    note: str = ""
    """Why nothing usable came out, when ``spec`` is ``None``."""
    cost: dict[str, float] = field(default_factory=dict)
    """What the attempt cost: ``llm_calls``, ``tokens``, ``seconds``."""


@dataclass(kw_only=True)
class OperatorContext:
    """What an operator may look at."""

    run_id: str
    """The optimization run (thread ids of its runs start with ``meta-<run_id>``)."""
    iteration: int
    """The current search iteration."""
    parent: Candidate
    """The candidate to derive a child from (evaluated on ``train``)."""
    candidates: list[Candidate]
    """Every candidate so far (with its evaluations)."""
    tasks: TaskSet
    """The task set (its ``threshold`` says which runs succeeded)."""
    saver: BaseCheckpointSaver[Any]
    """The checkpoint database with every evaluation run."""
    rng: random.Random
    """Randomness seeded by the run and the iteration (so a resumed search repeats itself)."""
    steps: Sequence[Step] = ()
    """The search's iterations so far (attempts that made no candidate are only there)."""
    explore: bool = False
    """Random search: choose among the possible edits at random (with :attr:`rng`) instead of
    by the operator's own evidence and order."""

    def children(self, operator: str | None = None, target: str | None = None) -> list[Candidate]:
        """Candidates already derived from the parent (by ``operator`` on ``target``)."""
        return [
            c
            for c in self.candidates
            if c.parent == self.parent.id
            and (operator is None or c.operator == operator)
            and (target is None or c.target == target)
        ]

    def attempts(self, operator: str, target: str | None = None) -> int:
        """How often ``operator`` worked on ``target`` from the parent: the children it made
        and the attempts that made none."""
        empty = sum(
            1
            for s in self.steps
            if s.parent == self.parent.id
            and s.candidate is None
            and s.outcome == "invalid"
            and (target is None or s.target == target)
            and s.operator == operator
        )
        return len(self.children(operator, target)) + empty

    def tried(self) -> set[str]:
        """Keys of the edits already tried on the parent."""
        return {c.key for c in self.children() if c.key}

    def version(self, node: str) -> int:
        """The card version a changed ``node`` gets."""
        return next_version(self.candidates, node)

    def problem(self, spec: Mapping[str, Any]) -> str | None:
        """Why ``spec`` is not a valid workflow, or ``None``."""
        try:
            materialize(spec)
        except AWorldGraphError as exc:
            return str(exc)
        return None


class Operator(Protocol):
    """Proposes children of a candidate."""

    name: str
    """The operator family (``rewrite_prompt``, ``demos``, ``topology``)."""

    async def propose(self, ctx: OperatorContext) -> Proposal | None: ...
