"""The checkpointer: ``TrajectorySaver`` keeps every state transition of a run, in a SQLite
file or a PostgreSQL database; :func:`open_store` opens one by path, URL or the environment.

>>> saver = open_store()                                        # doctest: +SKIP
>>> saver = open_store("postgresql://me@127.0.0.1/runs")        # doctest: +SKIP
>>> graph = builder.compile(checkpointer=saver)                 # doctest: +SKIP

Besides the checkpoint tables, the store has a ``trajectory`` view with one row per
transition (its columns: :class:`TransitionRow`'s), readable with any SQL client::

    sqlite3 checkpoints/aworld.db "SELECT step, nodes, tool_names, reward FROM trajectory"
"""

from __future__ import annotations

from ..secrets import strip_secrets
from ._db import Durability
from ._inspect import ThreadSummary, TransitionRow
from ._schema import SCHEMA_VERSION
from ._serde import StrictSerializer
from .saver import TrajectorySaver
from .store import DB_ENV_VAR, Database, Tx, open_store

__all__ = [
    "DB_ENV_VAR",
    "SCHEMA_VERSION",
    "Database",
    "Durability",
    "StrictSerializer",
    "ThreadSummary",
    "TrajectorySaver",
    "TransitionRow",
    "Tx",
    "open_store",
    "strip_secrets",
]
