"""When the search stops: the iteration budget, the target score, nothing left to try, or a
limit on calls, tokens or time that the next iteration and the final test might pass."""

from __future__ import annotations

from ._state import SearchState, train_score
from .budget import Budget

__all__ = ["stop_reason"]


def stop_reason(state: SearchState, budget: Budget, target: float | None) -> str | None:
    """Why the search should stop before another iteration, or ``None`` to go on."""
    spent, b, tasks = state.spent(), budget, state.tasks
    if b.iterations is not None and spent.iterations >= b.iterations:
        return f"budget: {b.iterations} iterations done"
    best_train = max(train_score(c) for c in state.cands if c.status in ("seed", "accepted"))
    if target is not None and best_train >= target:
        return f"target reached: training score {best_train:.3f}"
    if state.steps and state.steps[-1].outcome == "skipped":
        return "nothing left to try: every operator is exhausted on the pool"
    n_train = max(1, len(tasks.train))
    dev_share, test_share = len(tasks.dev) / n_train, len(tasks.test) / n_train
    pool = [c for c in state.cands if c.status in ("seed", "accepted")]
    for name, attr, limit, used in (
        ("calls", "llm_calls", b.llm_calls, spent.llm_calls),
        ("tokens", "tokens", b.tokens, spent.tokens),
        ("time", "seconds", b.seconds, spent.seconds),
    ):
        if limit is None:
            continue
        # conservative estimates: the dearest recent training run, a dev check, the
        # optimizer agent's share; and the final test runs of the seed and the dearest best
        recent = [getattr(c.evals["train"], attr) for c in state.cands[-3:] if "train" in c.evals]
        steps = [float(s.cost.get(attr, 0)) for s in state.steps]
        next_cost = max(recent) * (1 + dev_share) + (sum(steps) / len(steps) if steps else 0)
        dearest = max(getattr(c.evals["train"], attr) for c in pool)
        seed_cost = getattr(state.cands[0].evals["train"], attr)
        reserve = test_share * (seed_cost + dearest)
        if used + next_cost + reserve > limit:
            return (
                f"budget: {name} ({used:g} used of {limit:g}; an iteration costs ~{next_cost:.0f}, "
                f"the final test ~{reserve:.0f})"
            )
    return None
