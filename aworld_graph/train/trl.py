"""TRL: a ``rollout_func`` for ``GRPOTrainer`` that runs the workflow on each prompt.

>>> trainer = GRPOTrainer(model=..., reward_funcs=[trl_reward(numeric)],       # doctest: +SKIP
...                       rollout_func=rollout_func(agent=solver), ...)

TRL calls ``rollout_func(prompts, trainer)`` with this process's prompts (each already
repeated ``num_generations`` times by TRL's sampler) and wants, per prompt, the
``prompt_ids``, the sampled ``completion_ids`` and their ``logprobs``. Each prompt is one
episode (:func:`~aworld_graph.train.episodes.run_episode`); its answering LLM call's sequence
(:mod:`~aworld_graph.train.sequences`, ``per="turn"``) gives the ids, exactly as the model
sampled them, and ``env_mask`` (TRL's tool mask: 1 on the tokens the model sampled). The
extra fields ``answer``, ``aworld_reward`` and ``aworld_error`` reach the reward functions.

A prompt whose episode failed (a bad row, a run that did not finish, a call without token
ids) gets a one-token completion with mask 0, ``aworld_reward`` ``None`` (TRL leaves an
unscorable completion out of the group baseline and gives it no advantage) and its reason in
``aworld_error``; nothing of it is trained on.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..agent import Agent
from ..rewards import score_response
from .episodes import Episode, prompt_text, run_episode
from .sequences import one_tokenizer

__all__ = ["rollout_func", "trl_reward"]

RolloutFunc = Callable[[list[Any], Any], dict[str, list[Any]]]


def rollout_func(
    *,
    agent: Agent | None = None,
    swarm: Any = None,
    tokenizer: str | None = None,
    run_id: str | None = None,
) -> RolloutFunc:
    """A TRL ``rollout_func`` running ``agent`` (or ``swarm``) on each prompt.

    ``tokenizer``: the name the sampled ids must carry (``gguf:<file>`` for the embedded
    model, the served model's name for vLLM); ids of another are refused
    (:class:`~aworld_graph.train.sequences.TokenizerMismatch`).

    ``run_id``: names this training run; the episode of prompt ``i`` is then thread
    ``trl-<run_id>-p<process>-<train|eval>-s<step>-g<k>-<i>``: the process's index among
    the trainer's processes (each hands over its own prompts), whether the model is training
    or evaluated, ``trainer.state.global_step``, and the how-manieth call at that step and
    mode in this process (TRL may generate several times within a step). A trainer resumed
    from its checkpoint at step ``s`` makes the same calls again, so it reads that step's
    finished episodes back from the store and resumes the unfinished ones (their finished
    tool calls are not run again). Without it every episode is new."""
    calls: Counter[tuple[int, str]] = Counter()

    def run(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
        process = int(getattr(getattr(trainer, "accelerator", None), "process_index", 0) or 0)
        mode = "train" if getattr(getattr(trainer, "model", None), "training", True) else "eval"
        made = calls[(step, mode)]
        calls[(step, mode)] += 1
        name = f"trl-{run_id}-p{process}-{mode}-s{step}-g{made}"
        threads = [f"{name}-{i}" for i in range(len(prompts))] if run_id else [None] * len(prompts)
        episodes = asyncio.run(_episodes(prompts, agent, swarm, threads))
        one_tokenizer((e.last for e in episodes if e.ok), tokenizer)
        out: dict[str, list[Any]] = {
            k: []
            for k in (
                "prompt_ids",
                "completion_ids",
                "logprobs",
                "env_mask",
                "answer",
                "aworld_reward",
                "aworld_error",
            )
        }
        for i, episode in enumerate(episodes):
            if episode.ok:
                seq = episode.last
                out["prompt_ids"].append(seq.prompt_ids)
                out["completion_ids"].append(seq.completion_ids)
                out["logprobs"].append(seq.logprobs)
                out["env_mask"].append(seq.mask)
            else:  # masked out: TRL needs a completion per prompt, none of it is trained on
                ids = _prompt_ids(trainer, prompts[i], i)
                out["prompt_ids"].append(ids)
                out["completion_ids"].append([_eos(trainer)])
                out["logprobs"].append([0.0])
                out["env_mask"].append([0])
            answer = episode.response.answer if episode.response is not None else None
            out["answer"].append(answer)
            out["aworld_reward"].append(episode.reward if episode.ok else None)
            out["aworld_error"].append(episode.error)
        return out

    return run


async def _episodes(
    prompts: Sequence[Any], agent: Agent | None, swarm: Any, threads: Sequence[str | None]
) -> list[Episode]:
    return [
        await run_episode(
            {"prompt": p}, i, agent=agent, swarm=swarm, thread_prefix="trl", thread_id=thread
        )
        for i, (p, thread) in enumerate(zip(prompts, threads, strict=True))
    ]


def _prompt_ids(trainer: Any, prompt: Any, index: int) -> list[int]:
    """A failed episode's prompt, as the trainer's tokenizer reads it (it is never trained)."""
    try:
        text = prompt_text({"prompt": prompt}, index)
    except ValueError:
        text = str(prompt)
    return list(trainer.processing_class(text)["input_ids"]) or [_eos(trainer)]


def _eos(trainer: Any) -> int:
    return int(trainer.processing_class.eos_token_id or 0)


def trl_reward(
    fn: Callable[..., Any],
    *,
    field: str = "expected",
    on_error: Callable[[str], None] | None = None,
) -> Callable[..., list[float | None]]:
    """A TRL reward function from a plain ``fn(answer, expected)``: it scores the workflow's
    ``answer`` (from :func:`rollout_func`) against the dataset column ``field``. A failed
    episode, a row without ``field`` and a row where ``fn`` raises get ``None`` (unscorable:
    TRL gives it no advantage); the last two are told to ``on_error``, naming the row."""

    def failed(why: str) -> None:
        if on_error is not None:
            on_error(why)

    def reward(completions: list[Any], **kwargs: Any) -> list[float | None]:
        answers = kwargs.get("answer") or [None] * len(completions)
        errors = kwargs.get("aworld_error") or [None] * len(completions)
        expected = kwargs.get(field)
        if expected is None:
            raise ValueError(
                f"the dataset has no column {field!r} for the reward function; add it or pass "
                "trl_reward(fn, field=...)"
            )
        out: list[float | None] = []
        for i, (answer, want, error) in enumerate(zip(answers, expected, errors, strict=True)):
            if error is not None:
                out.append(None)
            elif want is None:
                failed(f"row {i} of the batch has no {field!r} for the reward function; add it")
                out.append(None)
            else:
                try:
                    out.append(score_response(answer, want, fn).score)
                except Exception as exc:  # a user's function failing on a row fails it alone
                    failed(
                        f"row {i} of the batch: the reward function "
                        f"{getattr(fn, '__name__', fn)} raised {type(exc).__name__}: {exc} "
                        f"(field {field!r} = {want!r})"
                    )
                    out.append(None)
        return out

    reward.__name__ = f"aworld_{getattr(fn, '__name__', 'reward')}"
    return reward
