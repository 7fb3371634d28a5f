"""Meta-learning: the system rewrites its own graphs and keeps what wins on a task set.

>>> from aworld_graph.meta import Budget, optimize, shipped
>>> result = await optimize("workflows/math.yaml", shipped("arithmetic"),
...                         budget=Budget.parse("calls=400"), out=".")      # doctest: +SKIP
>>> result.best.id, result.comparison                                       # doctest: +SKIP

* :mod:`.tasks` – task sets (JSONL ``input`` / ``expected`` + reward; train/dev/test splits),
  the shipped ones (:func:`shipped`) and a ``reasoning-gym`` loader; :mod:`.generate` makes them;
* :mod:`.evaluate` – run a workflow version over a split: checkpointed, tagged runs, mean reward
  with a bootstrap interval, cost; paired bootstrap comparisons;
* :mod:`.operators` – instruction rewrite by an optimizer agent, instructions from role patterns
  (no model needed), demonstrations mined from the database (with their tool calls), topology
  and sampling edits (critics, self-consistency, temperature, max tokens; :mod:`.checks` holds
  the graph parts they insert);
* :mod:`.search` – the pool, selection on train, confirmation on dev, report on test, budgets,
  state in the database (resumable); random search over the same operators as a baseline;
* :mod:`.report` – new card versions, the best workflow, a table and plots (score per
  iteration; best score against rollouts, one search against another);
* :mod:`.synthetic` – a fake-model world with known optimum, for testing optimizers.
"""

from __future__ import annotations

from .candidates import Candidate, materialize
from .evaluate import Comparison, Evaluation, bootstrap_ci, evaluate, paired_bootstrap
from .operators import (
    EditTopology,
    MineDemos,
    Operator,
    OperatorContext,
    PatternPrompt,
    Proposal,
    RewritePrompt,
    default_operators,
    strong_optimizer,
)
from .report import rollout_curve, write_comparison, write_outputs
from .search import Budget, Optimizer, OptimizeResult, Spent, optimize, optimize_sync
from .tasks import TaskItem, TaskSet, load_tasks, reasoning_gym_tasks, save_tasks, shipped

__all__ = [
    "Budget",
    "Candidate",
    "Comparison",
    "EditTopology",
    "Evaluation",
    "MineDemos",
    "Operator",
    "OperatorContext",
    "OptimizeResult",
    "Optimizer",
    "PatternPrompt",
    "Proposal",
    "RewritePrompt",
    "Spent",
    "TaskItem",
    "TaskSet",
    "bootstrap_ci",
    "default_operators",
    "evaluate",
    "load_tasks",
    "materialize",
    "optimize",
    "optimize_sync",
    "paired_bootstrap",
    "reasoning_gym_tasks",
    "rollout_curve",
    "save_tasks",
    "shipped",
    "strong_optimizer",
    "write_comparison",
    "write_outputs",
]
