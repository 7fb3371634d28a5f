"""Reward functions: plain callables that score a run's final answer against a ground truth.

A reward function is any callable ``fn(answer, expected) -> score`` where ``answer`` is the
run's final answer (``None`` when it gave none) and ``score`` is a float, a bool, or a
``(score, feedback)`` pair. A function that also takes a ``response`` parameter gets the
whole :class:`~aworld_graph.task.TaskResponse`. The built-ins:

>>> exact("Paris.", "paris"), contains("It is Paris.", "paris")
(1.0, 1.0)
>>> numeric("about 3.1416", 3.14159, tolerance=1e-3), regex("id: A-17", r"A-\\d+")
(1.0, 1.0)

Per-step rewards come from critics (``Critic``) and :meth:`Runners.reward`; the episode
reward of a finished run is computed by :func:`score_response` and stored with
:func:`store_score`, which appends an ``episode`` item to the run's ``rewards`` channel
through the graph's update path, so it lands in the checkpoint database (the
``trajectory`` table's ``reward`` column) and in ``TaskResponse.trajectory``
(``reward.score``, ``reward.status``) of the last step.
"""

from __future__ import annotations

import inspect
import math
import re
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver

from .errors import DefinitionError
from .records import Reward, TraceRecord
from .task import Task, TaskResponse

__all__ = [
    "RewardFn",
    "Score",
    "as_trl_reward",
    "as_verl_score",
    "contains",
    "episode_reward",
    "exact",
    "numeric",
    "regex",
    "score_response",
    "store_score",
]

RewardFn = Callable[..., Any]
"""``fn(answer, expected[, response=...]) -> float | bool | (float, feedback)``."""

SOURCE = "reward_fn"
"""``source`` of episode reward items written by :func:`store_score`."""

_NUMBER = re.compile(r"[-+]?(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def _normalize(text: Any, case_sensitive: bool) -> str:
    out = unicodedata.normalize("NFKC", str(text)).strip()
    out = re.sub(r"\s+", " ", out).rstrip(".!。")
    return out if case_sensitive else out.casefold()


def _options(expected: Any) -> list[Any]:
    """A ground truth may list several acceptable answers."""
    return list(expected) if isinstance(expected, (list, tuple, set, frozenset)) else [expected]


def exact(answer: str | None, expected: Any, *, case_sensitive: bool = False) -> float:
    """1.0 if the answer equals the expected text (whitespace, final period and, by default,
    case ignored), else 0.0. ``expected`` may be a list of acceptable answers."""
    if answer is None:
        return 0.0
    got = _normalize(answer, case_sensitive)
    return float(
        any(e is not None and got == _normalize(e, case_sensitive) for e in _options(expected))
    )


def contains(answer: str | None, expected: Any, *, case_sensitive: bool = False) -> float:
    """1.0 if the answer contains the expected text (or any of a list of texts)."""
    if answer is None:
        return 0.0
    got = _normalize(answer, case_sensitive)
    return float(
        any(e is not None and _normalize(e, case_sensitive) in got for e in _options(expected))
    )


def numbers_in(text: str) -> list[float]:
    """The numbers written in ``text`` (``1,234.5`` counts as one number)."""
    return [float(m.replace(",", "")) for m in _NUMBER.findall(text)]


def numeric(
    answer: str | None, expected: Any, *, tolerance: float = 1e-6, relative: bool = False
) -> float:
    """1.0 if the last number in the answer is within ``tolerance`` of ``expected``.

    ``relative=True`` compares ``|got - want| <= tolerance * |want|``.
    """
    if answer is None or expected is None:
        return 0.0
    found = numbers_in(answer)
    if not found:
        return 0.0
    got = found[-1]
    for option in _options(expected):
        if isinstance(option, bool) or option is None:
            continue
        if isinstance(option, (int, float)):
            want = float(option)
        else:
            written = numbers_in(str(option))
            if not written:
                continue
            want = written[-1]
        limit = tolerance * abs(want) if relative else tolerance
        if abs(got - want) <= limit:
            return 1.0
    return 0.0


def regex(answer: str | None, expected: Any, *, flags: int = re.IGNORECASE) -> float:
    """1.0 if the expected pattern (or any of a list) matches somewhere in the answer."""
    if answer is None:
        return 0.0
    return float(
        any(p is not None and re.search(str(p), answer, flags) for p in _options(expected))
    )


@dataclass(kw_only=True)
class Score:
    """The episode reward of one run."""

    score: float
    """The reward, usually in ``[0, 1]``."""
    status: str
    """``pass`` (score ≥ threshold) or ``fail``."""
    feedback: str | None = None
    """Why, when the reward function said."""
    reward_fn: str = ""
    """Name of the function that scored it."""
    expected: Any = None
    """The ground truth it was scored against."""


def _name(fn: RewardFn) -> str:
    return str(
        getattr(fn, "__name__", None)
        or getattr(getattr(fn, "func", None), "__name__", None)
        or type(fn).__name__
    )


def _call(fn: RewardFn, answer: str | None, expected: Any, response: TaskResponse | None) -> Any:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    if any(p.name == "response" or p.kind is p.VAR_KEYWORD for p in params):
        return fn(answer, expected, response=response)
    return fn(answer, expected)


def _as_score(value: Any, fn: RewardFn) -> tuple[float, str | None]:
    feedback: str | None = None
    if isinstance(value, Score):
        return value.score, value.feedback
    if isinstance(value, tuple) and len(value) == 2:
        value, feedback = value[0], (None if value[1] is None else str(value[1]))
    if isinstance(value, bool):
        return float(value), feedback
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return float(value), feedback
    raise DefinitionError(
        f"reward function {_name(fn)!r} returned {value!r}; return a finite float, a bool, "
        "or a (score, feedback) pair"
    )


def score_response(
    response: TaskResponse | str | None,
    expected: Any,
    fn: RewardFn = exact,
    *,
    threshold: float = 1.0,
) -> Score:
    """Score a run (or a bare answer) with ``fn`` against ``expected``; nothing is stored."""
    if isinstance(response, TaskResponse):
        answer, resp = response.answer, response
    else:
        answer, resp = response, None
    score, feedback = _as_score(_call(fn, answer, expected, resp), fn)
    return Score(
        score=score,
        status="pass" if score >= threshold else "fail",
        feedback=feedback,
        reward_fn=_name(fn),
        expected=expected,
    )


_R = TypeVar("_R", bound=Mapping[str, Any])


def episode_reward(rewards: Sequence[_R]) -> _R | None:
    """The latest episode-level reward item among a run's rewards (:class:`Reward` s, or
    the plain dicts they are), if any."""
    item: _R  # reversed() of a Sequence reads as an iterator of Any to mypy
    for item in reversed(rewards):
        if item.get("level") == "episode":
            return item
    return None


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


async def store_score(
    task: Task,
    score: Score,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> TaskResponse:
    """Append ``score`` to the ended run of ``task`` as an episode reward; return the response
    re-read. A run that is interrupted, failed or still stepping cannot be scored (resume it).

    The item is ``{"step", "score", "status", "source": "reward_fn", "feedback",
    "judged": None, "level": "episode", "reward_fn", "ground_truth"}`` with ``step`` = the
    run's last step, written as an update of the node that ran last (like
    :meth:`Runners.reward`), so it is one more checkpoint of the thread.
    """
    from .checkpoint import open_store
    from .run import GraphRun, pending_nodes

    saver = checkpointer if checkpointer is not None else open_store(shared=True)
    started = time.perf_counter()
    async with GraphRun(task, saver) as run:
        snapshot = await run.snapshot()
        trace: list[TraceRecord] = [
            r for r in (snapshot.values or {}).get("trace") or [] if not r.get("thread_id")
        ]
        if not trace:
            raise DefinitionError(
                f"task {task.id}: the run has no step yet, so it cannot be scored"
            )
        if unfinished := pending_nodes(snapshot):
            raise DefinitionError(
                f"task {task.id}: the run has not ended (next: {', '.join(unfinished)}); "
                "resume it to the end, then score it"
            )
        last = trace[-1]
        item: Reward = {
            "step": last.get("step"),
            "score": score.score,
            "status": score.status,
            "source": SOURCE,
            "feedback": score.feedback,
            "judged": None,
            "node": last.get("node"),
            "level": "episode",
            "reward_fn": score.reward_fn,
            "ground_truth": _plain(score.expected),
        }
        await run.update_state({"rewards": [item]}, as_node=last.get("node"))
        return await run.response(started=started)


def as_trl_reward(
    fn: RewardFn, *, expected_column: str = "ground_truth"
) -> Callable[..., list[float]]:
    """``fn`` as a TRL ``GRPOTrainer`` reward function.

    TRL calls ``reward(prompts=..., completions=..., **dataset_columns)``; completions are
    strings or, for conversational data, lists of messages (the last message's content is
    scored). The ground truth comes from the dataset column ``expected_column``.
    """

    def reward(completions: list[Any], **kwargs: Any) -> list[float]:
        truths = kwargs.get(expected_column) or [None] * len(completions)
        out: list[float] = []
        for completion, truth in zip(completions, truths, strict=False):
            if isinstance(completion, list):
                completion = (completion[-1] or {}).get("content") if completion else None
            out.append(score_response(completion, truth, fn).score)
        return out

    reward.__name__ = f"aworld_{_name(fn)}"
    return reward


def as_verl_score(fn: RewardFn) -> Callable[..., float]:
    """``fn`` as verl's ``compute_score(data_source, solution_str, ground_truth, extra_info)``."""

    def compute_score(
        data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, **_: Any
    ) -> float:
        return score_response(solution_str, ground_truth, fn).score

    compute_score.__name__ = f"aworld_{_name(fn)}"
    return compute_score
