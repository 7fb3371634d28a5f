"""One flattening of a run into training sequences: the tokens the model really sampled.

The rule (docs/training.md, *From a run to training sequences*):

* **Which runs.** Only a run that finished with an answer (``status == "finished"``) gives
  sequences. An errored, timed-out, cancelled, interrupted or step-limited run gives none:
  :func:`flatten` raises :class:`UntrainableRun` naming its status, and
  :func:`flatten_runs` counts it as excluded. Nothing is ever put in its place as text.
* **Which calls.** Every ``llm`` trace record of the run (a delegated or nested sub-run's
  included, each under its own agent), in trace order. Each needs its ``tokens`` entry
  (``AgentConfig(record_tokens=True)``); a call without token ids excludes the run – its
  text is never re-tokenized. A prompt stored by reference to the call before
  (:func:`aworld_graph.records.expand_prompt_ids`) is read back whole.
* **One sequence per LLM call** (``per="call"``, the default): the call's prompt ids, then
  its completion ids with ``mask`` 1 on the tokens the model sampled (the embedded model's
  own mask: 0 on argument openings its handler wrote) and their logprobs.
  ``per="turn"`` joins the calls of one agent turn into one sequence where each call's
  prompt continues the sequence so far token for token; the tokens between (tool results,
  other agents' messages, the chat template's turn markers) get mask 0 and logprob 0. A
  call whose prompt does not continue it (a changed system prompt, a template that renders
  the history differently) starts a new sequence.
* **Rewards.** Each sequence gets the run's episode reward (its last ``level="episode"``
  reward, or ``reward=`` given to :func:`flatten`) plus, as ``step_reward``, the step
  rewards (a critic's, :meth:`Runners.reward`'s) of the sequence: a step reward goes to the
  sequence holding the latest LLM call made at or before its ``step`` (the call that led to
  it).
* **One tokenizer.** All sequences of one batch come from one tokenizer: ids of two are
  never mixed (:class:`TokenizerMismatch` names both).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import AWorldGraphError
from ..records import expand_prompt_ids
from ..rewards import episode_reward

__all__ = [
    "TokenizerMismatch",
    "TrainingSequence",
    "UntrainableRun",
    "flatten",
    "flatten_runs",
    "one_tokenizer",
]


class UntrainableRun(AWorldGraphError):
    """A run that gives no training data: it did not finish, or a call has no token ids."""


class TokenizerMismatch(AWorldGraphError):
    """Token ids of two tokenizers would be mixed in one sequence or batch."""


@dataclass(kw_only=True)
class TrainingSequence:
    """One training sequence: ids, loss mask, logprobs and reward."""

    thread_id: str
    """The run it came from."""
    agent: str
    """The agent whose calls it holds."""
    turn: str | None = None
    """The agent turn (``<agent>#<n>``)."""
    steps: list[int] = field(default_factory=list)
    """The supersteps of its LLM calls."""
    prompt_ids: list[int] = field(default_factory=list)
    """The first call's prompt."""
    completion_ids: list[int] = field(default_factory=list)
    """Everything after the prompt: sampled tokens and, for ``per="turn"``, what came between."""
    mask: list[int] = field(default_factory=list)
    """Per completion token: 1 where this agent's model sampled it, else 0."""
    logprobs: list[float] = field(default_factory=list)
    """Per completion token: the sampled token's logprob (0.0 where ``mask`` is 0 and the
    token was not generated)."""
    reward: float = 0.0
    """The episode reward."""
    step_reward: float = 0.0
    """The step rewards assigned to it by the rule above."""
    tokenizer: str = ""
    """The tokenizer (model) the ids belong to."""

    @property
    def ids(self) -> list[int]:
        """``prompt_ids + completion_ids``."""
        return self.prompt_ids + self.completion_ids


def one_tokenizer(sequences: Iterable[TrainingSequence], expected: str | None = None) -> str:
    """The tokenizer all ``sequences`` share (and ``expected``, if given); else
    :class:`TokenizerMismatch` naming both."""
    seen = expected
    for seq in sequences:
        if seen is None:
            seen = seq.tokenizer
        elif seq.tokenizer != seen:
            raise TokenizerMismatch(
                f"token ids of tokenizer {seq.tokenizer!r} (run {seq.thread_id}, agent "
                f"{seq.agent}) cannot be mixed with ids of {seen!r}; train on runs of one model "
                "(or map them to one tokenizer yourself, outside this library)"
            )
    return seen or ""


def _state_of(run: Any) -> tuple[str, str, Mapping[str, Any]]:
    """(thread id, status, state) of a ``TaskResponse`` or a run's state dict."""
    state = getattr(run, "state", None)
    if isinstance(state, Mapping):
        return str(getattr(run, "thread_id", "") or ""), str(getattr(run, "status", "")), state
    if isinstance(run, Mapping):
        return str(run.get("thread_id", "")), str(run.get("status", "")), run
    raise TypeError(f"flatten takes a TaskResponse or a run's state dict, not {type(run).__name__}")


def flatten(
    run: Any, *, per: Literal["call", "turn"] = "call", reward: float | None = None
) -> list[TrainingSequence]:
    """The training sequences of one run (a ``TaskResponse`` or its state), by the rule in the
    module docstring; :class:`UntrainableRun` says why a run gives none."""
    if per not in ("call", "turn"):
        raise ValueError(f"per={per!r}: use 'call' or 'turn'")
    thread_id, status, state = _state_of(run)
    if status != "finished":
        raise UntrainableRun(
            f"run {thread_id or '?'} ended with status {status or 'unknown'!r}, not 'finished': "
            "errored, timed-out and cancelled runs are not training data"
        )
    if reward is None:
        item = episode_reward(list(state.get("rewards") or []))
        if item is None:
            raise UntrainableRun(
                f"run {thread_id or '?'} has no episode reward; score it first "
                "(Runners.rollout(..., reward_fn=...) or rewards.store_score) or pass reward="
            )
        reward = float(item.get("score", 0.0))
    try:  # prompts stored by reference to the call before (records.compact_prompt_ids)
        trace = expand_prompt_ids(state.get("trace") or [])
    except ValueError as exc:
        raise UntrainableRun(f"run {thread_id or '?'}: {exc}") from None
    calls = [r for r in trace if r.get("kind") == "llm"]
    if not calls:
        raise UntrainableRun(f"run {thread_id or '?'} made no LLM call")
    out: list[TrainingSequence] = []
    last: dict[str, TrainingSequence] = {}
    for n, record in enumerate(calls):
        tokens = record.get("tokens")
        agent = str(record.get("agent", ""))
        if not isinstance(tokens, Mapping) or "completion_ids" not in tokens:
            why = (tokens or {}).get("reason") if isinstance(tokens, Mapping) else None
            raise UntrainableRun(
                f"run {thread_id or '?'}: LLM call {n} of agent {agent} has no token ids"
                + (f" ({why})" if why else "; run the agent with AgentConfig(record_tokens=True)")
            )
        ids = [int(t) for t in tokens["completion_ids"]]
        mask = [int(m) for m in tokens.get("mask") or [1] * len(ids)]
        logprobs = [float(x) for x in tokens.get("logprobs") or []]
        prompt = [int(t) for t in tokens.get("prompt_ids") or []]
        tokenizer = str(tokens.get("tokenizer", ""))
        turn = record.get("turn")
        step = int(record.get("step", 0) or 0)
        prev = last.get(agent)
        if (
            per == "turn"
            and prev is not None
            and prev.turn == turn
            and prev.tokenizer == tokenizer
            and prompt[: len(prev.ids)] == prev.ids
        ):
            between = prompt[len(prev.ids) :]
            prev.completion_ids += between + ids
            prev.mask += [0] * len(between) + mask
            prev.logprobs += [0.0] * len(between) + logprobs
            prev.steps.append(step)
            continue
        if prev is not None and prev.tokenizer != tokenizer:
            one_tokenizer([prev], tokenizer)
        seq = TrainingSequence(
            thread_id=thread_id,
            agent=agent,
            turn=turn,
            steps=[step],
            prompt_ids=prompt,
            completion_ids=ids,
            mask=mask,
            logprobs=logprobs,
            reward=reward,
            tokenizer=tokenizer,
        )
        out.append(seq)
        last[agent] = seq
    _assign_step_rewards(out, state.get("rewards") or [])
    return out


def _assign_step_rewards(seqs: Sequence[TrainingSequence], rewards: Iterable[Any]) -> None:
    """Add each step reward to the sequence of the latest call at or before its step."""
    for item in rewards:
        if not isinstance(item, Mapping) or item.get("level") == "episode":
            continue
        step = item.get("step")
        if not isinstance(step, int):
            continue
        calls = [(s, seq) for seq in seqs for s in seq.steps if s <= step]
        if calls:
            owner = max(calls, key=lambda c: c[0])[1]
            owner.step_reward += float(item.get("score", 0.0) or 0.0)


def flatten_runs(
    runs: Iterable[Any], *, per: Literal["call", "turn"] = "call"
) -> tuple[list[TrainingSequence], dict[str, str]]:
    """The sequences of many runs, and the runs left out (thread id → why); the sequences all
    share one tokenizer (:class:`TokenizerMismatch` otherwise)."""
    kept: list[TrainingSequence] = []
    excluded: dict[str, str] = {}
    for i, run in enumerate(runs):
        try:
            kept += flatten(run, per=per)
        except UntrainableRun as exc:
            thread_id, _, _ = _state_of(run)
            excluded[thread_id or f"#{i}"] = str(exc)
    one_tokenizer(kept)
    return kept, excluded
