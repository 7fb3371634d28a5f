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
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..checkpoint import TrajectorySaver, open_saver
from ..config import RunConfig
from ..engine import remember
from ..errors import AWorldGraphError, ConfigError
from ..model import ChatModel
from ._store import MetaStore, Step
from .budget import Budget, Spent
from .candidates import Candidate, materialize, nodes_of, seed_spec
from .evaluate import Evaluation, evaluate, paired_bootstrap
from .operators import Operator, OperatorContext, default_operators
from .result import OptimizeResult
from .tasks import TaskSet

__all__ = ["Budget", "OptimizeResult", "Optimizer", "Spent"]

Event = dict[str, Any]


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
    """The checkpoint database (default: ``$AWORLD_GRAPH_DB`` or ``checkpoints/aworld.db``)."""
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
    selection: Literal["best", "pareto"] = "best"
    """How a parent is chosen."""
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
        self.id = self.run_id or ""
        """The run id (set when :meth:`run` starts)."""
        self.cands: list[Candidate] = []
        """The pool and every other candidate, seed first (loaded from the database)."""
        self.steps: list[Step] = []
        """The iterations so far."""
        self.saver: TrajectorySaver
        self.store: MetaStore

    # -- plumbing -----------------------------------------------------------------------------
    def _emit(self, event: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event({"event": event, **data})

    def _get(self, cid: str | None) -> Candidate:
        return next(c for c in self.cands if c.id == cid)

    async def _eval(self, c: Candidate, split: str) -> Evaluation:
        if split in c.evals:
            return c.evals[split]
        info = {"candidate": c.id, "meta_run": self.id}
        swarm = materialize(
            c.spec, model=self.model, models=self.models, pool=self.pool, info=info
        )
        if self.run_conf is not None and self.run_conf.engine_name == "ray":
            remember(swarm, c.spec, model=self.model, models=self.models, pool=self.pool, info=info)
        ev = await evaluate(
            swarm,
            self.tasks.split(split),
            reward=self.tasks.reward,
            threshold=self.tasks.threshold,
            candidate=c.id,
            split=split,
            run_id=self.id,
            checkpointer=self.saver,
            concurrency=self.concurrency,
            run_conf=self.run_conf,
        )
        c.evals[split] = ev
        self.store.save_eval(self.id, ev)
        self._emit(
            "eval",
            candidate=c.id,
            split=split,
            mean=ev.mean,
            ci=ev.ci,
            n=ev.n,
            llm_calls=ev.llm_calls,
            tokens=ev.tokens,
            seconds=ev.seconds,
            spent=self.spent(),
        )
        return ev

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

    def _train(self, c: Candidate) -> float:
        score = c.score("train")
        return -math.inf if score is None else score

    def best(self) -> Candidate:
        """The candidate with the best dev score (training score where there is no dev split)."""
        split = "dev" if self.tasks.dev else "train"
        judged = [c for c in self.cands if split in c.evals and c.status in ("seed", "accepted")]
        return max(judged, key=lambda c: (c.evals[split].mean, self._train(c), -int(c.id[1:])))

    # -- one iteration ------------------------------------------------------------------------
    def _parents(self, iteration: int) -> list[Candidate]:
        pool = [c for c in self.cands if c.status in ("seed", "accepted") and "train" in c.evals]
        if self.selection == "best":
            return sorted(pool, key=lambda c: (-self._train(c), c.id))
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
        return order + sorted((c for c in pool if c not in order), key=lambda c: -self._train(c))

    async def _propose(self, iteration: int) -> Candidate | None:
        """The operator whose turn it is proposes a child (an operator with nothing left to
        try on the pool passes its turn to the next)."""
        first = (iteration - 1) % len(self._ops)
        for op, parent in (
            (self._ops[(first + k) % len(self._ops)], parent)
            for k in range(len(self._ops))
            for parent in self._parents(iteration)
        ):
            ctx = OperatorContext(
                run_id=self.id,
                iteration=iteration,
                parent=parent,
                candidates=self.cands,
                tasks=self.tasks,
                saver=self.saver,
                rng=random.Random(f"{self.seed}-{iteration}-{parent.id}"),
                steps=self.steps,
            )
            proposal = await op.propose(ctx)
            if proposal is None:
                continue
            if proposal.spec is None:
                self._record(
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
                id=f"c{len(self.cands):03d}",
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
            self.cands.append(cand)
            self.store.save_candidate(self.id, cand)
            self._record(
                Step(
                    iteration=iteration,
                    operator=op.name,
                    parent=parent.id,
                    candidate=cand.id,
                    outcome="pending",
                    cost=proposal.cost,
                )
            )
            self._emit(
                "candidate",
                iteration=iteration,
                candidate=cand.id,
                parent=parent.id,
                operator=cand.operator,
                change=cand.change,
            )
            return cand
        self._record(
            Step(
                iteration=iteration,
                operator=self._ops[first].name,
                outcome="skipped",
                note="no operator has anything left to try on the pool",
            )
        )
        return None

    def _record(self, step: Step) -> None:
        self.steps = [s for s in self.steps if s.iteration != step.iteration] + [step]
        self.steps.sort(key=lambda s: s.iteration)
        self.store.save_step(self.id, step)
        if step.outcome in ("skipped", "invalid"):
            self._emit(
                "skip",
                iteration=step.iteration,
                operator=step.operator,
                note=step.note,
                spent=self.spent(),
            )

    async def _judge(self, cand: Candidate) -> None:
        parent = self._get(cand.parent)
        step = next(s for s in self.steps if s.candidate == cand.id)
        try:
            ev = await self._eval(cand, "train")
        except AWorldGraphError as exc:
            cand.status, step.note = "invalid", str(exc).splitlines()[0]
        else:
            gain = ev.mean - self._train(parent)
            cand.status = "accepted" if gain > self.min_gain else "rejected"
            step.note = f"train {ev.mean:.3f} vs parent {self._train(parent):.3f}"
            if cand.status == "accepted":
                before = {n["name"]: n.get("version") for n in nodes_of(parent.spec)}
                for n in nodes_of(cand.spec):
                    if before.get(n["name"]) != n.get("version"):
                        n["score"] = round(ev.mean, 4)
                leaders = [c for c in self.cands if "dev" in c.evals or c.status == "seed"]
                if self.tasks.dev and ev.mean >= max(self._train(c) for c in leaders):
                    dev = await self._eval(cand, "dev")
                    step.note += f"; dev {dev.mean:.3f}"
        step.outcome = cand.status
        self.store.save_candidate(self.id, cand)
        self._record(step)
        self._emit(
            "decision",
            iteration=step.iteration,
            candidate=cand.id,
            status=cand.status,
            train=cand.score("train"),
            parent_train=self._train(parent),
            dev=cand.score("dev"),
            operator=cand.operator,
            change=cand.change,
            spent=self.spent(),
            best=self.best().id,
        )

    def _stop_reason(self) -> str | None:
        spent, b = self.spent(), self.budget
        if b.iterations is not None and spent.iterations >= b.iterations:
            return f"budget: {b.iterations} iterations done"
        best_train = max(self._train(c) for c in self.cands if c.status in ("seed", "accepted"))
        if self.target is not None and best_train >= self.target:
            return f"target reached: training score {best_train:.3f}"
        if self.steps and self.steps[-1].outcome == "skipped":
            return "nothing left to try: every operator is exhausted on the pool"
        n_train = max(1, len(self.tasks.train))
        dev_share, test_share = len(self.tasks.dev) / n_train, len(self.tasks.test) / n_train
        pool = [c for c in self.cands if c.status in ("seed", "accepted")]
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
                getattr(c.evals["train"], attr) for c in self.cands[-3:] if "train" in c.evals
            ]
            steps = [float(s.cost.get(attr, 0)) for s in self.steps]
            next_cost = max(recent) * (1 + dev_share) + (sum(steps) / len(steps) if steps else 0)
            dearest = max(getattr(c.evals["train"], attr) for c in pool)
            seed_cost = getattr(self.cands[0].evals["train"], attr)
            reserve = test_share * (seed_cost + dearest)
            if used + next_cost + reserve > limit:
                return (
                    f"budget: {name} ({used:g} used of {limit:g}; an iteration costs ~{next_cost:.0f}, "
                    f"the final test ~{reserve:.0f})"
                )
        return None

    # -- the run ------------------------------------------------------------------------------
    async def run(self) -> OptimizeResult:
        """Optimize (or continue an optimization with the same id) and return the result."""
        spec, origins = seed_spec(self.workflow)
        settings = {
            "operators": [op.name for op in self._ops],
            "selection": self.selection,
            "min_gain": self.min_gain,
            "seed": self.seed,
        }
        self.id = self.run_id or f"{re.sub(r'[^A-Za-z0-9_]+', '_', spec['name'])}-" + _hash(
            spec, self.tasks.fingerprint(), settings
        )
        self.saver = open_saver(self.db)
        # the saver claims (or checks) the file as a checkpoint store before our tables join it
        self.saver.get_tuple(
            {"configurable": {"thread_id": f"meta-{self.id}", "checkpoint_ns": ""}}
        )
        if self.saver.path is None:
            raise ConfigError(
                f"optimize keeps its search next to the runs in a SQLite file, and "
                f"{self.saver.label} is a PostgreSQL database: pass --db FILE.db"
            )
        self.store = MetaStore(self.saver.path)
        try:
            previous = self.store.run(self.id)
            self.store.save_run(
                self.id,
                workflow=str(self.workflow),
                tasks=self.tasks.name,
                settings={**settings, "budget": str(self.budget)},
                origins=origins,
                status="running",
            )
            self.cands = self.store.candidates(self.id)
            self.steps = self.store.steps(self.id)
            if not self.cands:
                self.cands = [
                    Candidate(id="c000", spec=spec, status="seed", change="the seed workflow")
                ]
                self.store.save_candidate(self.id, self.cands[0])
            self._emit(
                "start",
                run_id=self.id,
                resumed=previous is not None,
                candidates=len(self.cands),
                iterations=len(self.steps),
                train=len(self.tasks.train),
                dev=len(self.tasks.dev),
                test=len(self.tasks.test),
                budget=str(self.budget),
            )
            seed = self.cands[0]
            await self._eval(seed, "train")
            if self.tasks.dev:
                await self._eval(seed, "dev")
            while True:
                pending = next((c for c in self.cands if c.status == "pending"), None)
                if pending is not None:
                    if not any(s.candidate == pending.id for s in self.steps):
                        self._record(
                            Step(
                                iteration=pending.iteration,
                                operator=pending.operator,
                                parent=pending.parent,
                                candidate=pending.id,
                                outcome="pending",
                                cost=pending.cost,
                            )
                        )
                    await self._judge(pending)
                    continue
                reason = self._stop_reason()
                if reason is not None:
                    break
                cand = await self._propose(len(self.steps) + 1)
                if cand is not None:
                    await self._judge(cand)
            self._emit("stop", reason=reason, spent=self.spent())
            best = self.best()
            comparison = None
            if self.tasks.test:
                order = [t.id for t in self.tasks.test]
                before = await self._eval(seed, "test")
                after = await self._eval(best, "test")
                comparison = paired_bootstrap(before.values(order), after.values(order))
            self.store.save_run(self.id, status="done", best=best.id, stop_reason=reason)
            result = OptimizeResult(
                run_id=self.id,
                workflow=Path(self.workflow),
                tasks=self.tasks,
                candidates=list(self.cands),
                steps=list(self.steps),
                best=best,
                spent=self.spent(),
                budget=self.budget,
                stop_reason=reason,
                comparison=comparison,
                origins=origins,
            )
            self._emit("done", result=result)
            return result
        finally:
            self.store.close()
            self.saver.close()

