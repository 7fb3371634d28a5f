"""How the search evaluates a candidate on a split: once (a candidate keeps its evaluations,
also across a resume), saved as soon as it ends, with an ``eval`` event."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..config import RunConfig
from ..engine import remember
from ..model import ChatModel
from ._state import SearchState
from .candidates import Candidate, materialize
from .evaluate import Evaluation, evaluate

__all__ = ["Evaluator"]


@dataclass(kw_only=True)
class Evaluator:
    """Runs candidates of one search on its task set (the models and where the runs go are
    the :class:`~.search.Optimizer`'s fields of the same names)."""

    state: SearchState
    model: ChatModel | None
    models: Mapping[str, ChatModel]
    pool: Mapping[str, ChatModel]
    concurrency: int
    run_conf: RunConfig | None
    retry_errors: bool = False

    async def __call__(self, c: Candidate, split: str) -> Evaluation:
        """``c`` on ``split``: its stored evaluation, or a new one (saved, with an event)."""
        if split in c.evals:
            return c.evals[split]
        state = self.state
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
