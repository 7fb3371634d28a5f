"""One iteration of the search: choose parents, let the operator whose turn it is propose a
child, and judge the child (accepted if it beats its parent on training; confirmed on dev when
it leads the pool)."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import AWorldGraphError
from ._demos import demo_inputs
from ._evaluation import Evaluator
from ._state import SearchState, train_score
from ._store import Step
from .candidates import Candidate, Evaluation, nodes_of
from .evaluate import paired_bootstrap
from .operators import Operator, OperatorContext

__all__ = ["COSTLY_EDITS", "Iterations"]

COSTLY_EDITS = ("self_consistency",)
"""Edits that multiply a node's calls: kept only on paired evidence that they pay."""


@dataclass(kw_only=True)
class Iterations:
    """Proposes and judges children (the settings are the :class:`~.search.Optimizer`'s)."""

    state: SearchState
    evaluate: Evaluator
    ops: Sequence[Operator]
    selection: Literal["best", "pareto"]
    min_gain: float
    seed: int
    search: Literal["guided", "random"] = "guided"

    def parents(self, iteration: int) -> list[Candidate]:
        """The pool in the order parents are tried: by training score (``best``), or sampled
        by how many training tasks each is best on (``pareto``, as in GEPA)."""
        pool = [
            c for c in self.state.cands if c.status in ("seed", "accepted") and "train" in c.evals
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

    async def propose(self, iteration: int) -> Candidate | None:
        """The operator whose turn it is proposes a child (an operator with nothing left to
        try on the pool passes its turn to the next)."""
        state, ops = self.state, self.ops
        first = (iteration - 1) % len(ops)
        turns = [ops[(first + k) % len(ops)] for k in range(len(ops))]
        parents = self.parents(iteration)
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
            if proposal.spec is None:
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

    def verdict(self, cand: Candidate, parent: Candidate, ev: Evaluation) -> tuple[str, str]:
        """Accepted or rejected, and why: the child's gain over its parent on the training tasks
        that are not among the child's demonstrations (a demonstration's own task would measure
        copying, not learning); an edit that multiplies the calls (:data:`COSTLY_EDITS`) must
        also beat its parent in 95 % of paired bootstrap resamples (the evidence that it pays)."""
        before = parent.evals["train"]
        asked = demo_inputs(cand.spec)
        kept = [
            t.id
            for t in self.state.tasks.train
            if t.input not in asked and t.id in ev.scores and t.id in before.scores
        ]
        note = f"train {ev.mean:.3f} vs parent {train_score(parent):.3f}"
        if not kept:
            return "rejected", note + "; no training task left to measure on"
        gain = statistics.fmean(ev.scores[t] - before.scores[t] for t in kept)
        if len(kept) < len(before.scores):
            note += f" ({gain:+.3f} on the {len(kept)} tasks that are not demonstrations)"
        if gain <= self.min_gain:
            return "rejected", note
        if cand.operator in COSTLY_EDITS:
            test = paired_bootstrap(before.values(kept), ev.values(kept))
            note += f"; {ev.llm_calls / max(1, before.llm_calls):.1f}x the calls, P(better) {test.p_better:.2f}"
            if test.p_better < 0.95:
                return "rejected", note
        return "accepted", note

    async def judge(self, cand: Candidate) -> None:
        """Evaluate ``cand`` on training and accept or reject it (an accepted child that leads
        the pool on training is also evaluated on dev)."""
        state = self.state
        parent = state.get(cand.parent)
        step = next(s for s in state.steps if s.candidate == cand.id)
        try:
            ev = await self.evaluate(cand, "train")
        except AWorldGraphError as exc:
            cand.status, step.note = "invalid", str(exc).splitlines()[0]
        else:
            cand.status, step.note = self.verdict(cand, parent, ev)
            if cand.status == "accepted":
                before = {n["name"]: n.get("version") for n in nodes_of(parent.spec)}
                for n in nodes_of(cand.spec):
                    if before.get(n["name"]) != n.get("version"):
                        n["score"] = round(ev.mean, 4)
                leaders = [c for c in state.cands if "dev" in c.evals or c.status == "seed"]
                if state.tasks.dev and ev.mean >= max(train_score(c) for c in leaders):
                    dev = await self.evaluate(cand, "dev")
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
