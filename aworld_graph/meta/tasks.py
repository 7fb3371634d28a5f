"""Task sets: JSONL files of ``input`` / ``expected`` pairs with a reward function and splits.

A task set file has one JSON object per line::

    {"taskset": {"name": "arithmetic", "reward": "numeric", "threshold": 1.0}}   # optional header
    {"id": "a001", "input": "What is 17*23?", "expected": 391, "split": "train", "metadata": {}}

``split`` is ``train``, ``dev`` or ``test``; lines without one are assigned a split from a
hash of their id (50 / 25 / 25 by default), so the assignment never changes when lines are
added. ``reward`` names a function of :mod:`aworld_graph.rewards` (``exact``, ``numeric``,
``contains``, ``regex``) or an import path ``package.module:function``.

Three task sets ship with the package (:func:`shipped`): ``arithmetic`` (multi-step word
problems), ``expressions`` (the same arithmetic as bare expressions) and ``tool_use``
(questions answered by reading files through the bundled MCP environment server; see
:func:`tool_use_root`). :func:`reasoning_gym_tasks` turns a
``reasoning-gym`` generator into a task set when that package is installed.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import rewards
from ..errors import ConfigError

__all__ = [
    "SPLITS",
    "TaskItem",
    "TaskSet",
    "load_tasks",
    "reasoning_gym_tasks",
    "resolve_reward",
    "save_tasks",
    "shipped",
    "tool_use_root",
]

SPLITS = ("train", "dev", "test")
"""The split names: select on ``train``, confirm on ``dev``, report on ``test``."""

TASKSET_DIR = Path(__file__).resolve().parent / "tasksets"
"""Where the shipped task sets live (package data)."""

_BUILTIN_REWARDS: dict[str, Callable[..., Any]] = {
    "exact": rewards.exact,
    "numeric": rewards.numeric,
    "contains": rewards.contains,
    "regex": rewards.regex,
}


@dataclass(kw_only=True, frozen=True)
class TaskItem:
    """One task: what the workflow is asked and what a right answer is."""

    id: str
    """Unique within its task set; part of the checkpoint thread ids of its runs."""
    input: str
    """The request given to the workflow."""
    expected: Any
    """The ground truth the reward function compares the answer with."""
    split: str
    """``train``, ``dev`` or ``test``."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form facts about the task (how it was generated, its difficulty…)."""


@dataclass(kw_only=True)
class TaskSet:
    """Tasks plus the reward function that scores answers to them."""

    name: str
    """Short name (used in run ids and reports)."""
    items: list[TaskItem]
    """Every task, in file order."""
    reward: Callable[..., Any] = rewards.exact
    """``fn(answer, expected) -> score`` (see :mod:`aworld_graph.rewards`)."""
    reward_name: str = "exact"
    """How the reward function is named in the file header (``numeric``, ``pkg.mod:fn``)."""
    threshold: float = 1.0
    """A run whose reward reaches this counts as a success (and may become a demonstration)."""
    source: Path | None = None
    """The file it was read from, if any."""

    def split(self, name: str) -> list[TaskItem]:
        """The tasks of one split, in file order."""
        if name not in SPLITS:
            raise ConfigError(f"unknown split {name!r}; use one of {', '.join(SPLITS)}")
        return [t for t in self.items if t.split == name]

    @property
    def train(self) -> list[TaskItem]:
        return self.split("train")

    @property
    def dev(self) -> list[TaskItem]:
        return self.split("dev")

    @property
    def test(self) -> list[TaskItem]:
        return self.split("test")

    def fingerprint(self) -> str:
        """A short hash of the tasks and the reward (stable across processes)."""
        data = [(t.id, t.input, repr(t.expected), t.split) for t in self.items]
        text = json.dumps([self.name, self.reward_name, self.threshold, data])
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def subset(self, **sizes: int) -> TaskSet:
        """The first ``sizes[split]`` tasks of each split named (others kept whole):
        ``tasks.subset(train=8, dev=4, test=12)``."""
        for name in sizes:
            self.split(name)
        kept: list[TaskItem] = []
        counts = dict.fromkeys(SPLITS, 0)
        for item in self.items:
            limit = sizes.get(item.split)
            if limit is None or counts[item.split] < limit:
                kept.append(item)
                counts[item.split] += 1
        return TaskSet(
            name=self.name,
            items=kept,
            reward=self.reward,
            reward_name=self.reward_name,
            threshold=self.threshold,
            source=self.source,
        )


def resolve_reward(name: str) -> Callable[..., Any]:
    """A reward function by name: a built-in (``numeric``…) or ``package.module:function``."""
    if name in _BUILTIN_REWARDS:
        return _BUILTIN_REWARDS[name]
    module_name, sep, attr = name.partition(":")
    if not sep:
        raise ConfigError(
            f"unknown reward {name!r}; use {', '.join(_BUILTIN_REWARDS)} or package.module:function"
        )
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import reward {name!r} ({exc}); check the path") from None
    if not callable(obj):
        raise ConfigError(f"reward {name!r} is not callable; point at a function")
    return obj  # type: ignore[no-any-return]


def _split_of(task_id: str, ratios: Sequence[float]) -> str:
    value = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    total, edge = sum(ratios), 0.0
    for name, ratio in zip(SPLITS, ratios, strict=True):
        edge += ratio / total
        if value <= edge:
            return name
    return SPLITS[-1]


def load_tasks(
    path: str | os.PathLike[str],
    *,
    reward: str | Callable[..., Any] | None = None,
    threshold: float | None = None,
    ratios: Sequence[float] = (0.5, 0.25, 0.25),
) -> TaskSet:
    """Read a task set file; every problem (with its line) is reported at once.

    ``reward`` and ``threshold`` override the file header; ``ratios`` (train, dev, test)
    assign a split to lines that name none.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read task set {path}: {exc.strerror or exc}") from None
    header: dict[str, Any] = {}
    items: list[TaskItem] = []
    problems: list[str] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            problems.append(f"{where}: not JSON ({exc}); write one JSON object per line")
            continue
        if not isinstance(row, dict):
            problems.append(f"{where}: expected a JSON object with 'input' and 'expected'")
            continue
        if "taskset" in row:
            if header or items:
                problems.append(f"{where}: the 'taskset' header must be the first line")
            header = dict(row["taskset"] or {})
            continue
        if not isinstance(row.get("input"), str) or "expected" not in row:
            problems.append(f"{where}: a task needs a string 'input' and an 'expected' value")
            continue
        task_id = str(row.get("id") or f"{path.stem}-{number}")
        if task_id in seen:
            problems.append(f"{where}: task id {task_id!r} is used twice; give each task its own")
            continue
        seen.add(task_id)
        split = row.get("split") or _split_of(task_id, ratios)
        if split not in SPLITS:
            problems.append(f"{where}: split {split!r} is unknown; use {', '.join(SPLITS)}")
            continue
        meta = row.get("metadata") or {}
        if not isinstance(meta, dict):
            problems.append(f"{where}: 'metadata' must be an object")
            continue
        items.append(
            TaskItem(
                id=task_id, input=row["input"], expected=row["expected"], split=split, metadata=meta
            )
        )
    if not items and not problems:
        problems.append(f'{path}: no tasks; write lines like {{"input": ..., "expected": ...}}')
    reward_name = reward if isinstance(reward, str) else header.get("reward", "exact")
    try:
        reward_fn = reward if callable(reward) else resolve_reward(str(reward_name))
    except ConfigError as exc:
        problems.append(f"{path}: {exc}")
        reward_fn = rewards.exact
    if problems:
        raise ConfigError(
            f"task set {path} has {len(problems)} problem(s):\n  " + "\n  ".join(problems)
        )
    return TaskSet(
        name=str(header.get("name") or path.stem),
        items=items,
        reward=reward_fn,
        reward_name=getattr(reward_fn, "__name__", str(reward_name))
        if callable(reward)
        else str(reward_name),
        threshold=float(threshold if threshold is not None else header.get("threshold", 1.0)),
        source=path,
    )


def save_tasks(
    tasks: TaskSet | Iterable[TaskItem], path: str | os.PathLike[str], **header: Any
) -> Path:
    """Write tasks as a task set file (with a header when ``tasks`` is a :class:`TaskSet`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    if isinstance(tasks, TaskSet):
        header = {
            "name": tasks.name,
            "reward": tasks.reward_name,
            "threshold": tasks.threshold,
            **header,
        }
        items: Iterable[TaskItem] = tasks.items
    else:
        items = tasks
    if header:
        lines.append(json.dumps({"taskset": header}))
    for t in items:
        row = {"id": t.id, "input": t.input, "expected": t.expected, "split": t.split}
        if t.metadata:
            row["metadata"] = t.metadata
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def shipped(name: str) -> TaskSet:
    """A task set that ships with the package: ``arithmetic``, ``expressions`` or ``tool_use``."""
    path = TASKSET_DIR / f"{name}.jsonl"
    if not path.is_file():
        known = sorted(p.stem for p in TASKSET_DIR.glob("*.jsonl"))
        raise ConfigError(f"no shipped task set {name!r}; shipped: {', '.join(known)}")
    return load_tasks(path)


def tool_use_root() -> Path:
    """The directory the ``tool_use`` tasks' files live in: start the environment server on it
    (``python -m aworld_graph.environment.server --root DIR``)."""
    return TASKSET_DIR / "tool_use_files"


def reasoning_gym_tasks(
    dataset: str,
    *,
    size: int = 40,
    seed: int = 0,
    ratios: Sequence[float] = (0.5, 0.25, 0.25),
    **config: Any,
) -> TaskSet:
    """A task set from a ``reasoning-gym`` generator (``pip install reasoning-gym``), scored by
    the generator's own ``score_answer``; nothing is downloaded."""
    try:  # an optional dependency without type information: its objects are Any here
        reasoning_gym = importlib.import_module("reasoning_gym")
    except ImportError:
        raise ConfigError(
            "reasoning-gym is not installed; pip install reasoning-gym, or use a JSONL task set"
        ) from None
    data = reasoning_gym.create_dataset(dataset, size=size, seed=seed, **config)
    entries = list(data)

    def score(answer: str | None, expected: Any) -> float:
        entry = entries[int(expected["index"])]
        return float(data.score_answer(answer=answer, entry=entry) or 0.0)

    score.__name__ = f"reasoning_gym_{dataset}"
    items = []
    for i, entry in enumerate(entries):
        task_id = f"{dataset}-{seed}-{i:04d}"
        items.append(
            TaskItem(
                id=task_id,
                input=str(entry["question"]),
                expected={"index": i, "answer": entry.get("answer")},
                split=_split_of(task_id, ratios),
                metadata={"dataset": dataset},
            )
        )
    return TaskSet(name=f"rg-{dataset}", items=items, reward=score, reward_name=score.__name__)
