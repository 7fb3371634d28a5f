"""Running a dataset row as one training episode: the row's prompt through the agent or swarm,
the reward function on the answer, the run flattened to token sequences.

Every adapter (:mod:`.trl`, :mod:`.areal`, :mod:`.slime`, :class:`.AgentTrainer`) goes
through :func:`run_episode`. A row without the field the workflow needs, or a reward
function that raises, gives an :class:`Episode` with ``error`` naming the row and the
field: the batch goes on and the row counts as failed. A run that did not finish gives
no sequences (:mod:`.sequences`): it is never replaced by text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import openai

from ..agent import Agent
from ..config import AgentConfig
from ..model import OpenAIModel
from ..rewards import score_response
from ..runner import Runners
from ..task import TaskResponse
from .sequences import TrainingSequence, UntrainableRun, flatten

__all__ = [
    "Episode",
    "RowError",
    "digest",
    "prompt_text",
    "recording",
    "run_episode",
    "served_by",
]

ANSWER_FIELDS = ("expected", "answer", "ground_truth", "solution")
"""Where a row's expected answer may be (the first present wins)."""


class RowError(ValueError):
    """A dataset row the workflow cannot run or score (names the row and the field)."""


@dataclass(kw_only=True)
class Episode:
    """One row's run: its reward and token sequences, or why it failed."""

    index: int
    """The row's position in its batch."""
    response: TaskResponse | None = None
    reward: float = 0.0
    sequences: list[TrainingSequence] = field(default_factory=list)
    """The run's sequences (one per LLM call); empty when it failed."""
    error: str | None = None
    """Why the row gives no training data (a bad row, a raising reward function, a run that
    did not finish, a call without token ids); ``None`` when it does."""

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.sequences)

    @property
    def thread_id(self) -> str | None:
        """The run's checkpoint thread; ``None`` for a row that never ran."""
        return self.response.thread_id if self.response is not None else None

    @property
    def last(self) -> TrainingSequence:
        """The sequence of the call that produced the answer."""
        return self.sequences[-1]


def digest(task: Any, size: int) -> str:
    """The first ``size`` hex digits of the SHA-256 of ``task`` as JSON (keys sorted): what
    keeps a training run's thread names apart for episodes of different data."""
    return hashlib.sha256(json.dumps(task, sort_keys=True, default=str).encode()).hexdigest()[:size]


def prompt_text(row: Any, index: int) -> str:
    """The task input of a dataset row: ``prompt`` (text, or chat messages whose last user
    message is taken), else ``input`` or ``question``."""
    if isinstance(row, str):
        return row
    if not isinstance(row, Mapping):
        raise RowError(f"row {index} is a {type(row).__name__}; give a dict with a 'prompt'")
    for key in ("prompt", "input", "question"):
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list):
            users = [m for m in value if isinstance(m, Mapping) and m.get("role") == "user"]
            if users and isinstance(users[-1].get("content"), str):
                return str(users[-1]["content"])
            raise RowError(
                f"row {index}: field {key!r} holds no user message with text content; give "
                "[{'role': 'user', 'content': '...'}] or a string"
            )
    raise RowError(
        f"row {index} has no 'prompt' field (nor 'input' or 'question'); its fields are "
        f"{sorted(row)}; add the task's text as 'prompt'"
    )


def served_by(
    agent: Agent,
    base_url: str,
    *,
    model: str = "default",
    api_key: str | None = None,
    http_client: Any = None,
    record_tokens: bool = True,
) -> Agent:
    """``agent`` (a copy) reaching its model at ``base_url``, recording tokens (unless
    ``record_tokens=False``: AReaL's proxy keeps them itself and returns none): how a
    trainer's inference endpoint (AReaL's proxy, slime's router) becomes the policy."""
    client = None
    if http_client is not None:
        client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "not-needed", http_client=http_client
        )
    conf = agent.conf or AgentConfig()
    chat = OpenAIModel(
        model=model,
        base_url=base_url,
        api_key=api_key,
        temperature=conf.llm_temperature,
        params=conf.params,
        client=client,
    )
    return dataclasses.replace(
        agent, model=chat, conf=dataclasses.replace(conf, record_tokens=record_tokens)
    )


def recording(agent: Agent) -> Agent:
    """``agent`` with ``AgentConfig(record_tokens=True)`` (a copy; the original is left as is)."""
    conf = agent.conf or AgentConfig()
    if conf.record_tokens:
        return agent
    return dataclasses.replace(agent, conf=dataclasses.replace(conf, record_tokens=True))


async def run_episode(
    row: Any,
    index: int,
    *,
    agent: Agent | None = None,
    swarm: Any = None,
    reward_func: Callable[..., Any] | None = None,
    thread_prefix: str = "train",
    thread_id: str | None = None,
    sequences: bool = True,
) -> Episode:
    """Run one row and score it (see the module docstring).

    ``thread_id``: the run's checkpoint thread. Given the same one again (a trainer restarted
    on the same batch), a finished run is read back from the store and an unfinished one
    resumes from its last checkpoint, its finished tool calls not run again; a thread that
    holds another task's run fails the row (that run is never taken for this row's). By
    default each episode gets a new thread, ``<thread_prefix>-<index>-<uuid4>`` (the whole
    uuid: a store that keeps a long training run's episodes never gives two of them one
    thread).

    ``sequences=False``: the trainer keeps the sampled tokens itself (AReaL's proxy, which
    returns none to the agent): the agent is run as given, nothing is flattened, and a run
    that did not finish fails the row all the same."""
    episode = Episode(index=index)
    try:
        text = prompt_text(row, index)
    except RowError as exc:
        episode.error = str(exc)
        return episode
    expected = None
    if isinstance(row, Mapping):
        expected = next((row[k] for k in ANSWER_FIELDS if k in row), None)
    if reward_func is not None and expected is None:
        episode.error = (
            f"row {index} has no expected answer for the reward function: none of the fields "
            f"{list(ANSWER_FIELDS)}; add 'expected'"
        )
        return episode
    thread = thread_id or f"{thread_prefix}-{index}-{uuid.uuid4().hex}"
    response = await Runners.run(
        text, recording(agent) if agent is not None and sequences else agent, swarm, task_id=thread
    )
    stored = response.state.get("input")
    if isinstance(stored, str) and stored != text:  # a thread named twice: never its run
        episode.error = (
            f"row {index}: thread {thread!r} holds another episode (its task is "
            f"{stored[:60]!r}, this row's {text[:60]!r}); give each training run its own run_id"
        )
        return episode
    episode.response = response
    if not sequences and response.status != "finished":  # nothing to score: say why first
        episode.error = (
            f"row {index}: run {thread} ended with status {response.status!r}, not "
            "'finished': errored, timed-out and cancelled runs are not training data"
        )
        return episode
    if reward_func is not None:
        try:
            episode.reward = score_response(response, expected, reward_func).score
        except Exception as exc:  # a user's reward function: any failure fails this row only
            episode.error = (
                f"row {index}: the reward function {getattr(reward_func, '__name__', reward_func)}"
                f" raised {type(exc).__name__}: {exc} (field 'expected' = {expected!r})"
            )
            return episode
    if not sequences:  # the trainer keeps the tokens (AReaL's proxy)
        return episode
    try:
        episode.sequences = flatten(response, reward=episode.reward)
    except UntrainableRun as exc:
        episode.error = f"row {index}: {exc}"
    return episode
