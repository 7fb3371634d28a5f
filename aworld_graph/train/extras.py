"""The trainer adapters' extras: which module each trainer needs and how to install it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ..agent import Agent
from ..errors import ConfigError

__all__ = ["TRAINERS", "AgentConfigured", "TrainerNotInstalled"]

TRAINERS: dict[str, tuple[str, str]] = {
    "trl": ("trl", "pip install 'aworld-graph[train-trl]'"),
    "areal": (
        "areal",
        "pip install 'aworld-graph[train-areal]' areal (AReaL 1.0.4 pins torch<2.11: a venv of "
        "its own beside this project's train extra)",
    ),
    "slime": ("slime", "install slime from github.com/THUDM/slime (it is not on PyPI)"),
    "verl": ("verl", "pip install 'aworld-graph[train-verl]' (in an environment of its own)"),
    "swift": ("swift", "pip install 'aworld-graph[train-swift]' (in an environment of its own)"),
}
"""Trainer name → (the module it needs, how to install it)."""


class TrainerNotInstalled(ConfigError):
    """The trainer an :class:`AgentTrainer` was asked for is not installed."""


class AgentConfigured:
    """What a trainer instantiates itself (verl's agent loop, ms-swift's scheduler) takes its
    agent and reward function from the class, set once per process by :meth:`configure`."""

    configured_agent: ClassVar[Agent | None] = None
    """The agent run on each prompt."""
    configured_reward: ClassVar[Callable[..., Any] | None] = None
    """``fn(answer, expected) -> score``; ``None``: the trainer's own reward scores it."""

    @classmethod
    def configure(cls, *, agent: Agent, reward_func: Callable[..., Any] | None = None) -> type[Any]:
        """Set the agent (and reward function) every instance in this process runs; returns
        the class."""
        cls.configured_agent = agent
        cls.configured_reward = reward_func
        return cls
