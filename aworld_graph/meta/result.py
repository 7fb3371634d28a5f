"""What an optimization found: :class:`OptimizeResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .budget import Budget, Spent
from .candidates import Candidate
from .evaluate import Comparison
from .store import Step
from .tasks import TaskSet

__all__ = ["OptimizeResult"]


@dataclass(kw_only=True)
class OptimizeResult:
    """What an optimization found."""

    run_id: str
    """Its id (tables ``meta_*`` and thread ids ``meta-<run_id>-…``)."""
    workflow: Path
    """The seed workflow file."""
    tasks: TaskSet
    """The task set."""
    candidates: list[Candidate]
    """Every candidate, seed first."""
    steps: list[Step]
    """Every iteration."""
    best: Candidate
    """The candidate with the best dev score (the seed if nothing beat it)."""
    spent: Spent
    """What it used."""
    budget: Budget
    """Its limits."""
    stop_reason: str
    """Why the search stopped."""
    comparison: Comparison | None = None
    """Best vs seed on the test split (paired bootstrap), when there is one."""
    origins: dict[str, str] = field(default_factory=dict)
    """Node → the card file it came from in the seed workflow."""
    outputs: list[Path] = field(default_factory=list)
    """Files written (cards, workflow, report)."""

    @property
    def seed(self) -> Candidate:
        return self.candidates[0]

    def candidate(self, cid: str) -> Candidate:
        return next(c for c in self.candidates if c.id == cid)

    def lineage(self, cid: str | None = None) -> list[Candidate]:
        """The candidates from the seed to ``cid`` (default: the best)."""
        chain = []
        current: str | None = cid or self.best.id
        while current is not None:
            c = self.candidate(current)
            chain.append(c)
            current = c.parent
        return chain[::-1]
