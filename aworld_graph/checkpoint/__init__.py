"""The checkpointer: ``TrajectorySaver`` keeps every state transition of a run, in a SQLite
file or a PostgreSQL database.

>>> saver = TrajectorySaver("checkpoints/aworld.db")          # doctest: +SKIP
>>> saver = TrajectorySaver("postgresql://me@127.0.0.1/runs")  # doctest: +SKIP
>>> graph = builder.compile(checkpointer=saver)                 # doctest: +SKIP

Besides the checkpoint tables, the store has a ``trajectory`` view with one row per
transition (its columns: :class:`TransitionRow`'s), readable with any SQL client::

    sqlite3 checkpoints/aworld.db "SELECT step, nodes, tool_names, reward FROM trajectory"
"""

from __future__ import annotations

import os
from pathlib import Path

from ..secrets import strip_secrets
from ._db import Durability, is_url
from ._inspect import ThreadSummary, TransitionRow
from ._serde import StrictSerializer
from .saver import TrajectorySaver

__all__ = ["TrajectorySaver", "Durability", "ThreadSummary", "TransitionRow", "StrictSerializer"]
__all__ += ["strip_secrets", "default_target", "default_checkpointer", "open_saver", "is_url"]
__all__ += ["DB_ENV_VAR"]

DB_ENV_VAR = "AWORLD_GRAPH_DB"
"""Environment variable naming the default store: a SQLite file or a ``postgresql://`` URL."""


def default_target() -> str | Path:
    """``$AWORLD_GRAPH_DB`` if set (a file path or a PostgreSQL URL), else
    ``checkpoints/aworld.db`` under the working directory."""
    named = os.environ.get(DB_ENV_VAR, "").strip()
    if is_url(named):
        return named
    return Path(named).expanduser() if named else Path.cwd() / "checkpoints" / "aworld.db"


def open_saver(target: str | os.PathLike[str] | None = None) -> TrajectorySaver:
    """A :class:`TrajectorySaver` on ``target`` (a file path or a URL), or on
    :func:`default_target` when it is ``None``: the one way to open a store by name."""
    return TrajectorySaver(default_target() if target is None else target)


_defaults: dict[tuple[str, Durability], TrajectorySaver] = {}


def default_checkpointer(*, durability: Durability = "normal") -> TrajectorySaver:
    """The process-wide default saver: one :class:`TrajectorySaver` on :func:`default_target`
    per target and durability, made on first use (what runs use when given no checkpointer)."""
    target = default_target()
    key = (str(target), durability)
    if key not in _defaults:
        _defaults[key] = TrajectorySaver(target, durability=durability)
    return _defaults[key]
