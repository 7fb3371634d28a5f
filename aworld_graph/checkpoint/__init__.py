"""The checkpointer: ``TrajectorySaver`` keeps every state transition of a run in SQLite.

>>> saver = TrajectorySaver("checkpoints/aworld.db")          # doctest: +SKIP
>>> graph = builder.compile(checkpointer=saver)                 # doctest: +SKIP

Besides the checkpoint tables, the file has a ``trajectory`` view with one row per
transition (see :mod:`aworld_graph.checkpoint._trajectory` for its columns), readable with
any SQLite client::

    sqlite3 checkpoints/aworld.db "SELECT step, nodes, tool_names, reward FROM trajectory"
"""

from __future__ import annotations

import os
from pathlib import Path

from ._inspect import ThreadSummary, TransitionRow
from ._read import HistoryTuple
from ._schema import Durability
from ._secrets import strip_secrets
from ._serde import StrictSerializer
from .saver import TrajectorySaver

__all__ = [
    "TrajectorySaver",
    "HistoryTuple",
    "Durability",
    "ThreadSummary",
    "TransitionRow",
    "StrictSerializer",
    "strip_secrets",
    "default_db_path",
    "default_checkpointer",
    "DB_ENV_VAR",
]

DB_ENV_VAR = "AWORLD_GRAPH_DB"
"""Environment variable naming the default database file."""


def default_db_path() -> Path:
    """``$AWORLD_GRAPH_DB`` if set, else ``checkpoints/aworld.db`` under the working directory."""
    named = os.environ.get(DB_ENV_VAR, "").strip()
    return Path(named).expanduser() if named else Path.cwd() / "checkpoints" / "aworld.db"


def default_checkpointer(*, durability: Durability = "normal") -> TrajectorySaver:
    """A :class:`TrajectorySaver` on :func:`default_db_path` (parent folders created)."""
    path = default_db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return TrajectorySaver(path, durability=durability)
