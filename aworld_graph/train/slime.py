"""slime: a custom generate function that runs the workflow for a sample.

slime (THUDM) calls ``await generate(args, sample, sampling_params)`` for each sample when
started with ``--custom-generate-function-path``; the function fills the sample's
``tokens`` (prompt then response ids), ``response_length``, ``loss_mask`` (one per response
token), ``rollout_log_probs``, ``response``, ``reward`` and ``status`` and returns it.
:func:`slime_generate` makes one that runs ``agent`` on ``sample.prompt`` through slime's
router (``http://{args.sglang_router_ip}:{args.sglang_router_port}/v1``, or ``base_url=``)
and fills those fields from the answering call's sequence
(:mod:`~aworld_graph.train.sequences`, ``per="turn"``: the tokens between an agent's calls
in one turn have mask 0).

A sample whose episode failed (no prompt, no label for the reward, a raising reward function,
a run that did not finish, calls without token ids) gets ``status`` ``ABORTED`` (slime's
``Sample.Status``, where the sample has it), no tokens of a response and ``metadata["error"]``;
it is never filled with text.

Each sample is an episode on a checkpoint thread of its own. slime numbers every training
sample of a run once (``sample.index``: one per sample of each group, counted on across
rollouts, and saved and restored with the data source's state at each rollout checkpoint),
so with ``run_id=`` the sample's thread is ``slime-<run_id>-<index>-<digest>`` (the digest
of its prompt and label, so a reused ``run_id`` with other data never reads another
episode back): slime restarted from its checkpoint gives the same samples the same indices,
their finished episodes are read back from the store and the unfinished ones resume, their
finished tool calls not run again. Evaluation samples (``evaluation=True``; slime numbers
them from 0 at every evaluation), samples without an index, and every sample when no
``run_id`` is given get a new thread.

slime is not on PyPI, so it is not a dependency: the sample is used through its attributes
only, and the tests check the fields with a plain stand-in (docs/training.md says so).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from ..agent import Agent
from .episodes import digest, run_episode, served_by
from .sequences import flatten

__all__ = ["slime_generate"]


def _status(sample: Any, name: str) -> Any:
    """``Sample.Status.<name>`` where the sample's class has it, else the lower-case name."""
    status = getattr(type(sample), "Status", None)
    return getattr(status, name) if status is not None and hasattr(status, name) else name.lower()


def slime_generate(
    *,
    agent: Agent,
    reward_func: Callable[..., Any],
    base_url: str | None = None,
    model: str = "default",
    run_id: str | None = None,
) -> Callable[..., Coroutine[Any, Any, Any]]:
    """slime's custom generate function for ``agent`` (see the module docstring).

    ``run_id``: names this training run, so that a restarted run resumes its samples'
    episodes from the store; give a new one for a new run."""

    async def generate(
        args: Any, sample: Any, sampling_params: Any = None, evaluation: bool = False
    ) -> Any:
        url = base_url or (
            f"http://{args.sglang_router_ip}:{args.sglang_router_port}/v1"
            if getattr(args, "sglang_router_ip", None)
            else None
        )
        if url is None:
            raise ValueError(
                "slime_generate needs base_url= or args.sglang_router_ip/sglang_router_port"
            )
        metadata = getattr(sample, "metadata", None)
        metadata = metadata if isinstance(metadata, dict) else {}
        row = {
            "prompt": getattr(sample, "prompt", None),
            "expected": getattr(sample, "label", None),
        }
        number = getattr(sample, "index", None)
        index = number if isinstance(number, int) else 0
        thread = None
        if run_id and isinstance(number, int) and not evaluation:
            thread = f"slime-{run_id}-{number}-{digest(row, 10)}"
        episode = await run_episode(
            row,
            index,
            agent=served_by(agent, url, model=model),
            reward_func=reward_func,
            thread_prefix="slime",
            thread_id=thread,
        )
        if episode.ok:
            assert episode.response is not None
            seq = flatten(episode.response, per="turn", reward=episode.reward)[-1]
            sample.tokens = seq.prompt_ids + seq.completion_ids
            sample.response_length = len(seq.completion_ids)
            sample.loss_mask = list(seq.mask)
            sample.rollout_log_probs = list(seq.logprobs)
            sample.response = episode.response.answer or ""
            sample.reward = episode.reward
            sample.status = _status(sample, "COMPLETED")
        else:
            sample.response_length = 0
            sample.loss_mask = []
            sample.rollout_log_probs = []
            sample.response = ""
            sample.reward = None
            sample.status = _status(sample, "ABORTED")
            metadata["error"] = episode.error
        if episode.thread_id is not None:
            metadata["aworld_thread"] = episode.thread_id
        sample.metadata = metadata
        return sample

    return generate
