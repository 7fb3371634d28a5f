"""What a search has so far – its candidates and iterations – where it keeps them, and the
progress events it sends.

:class:`SearchState` is shared by the parts of the search (:mod:`.search` runs it,
:mod:`._evaluation` adds evaluations, :mod:`._iteration` candidates and steps, :mod:`._stop`
reads it): every change is written to the :class:`~._store.MetaStore` in the checkpoint
store as it happens, so a killed optimization continues from there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..checkpoint import TrajectorySaver, open_store
from ._store import MetaStore, Step
from .budget import Spent
from .candidates import Candidate
from .tasks import TaskSet

__all__ = ["Event", "SearchState", "train_score"]

Event = dict[str, Any]
"""A progress event: ``{"event": name, **data}``."""


def train_score(c: Candidate) -> float:
    """The candidate's training score (``-inf`` before it has one)."""
    score = c.score("train")
    return -math.inf if score is None else score


class SearchState:
    """The candidates and steps of one optimization, kept in its database, with events."""

    def __init__(self, tasks: TaskSet, on_event: Callable[[Event], None] | None) -> None:
        self.tasks = tasks
        """The task set."""
        self.on_event = on_event
        """Called with each progress event."""
        self.run_id = ""
        """The run id (set when the search starts)."""
        self.cands: list[Candidate] = []
        """The pool and every other candidate, seed first (loaded from the database)."""
        self.steps: list[Step] = []
        """The iterations so far."""
        self.saver: TrajectorySaver
        """The checkpoint database (set by :meth:`open`)."""
        self.store: MetaStore
        """The optimizer's tables in that file (set by :meth:`open`)."""

    # -- storage ------------------------------------------------------------------------------
    def open(self, db: str | Path | None) -> None:
        """Open the checkpoint store ``db`` (SQLite or PostgreSQL; ``None``: the default
        store) and the optimizer's tables in it."""
        self.saver = open_store(db)
        try:
            self.store = MetaStore(self.saver)
        except BaseException:
            self.saver.close()
            raise

    def close(self) -> None:
        self.saver.close()

    def load(self, seed: Candidate) -> None:
        """Read the run's candidates and steps back (``seed`` starts a new run's pool)."""
        self.cands = self.store.candidates(self.run_id)
        self.steps = self.store.steps(self.run_id)
        if not self.cands:
            self.cands = [seed]
            self.store.save_candidate(self.run_id, seed)

    def add(self, cand: Candidate) -> None:
        """A new candidate joins (it is saved before it is evaluated)."""
        self.cands.append(cand)
        self.store.save_candidate(self.run_id, cand)

    def record(self, step: Step) -> None:
        """Save ``step`` (it replaces the record of the same iteration)."""
        self.steps = [s for s in self.steps if s.iteration != step.iteration] + [step]
        self.steps.sort(key=lambda s: s.iteration)
        self.store.save_step(self.run_id, step)
        if step.outcome in ("skipped", "invalid"):
            self.emit(
                "skip",
                iteration=step.iteration,
                operator=step.operator,
                note=step.note,
                spent=self.spent(),
            )

    def record_pending(self, cand: Candidate, operator: str) -> None:
        """Save the step that made ``cand`` (by ``operator``), before it is judged."""
        self.record(
            Step(
                iteration=cand.iteration,
                operator=operator,
                parent=cand.parent,
                candidate=cand.id,
                outcome="pending",
                cost=cand.cost,
            )
        )

    # -- events -------------------------------------------------------------------------------
    def emit(self, event: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event({"event": event, **data})

    # -- what it has so far -------------------------------------------------------------------
    def get(self, cid: str | None) -> Candidate:
        return next(c for c in self.cands if c.id == cid)

    def spent(self) -> Spent:
        evs = [ev for c in self.cands for ev in c.evals.values()]
        return Spent(
            llm_calls=sum(e.llm_calls for e in evs)
            + sum(int(s.cost.get("llm_calls", 0)) for s in self.steps),
            tokens=sum(e.tokens for e in evs)
            + sum(int(s.cost.get("tokens", 0)) for s in self.steps),
            seconds=sum(e.seconds for e in evs)
            + sum(float(s.cost.get("seconds", 0)) for s in self.steps),
            iterations=len(self.steps),
        )

    def best(self) -> Candidate:
        """The candidate with the best dev score (training score where there is no dev split)."""
        split = "dev" if self.tasks.dev else "train"
        judged = [c for c in self.cands if split in c.evals and c.status in ("seed", "accepted")]
        return max(judged, key=lambda c: (c.evals[split].mean, train_score(c), -int(c.id[1:])))
