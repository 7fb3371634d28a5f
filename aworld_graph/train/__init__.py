"""Training on what the model really sampled: token-level sequences and trainer adapters.

* :mod:`.sequences` – the one flattening of a run into training sequences (ids, loss mask,
  logprobs, rewards) from the ``tokens`` of its LLM calls (``AgentConfig(record_tokens=True)``);
* :mod:`.episodes` – a dataset row as one scored episode (bad rows counted, never fatal);
* adapters: :mod:`.trl` (``GRPOTrainer(rollout_func=...)``), :mod:`.areal` (a workflow with
  ``async run(data, **kwargs)``), :mod:`.slime` (a custom generate function), :mod:`.verl`
  (an ``AgentLoopBase`` subclass), :mod:`.swift` (a ``MultiTurnScheduler``), and
  :class:`AgentTrainer`, which picks one.

Nothing here imports a trainer until an adapter is used (each is an extra: ``train-trl``…).
"""

from __future__ import annotations

from .episodes import Episode, RowError, run_episode
from .sequences import TokenizerMismatch, TrainingSequence, UntrainableRun, flatten, flatten_runs
from .trainer import AgentTrainer, TrainerNotInstalled

__all__ = [
    "AgentTrainer",
    "Episode",
    "RowError",
    "TokenizerMismatch",
    "TrainerNotInstalled",
    "TrainingSequence",
    "UntrainableRun",
    "flatten",
    "flatten_runs",
    "run_episode",
]
