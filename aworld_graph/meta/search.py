"""The search: a pool of candidates, selected on ``train``, confirmed on ``dev``, reported on
``test``, within a budget; its state lives in the checkpoint store, so it resumes.

>>> result = await optimize("workflows/math.yaml", shipped("arithmetic"),
...                         budget=Budget.parse("calls=400"), out=".")   # doctest: +SKIP

One optimization (:class:`Optimizer`, :meth:`Optimizer.run`) goes like this:

1. The seed workflow is evaluated on the training split (and on dev, when there is one).
2. Each iteration gives one operator its turn (round robin). A parent is chosen from the pool
   (``best``: the highest training score; ``pareto``: sampled among candidates that are best
   on at least one training task, as in GEPA) and the operator proposes a child; an operator
   with nothing left to try on the pool passes its turn to the next.
3. The child is run on the training split and judged (:func:`verdict`): **accepted** into the
   pool if it beats its parent's training score on the tasks that are not its own
   demonstrations. An accepted child that leads the pool on training is **confirmed** on the
   dev split; the best candidate is the one with the highest dev score.
4. The search stops at the iteration budget, at the target score, when no operator has
   anything left to try, or before an iteration that a limit on calls, tokens or time would not
   leave room for (with the final test evaluation reserved).
5. The seed and the best are run on the held-out test split and compared with a paired
   bootstrap; :func:`optimize` also writes the outputs (:mod:`.report`).

Every change – a candidate, an evaluation, a step – is written to the optimizer's tables
(:class:`~.store.MetaStore`) as it happens, and a candidate keeps its evaluations, so a killed
optimization run again with the same id continues where it stopped, running only what was in
flight.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..checkpoint import TrajectorySaver, open_store
from ..config import RunConfig
from ..engine import remember
from ..errors import AWorldGraphError, ConfigError
from ..model import ChatModel
from .budget import Budget, Spent
from .candidates import Candidate, materialize, nodes_of, seed_spec
from .demos import demo_inputs
from .evaluate import Evaluation, evaluate, paired_bootstrap
from .operators import Operator, OperatorContext, default_operators
from .report import write_outputs
from .result import OptimizeResult
from .store import MetaStore, Step
from .tasks import TaskItem, TaskSet

__all__ = [
    "COSTLY_EDITS",
    "Budget",
    "Event",
    "OptimizeResult",
    "Optimizer",
    "Spent",
    "optimize",
    "optimize_sync",
    "verdict",
]

Event = dict[str, Any]
"""A progress event: ``{"event": name, **data}``."""

COSTLY_EDITS = ("self_consistency",)
"""Edits that multiply a node's calls: kept only on paired evidence that they pay."""


async def optimize(
    workflow: str | Path,
    tasks: TaskSet,
    *,
    out: str | Path | None = None,
    **options: Any,
) -> OptimizeResult:
    """Run an :class:`Optimizer` (``options`` are its fields); with ``out``, write the new card
    versions, the best workflow and the report there (see :mod:`.report`)."""
    result = await Optimizer(workflow=workflow, tasks=tasks, **options).run()
    if out is not None:
        result.outputs = write_outputs(result, out)
    return result


def optimize_sync(workflow: str | Path, tasks: TaskSet, **options: Any) -> OptimizeResult:
    """Blocking :func:`optimize` (for scripts; not inside a running event loop)."""
    return asyncio.run(optimize(workflow, tasks, **options))


@dataclass(kw_only=True)
class Optimizer:
    """One optimization of a workflow on a task set (see the module docstring).

    >>> result = await Optimizer(workflow="workflows/math.yaml", tasks=shipped("arithmetic"),
    ...                          budget=Budget.parse("calls=400")).run()    # doctest: +SKIP
    """

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

    # -- what the search has so far (kept by its SearchState) ---------------------------------
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
        if self.search != "guided":  # only a non-default search joins, so guided ids stay stable
            settings["search"] = self.search
        state = self._state
        state.run_id = self.run_id or f"{re.sub(r'[^A-Za-z0-9_]+', '_', spec['name'])}-" + _hash(
            spec, self.tasks.fingerprint(), settings
        )
        state.open(self.db)
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
            await self._evaluate(seed, "train")
            if self.tasks.dev:
                await self._evaluate(seed, "dev")
            while True:
                pending = next((c for c in state.cands if c.status == "pending"), None)
                if pending is not None:  # proposed before a crash: judge it first
                    if not any(s.candidate == pending.id for s in state.steps):
                        state.record_pending(pending, pending.operator)
                    await self._judge(pending)
                    continue
                reason = self._stop_reason()
                if reason is not None:
                    break
                cand = await self._propose(len(state.steps) + 1)
                if cand is not None:
                    await self._judge(cand)
            state.emit("stop", reason=reason, spent=state.spent())
            best = state.best()
            comparison = None
            if self.tasks.test:
                order = [t.id for t in self.tasks.test]
                before = await self._evaluate(seed, "test")
                after = await self._evaluate(best, "test")
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

    # -- one iteration: parents, a proposal, its judgement ------------------------------------
    def _parents(self, iteration: int) -> list[Candidate]:
        """The pool in the order parents are tried: by training score (``best``), or sampled
        by how many training tasks each is best on (``pareto``, as in GEPA)."""
        pool = [
            c for c in self._state.cands if c.status in ("seed", "accepted") and "train" in c.evals
        ]
        if self.selection == "best":
            return sorted(pool, key=lambda c: (-train_score(c), c.id))
        rng = random.Random(f"{self.seed}-{iteration}")
        tasks = list(pool[0].evals["train"].scores)
        wins = dict.fromkeys((c.id for c in pool), 0)
        for t in tasks:
            top = max(c.evals["train"].scores.get(t, 0.0) for c in pool)
            for c in pool:
                if c.evals["train"].scores.get(t, 0.0) >= top:
                    wins[c.id] += 1
        order: list[Candidate] = []
        left = [c for c in pool if wins[c.id] > 0]
        while left:
            pick = rng.choices(left, weights=[wins[c.id] for c in left])[0]
            order.append(pick)
            left.remove(pick)
        return order + sorted((c for c in pool if c not in order), key=lambda c: -train_score(c))

    async def _propose(self, iteration: int) -> Candidate | None:
        """The operator whose turn it is proposes a child (an operator with nothing left to
        try on the pool passes its turn to the next); ``None`` when none made one."""
        state, ops = self._state, self._ops
        first = (iteration - 1) % len(ops)
        turns = [ops[(first + k) % len(ops)] for k in range(len(ops))]
        parents = self._parents(iteration)
        explore = self.search == "random"
        if explore:  # the same operators, at random: any operator, any parent in the pool
            rng = random.Random(f"{self.seed}-{iteration}-random")
            rng.shuffle(turns)
            rng.shuffle(parents)
            first = ops.index(turns[0])
        for op, parent in ((op, parent) for op in turns for parent in parents):
            ctx = OperatorContext(
                run_id=state.run_id,
                iteration=iteration,
                parent=parent,
                candidates=state.cands,
                tasks=state.tasks,
                saver=state.saver,
                rng=random.Random(f"{self.seed}-{iteration}-{parent.id}"),
                steps=state.steps,
                explore=explore,
            )
            proposal = await op.propose(ctx)
            if proposal is None:
                continue
            if proposal.spec is None:  # an attempt that produced nothing usable
                state.record(
                    Step(
                        iteration=iteration,
                        operator=op.name,
                        parent=parent.id,
                        target=proposal.target,
                        outcome="invalid",
                        note=proposal.note,
                        cost=proposal.cost,
                    )
                )
                return None
            cand = Candidate(
                id=f"c{len(state.cands):03d}",
                spec=proposal.spec,
                parent=parent.id,
                operator=proposal.operator,
                target=proposal.target,
                change=proposal.change,
                key=proposal.key,
                iteration=iteration,
                status="pending",
                cost=proposal.cost,
            )
            state.add(cand)
            state.record_pending(cand, op.name)
            state.emit(
                "candidate",
                iteration=iteration,
                candidate=cand.id,
                parent=parent.id,
                operator=cand.operator,
                change=cand.change,
            )
            return cand
        state.record(
            Step(
                iteration=iteration,
                operator=ops[first].name,
                outcome="skipped",
                note="no operator has anything left to try on the pool",
            )
        )
        return None

    async def _judge(self, cand: Candidate) -> None:
        """Evaluate ``cand`` on training and accept or reject it (:func:`verdict`); an accepted
        child that leads the pool on training is also evaluated on dev."""
        state = self._state
        parent = state.get(cand.parent)
        step = next(s for s in state.steps if s.candidate == cand.id)
        try:
            ev = await self._evaluate(cand, "train")
        except AWorldGraphError as exc:  # the child does not load or cannot run
            cand.status, step.note = "invalid", str(exc).splitlines()[0]
        else:
            cand.status, step.note = verdict(cand, parent, state.tasks.train, self.min_gain)
            if cand.status == "accepted":
                before = {n["name"]: n.get("version") for n in nodes_of(parent.spec)}
                for n in nodes_of(cand.spec):
                    if before.get(n["name"]) != n.get("version"):
                        n["score"] = round(ev.mean, 4)
                leaders = [c for c in state.cands if "dev" in c.evals or c.status == "seed"]
                if state.tasks.dev and ev.mean >= max(train_score(c) for c in leaders):
                    dev = await self._evaluate(cand, "dev")
                    step.note += f"; dev {dev.mean:.3f}"
        step.outcome = cand.status
        state.store.save_candidate(state.run_id, cand)
        state.record(step)
        state.emit(
            "decision",
            iteration=step.iteration,
            candidate=cand.id,
            status=cand.status,
            train=cand.score("train"),
            parent_train=train_score(parent),
            dev=cand.score("dev"),
            operator=cand.operator,
            change=cand.change,
            spent=state.spent(),
            best=state.best().id,
        )

    # -- evaluating a candidate ---------------------------------------------------------------
    async def _evaluate(self, c: Candidate, split: str) -> Evaluation:
        """``c`` on ``split``: its stored evaluation, or a new one (saved as soon as it ends,
        with an ``eval`` event). A candidate is evaluated on a split once, also across a
        resume."""
        if split in c.evals:
            return c.evals[split]
        state = self._state
        info = {"candidate": c.id, "meta_run": state.run_id}
        swarm = materialize(c.spec, model=self.model, models=self.models, pool=self.pool, info=info)
        if self.run_conf is not None and self.run_conf.engine_name == "ray":
            remember(swarm, c.spec, model=self.model, models=self.models, pool=self.pool, info=info)
        ev = await evaluate(
            swarm,
            state.tasks.split(split),
            reward=state.tasks.reward,
            threshold=state.tasks.threshold,
            candidate=c.id,
            split=split,
            run_id=state.run_id,
            checkpointer=state.saver,
            concurrency=self.concurrency,
            run_conf=self.run_conf,
            retry_errors=self.retry_errors,
        )
        c.evals[split] = ev
        state.store.save_eval(state.run_id, ev)
        state.emit(
            "eval",
            candidate=c.id,
            split=split,
            mean=ev.mean,
            ci=ev.ci,
            n=ev.n,
            llm_calls=ev.llm_calls,
            tokens=ev.tokens,
            seconds=ev.seconds,
            spent=state.spent(),
        )
        return ev

    # -- when to stop -------------------------------------------------------------------------
    def _stop_reason(self) -> str | None:
        """Why the search should stop before another iteration, or ``None`` to go on."""
        state, b = self._state, self.budget
        spent, tasks = state.spent(), state.tasks
        if b.iterations is not None and spent.iterations >= b.iterations:
            return f"budget: {b.iterations} iterations done"
        pool = [c for c in state.cands if c.status in ("seed", "accepted")]
        best_train = max(train_score(c) for c in pool)
        if self.target is not None and best_train >= self.target:
            return f"target reached: training score {best_train:.3f}"
        if state.steps and state.steps[-1].outcome == "skipped":
            return "nothing left to try: every operator is exhausted on the pool"
        n_train = max(1, len(tasks.train))
        dev_share, test_share = len(tasks.dev) / n_train, len(tasks.test) / n_train
        for name, attr, limit, used in (
            ("calls", "llm_calls", b.llm_calls, spent.llm_calls),
            ("tokens", "tokens", b.tokens, spent.tokens),
            ("time", "seconds", b.seconds, spent.seconds),
        ):
            if limit is None:
                continue
            # conservative estimates: the dearest recent training run, a dev check, the
            # optimizer agent's share; and the final test runs of the seed and the dearest best
            recent = [
                getattr(c.evals["train"], attr) for c in state.cands[-3:] if "train" in c.evals
            ]
            steps = [float(s.cost.get(attr, 0)) for s in state.steps]
            next_cost = max(recent) * (1 + dev_share) + (sum(steps) / len(steps) if steps else 0)
            dearest = max(getattr(c.evals["train"], attr) for c in pool)
            seed_cost = getattr(state.cands[0].evals["train"], attr)
            reserve = test_share * (seed_cost + dearest)
            if used + next_cost + reserve > limit:
                return (
                    f"budget: {name} ({used:g} used of {limit:g}; an iteration costs "
                    f"~{next_cost:.0f}, the final test ~{reserve:.0f})"
                )
        return None


def verdict(
    child: Candidate, parent: Candidate, train: Sequence[TaskItem], min_gain: float = 0.0
) -> tuple[str, str]:
    """``"accepted"`` or ``"rejected"``, and why, for a child evaluated on the training split.

    The child must beat its parent by more than ``min_gain`` on the training tasks that are not
    among the child's demonstrations (a demonstration's own task would measure copying, not
    learning); an edit that multiplies the calls (:data:`COSTLY_EDITS`) must also beat its
    parent in 95 % of paired bootstrap resamples (the evidence that it pays)."""
    before, ev = parent.evals["train"], child.evals["train"]
    asked = demo_inputs(child.spec)
    kept = [
        t.id for t in train if t.input not in asked and t.id in ev.scores and t.id in before.scores
    ]
    note = f"train {ev.mean:.3f} vs parent {train_score(parent):.3f}"
    if not kept:
        return "rejected", note + "; no training task left to measure on"
    gain = statistics.fmean(ev.scores[t] - before.scores[t] for t in kept)
    if len(kept) < len(before.scores):
        note += f" ({gain:+.3f} on the {len(kept)} tasks that are not demonstrations)"
    if gain <= min_gain:
        return "rejected", note
    if child.operator in COSTLY_EDITS:
        test = paired_bootstrap(before.values(kept), ev.values(kept))
        calls = ev.llm_calls / max(1, before.llm_calls)
        note += f"; {calls:.1f}x the calls, P(better) {test.p_better:.2f}"
        if test.p_better < 0.95:
            return "rejected", note
    return "accepted", note


def train_score(c: Candidate) -> float:
    """The candidate's training score (``-inf`` before it has one)."""
    score = c.score("train")
    return -math.inf if score is None else score


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]


class SearchState:
    """What one optimization has so far – its candidates and steps – written to its
    :class:`~.store.MetaStore` as each changes, and the progress events it sends."""

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
        """The optimizer's tables in that store (set by :meth:`open`)."""

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
