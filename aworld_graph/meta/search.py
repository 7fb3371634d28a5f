"""The search: a pool of candidates, selected on ``train``, confirmed on ``dev``, reported on
``test``, within a budget; its state lives in the checkpoint database, so it resumes.

Each iteration gives one operator its turn (round robin): a parent is chosen from the pool
(``best``: the highest training score; ``pareto``: sampled among candidates that are best on
at least one training task, as in GEPA), the operator proposes a child, the child is run on
the training split and **accepted** into the pool if it beats its parent's training score.
An accepted child that leads the pool on training is **confirmed** on the dev split; the
best candidate is the one with the highest dev score. At the end the seed and the best are
run on the held-out test split and compared with a paired bootstrap.

>>> result = await Optimizer(workflow="workflows/math.yaml", tasks=shipped("arithmetic"),
...                          budget=Budget.parse("calls=400")).run()        # doctest: +SKIP

:func:`~aworld_graph.meta.optimize` (in :mod:`._optimize`) runs one and writes its outputs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..checkpoint import TrajectorySaver
from ..config import RunConfig
from ..errors import ConfigError
from ..model import ChatModel
from ._evaluation import Evaluator
from ._iteration import Iterations
from ._state import Event, SearchState
from ._stop import stop_reason
from ._store import MetaStore, Step
from .budget import Budget, Spent
from .candidates import Candidate, seed_spec
from .evaluate import paired_bootstrap
from .operators import Operator, default_operators
from .result import OptimizeResult
from .tasks import TaskSet

__all__ = ["Budget", "OptimizeResult", "Optimizer", "Spent"]

# the parts of the search, by job: what it has so far, where it is kept and the events it sends
# (._state); evaluating a candidate once (._evaluation); proposing and judging children
# (._iteration); when to stop (._stop). This module runs them.


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]


@dataclass(kw_only=True)
class Optimizer:
    """One optimization of a workflow on a task set (see the module docstring)."""

    workflow: str | Path
    """The seed workflow file."""
    tasks: TaskSet
    """Tasks with train / dev / test splits and a reward."""
    budget: Budget = field(default_factory=lambda: Budget(iterations=12))
    """Limits."""
    operators: Sequence[Operator] | None = None
    """Rewrite operators, taking turns; default :func:`~.operators.default_operators`."""
    optimizer_model: ChatModel | None = None
    """Model of the optimizer agent (default operators only)."""
    db: str | Path | None = None
    """The checkpoint store: a SQLite file or a ``postgresql://`` URL (default:
    ``$AWORLD_GRAPH_DB``, else ``checkpoints/aworld.db``)."""
    model: ChatModel | None = None
    """Model for every agent and critic of every candidate (as ``load_workflow(model=)``)."""
    models: Mapping[str, ChatModel] = field(default_factory=dict)
    """Models for named nodes (as ``load_workflow(models=)``)."""
    pool: Mapping[str, ChatModel] = field(default_factory=dict)
    """Model objects by name, for agents whose card names them (``model.llm_model_name``)."""
    concurrency: int = 4
    """Runs in flight at once."""
    run_conf: RunConfig | None = None
    """Where each candidate's evaluation runs (``RunConfig(engine_name="ray", worker_num=N)``
    fans it out to Ray workers; the models given here must then be module attributes)."""
    retry_errors: bool = False
    """Run again the stored runs of a resumed optimization that ended in an error (by default
    they are read back and keep the score they ended with, so a deterministic failure costs
    its calls once)."""
    selection: Literal["best", "pareto"] = "best"
    """How a parent is chosen."""
    search: Literal["guided", "random"] = "guided"
    """``guided``: the operators take turns, each proposing what its evidence supports first,
    from the parent ``selection`` picks; ``random`` (a baseline): each iteration a random
    operator makes a random one of its edits of a random candidate of the pool (the same
    operators, acceptance and budget)."""
    min_gain: float = 0.0
    """A child is accepted when its training score beats its parent's by more than this."""
    target: float | None = 1.0
    """Stop when the best training score reaches this (``None``: never)."""
    seed: int = 0
    """Seed of the search's randomness."""
    run_id: str | None = None
    """Default: a hash of the workflow, the task set and these settings (so the same call
    resumes the same optimization)."""
    on_event: Callable[[Event], None] | None = None
    """Called with progress events (``start``, ``eval``, ``candidate``, ``decision``, ``skip``,
    ``stop``, ``done``)."""

    def __post_init__(self) -> None:
        self.workflow = Path(self.workflow)
        self._ops: list[Operator] = list(self.operators or default_operators(self.optimizer_model))
        if not self._ops:
            raise ConfigError("Optimizer needs at least one operator")
        if not self.tasks.train:
            raise ConfigError(
                f"task set {self.tasks.name!r} has no train split; the search selects on it"
            )
        if self.selection not in ("best", "pareto"):
            raise ConfigError(f"selection {self.selection!r}: use 'best' or 'pareto'")
        if self.search not in ("guided", "random"):
            raise ConfigError(f"search {self.search!r}: use 'guided' or 'random'")
        self._state = SearchState(self.tasks, self.on_event)
        self._state.run_id = self.run_id or ""

    # -- what the search has so far (see ._state) ----------------------------------------------
    @property
    def id(self) -> str:
        """The run id (set when :meth:`run` starts)."""
        return self._state.run_id

    @property
    def cands(self) -> list[Candidate]:
        """The pool and every other candidate, seed first (loaded from the database)."""
        return self._state.cands

    @property
    def steps(self) -> list[Step]:
        """The iterations so far."""
        return self._state.steps

    @property
    def saver(self) -> TrajectorySaver:
        """The checkpoint database (while :meth:`run` runs)."""
        return self._state.saver

    @property
    def store(self) -> MetaStore:
        """The optimizer's tables in it (while :meth:`run` runs)."""
        return self._state.store

    def spent(self) -> Spent:
        return self._state.spent()

    def best(self) -> Candidate:
        """The candidate with the best dev score (training score where there is no dev split)."""
        return self._state.best()

    # -- the run ------------------------------------------------------------------------------
    async def run(self) -> OptimizeResult:
        """Optimize (or continue an optimization with the same id) and return the result."""
        spec, origins = seed_spec(self.workflow)
        settings: dict[str, Any] = {
            "operators": [op.name for op in self._ops],
            "selection": self.selection,
            "min_gain": self.min_gain,
            "seed": self.seed,
        }
        if self.search != "guided":  # (the ids of guided runs stay as they were)
            settings["search"] = self.search
        state = self._state
        state.run_id = self.run_id or f"{re.sub(r'[^A-Za-z0-9_]+', '_', spec['name'])}-" + _hash(
            spec, self.tasks.fingerprint(), settings
        )
        state.open(self.db)
        evaluate = Evaluator(
            state=state,
            model=self.model,
            models=self.models,
            pool=self.pool,
            concurrency=self.concurrency,
            run_conf=self.run_conf,
            retry_errors=self.retry_errors,
        )
        iterations = Iterations(
            state=state,
            evaluate=evaluate,
            ops=self._ops,
            selection=self.selection,
            min_gain=self.min_gain,
            seed=self.seed,
            search=self.search,
        )
        try:
            previous = state.store.run(state.run_id)
            state.store.save_run(
                state.run_id,
                workflow=str(self.workflow),
                tasks=self.tasks.name,
                settings={**settings, "budget": str(self.budget)},
                origins=origins,
                status="running",
            )
            state.load(Candidate(id="c000", spec=spec, status="seed", change="the seed workflow"))
            state.emit(
                "start",
                run_id=state.run_id,
                resumed=previous is not None,
                candidates=len(state.cands),
                iterations=len(state.steps),
                train=len(self.tasks.train),
                dev=len(self.tasks.dev),
                test=len(self.tasks.test),
                budget=str(self.budget),
            )
            seed = state.cands[0]
            await evaluate(seed, "train")
            if self.tasks.dev:
                await evaluate(seed, "dev")
            while True:
                pending = next((c for c in state.cands if c.status == "pending"), None)
                if pending is not None:
                    if not any(s.candidate == pending.id for s in state.steps):
                        state.record_pending(pending, pending.operator)
                    await iterations.judge(pending)
                    continue
                reason = stop_reason(state, self.budget, self.target)
                if reason is not None:
                    break
                cand = await iterations.propose(len(state.steps) + 1)
                if cand is not None:
                    await iterations.judge(cand)
            state.emit("stop", reason=reason, spent=state.spent())
            best = state.best()
            comparison = None
            if self.tasks.test:
                order = [t.id for t in self.tasks.test]
                before = await evaluate(seed, "test")
                after = await evaluate(best, "test")
                comparison = paired_bootstrap(before.values(order), after.values(order))
            state.store.save_run(state.run_id, status="done", best=best.id, stop_reason=reason)
            result = OptimizeResult(
                run_id=state.run_id,
                workflow=Path(self.workflow),
                tasks=self.tasks,
                candidates=list(state.cands),
                steps=list(state.steps),
                best=best,
                spent=state.spent(),
                budget=self.budget,
                stop_reason=reason,
                comparison=comparison,
                origins=origins,
            )
            state.emit("done", result=result)
            return result
        finally:
            state.close()
