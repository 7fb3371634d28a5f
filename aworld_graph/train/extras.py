"""The trainer adapters' extras: which module each trainer needs and how to install it."""

from __future__ import annotations

from ..errors import ConfigError

__all__ = ["TRAINERS", "TrainerNotInstalled"]

TRAINERS: dict[str, tuple[str, str]] = {
    "trl": ("trl", "pip install 'aworld-graph[train-trl]'"),
    "areal": ("areal", "pip install 'aworld-graph[train-areal]' and AReaL (it needs CUDA torch)"),
    "slime": ("slime", "install slime from github.com/THUDM/slime (it is not on PyPI)"),
    "verl": ("verl", "pip install 'aworld-graph[train-verl]' (in an environment of its own)"),
    "swift": ("swift", "pip install 'aworld-graph[train-swift]' (in an environment of its own)"),
}
"""Trainer name → (the module it needs, how to install it)."""


class TrainerNotInstalled(ConfigError):
    """The trainer an :class:`AgentTrainer` was asked for is not installed."""
