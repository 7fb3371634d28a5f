"""Opening a store: :func:`open_store` is the one way the library, the CLI, the server, the
Ray workers, export and the optimizer open a checkpoint store, named by a SQLite path, a
``postgresql://`` URL, or the environment (``$AWORLD_GRAPH_DB``, else
``checkpoints/aworld.db`` under the working directory).

>>> saver = open_store()                                    # doctest: +SKIP
>>> saver = open_store("postgresql://me@127.0.0.1/runs")    # doctest: +SKIP
>>> saver = open_store("runs.db", create=False)             # doctest: +SKIP

Tables kept beside the checkpoints (the optimizer's) are read and written through the
store's own database layer, :attr:`TrajectorySaver.database <.saver.TrajectorySaver.database>`
(a :data:`Database`): ``read()`` gives a :class:`Tx` on one consistent snapshot, ``each(fn)``
runs ``fn(tx)`` in one write transaction on the saver's connections and locks (``aeach`` for
an event loop). A :class:`Tx` takes ``?`` placeholders on SQLite and PostgreSQL alike and
tells which it is by ``tx.dialect``; nothing else opens a connection to the store.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from ..errors import ConfigError
from ._db import Durability, Tx, store_target
from .saver import TrajectorySaver

__all__ = ["DB_ENV_VAR", "Database", "Tx", "open_store"]

DB_ENV_VAR = "AWORLD_GRAPH_DB"
"""Environment variable naming the default store: a SQLite file or a ``postgresql://`` URL."""

T = TypeVar("T")


class Database(Protocol):
    """A store's database layer (:attr:`TrajectorySaver.database`), on either back end."""

    @property
    def dialect(self) -> Literal["sqlite", "postgres"]:
        """Which back end: SQL that differs between the two asks this."""

    @property
    def label(self) -> str:
        """The store as messages name it (a URL without its password)."""

    def read(self) -> AbstractContextManager[Tx]:
        """A read transaction: one consistent snapshot for every statement in it."""

    def each(self, fn: Callable[[Tx], T]) -> T:
        """``fn(tx)`` in one write transaction, committed before this returns, or raising
        (with nothing of it stored)."""

    async def aeach(self, fn: Callable[[Tx], T]) -> T:
        """:meth:`each` for an event loop, whose thread the write does not block."""


_shared: dict[tuple[str, Durability], TrajectorySaver] = {}
_shared_lock = threading.Lock()


def _target(target: str | os.PathLike[str] | None) -> str | Path:
    """``target`` as a URL or a path; ``None``: ``$AWORLD_GRAPH_DB``, else
    ``checkpoints/aworld.db`` under the working directory."""
    if target is None:
        target = os.environ.get(DB_ENV_VAR, "").strip() or Path.cwd() / "checkpoints" / "aworld.db"
    return store_target(target)


def open_store(
    target: str | os.PathLike[str] | None = None,
    *,
    durability: Durability = "normal",
    create: bool = True,
    shared: bool = False,
) -> TrajectorySaver:
    """A :class:`TrajectorySaver` on a checkpoint store.

    Args:
        target: A SQLite file path or a ``postgresql://`` URL; ``None``: the store named by
            ``$AWORLD_GRAPH_DB``, else ``checkpoints/aworld.db`` under the working directory.
        durability: ``"normal"`` or ``"full"`` (see :data:`Durability`).
        create: Whether a SQLite file that is not there yet is made (on first use). ``False``
            (for what only reads runs) makes a missing file a ConfigError that says what to
            do, instead of a new empty store.
        shared: The process-wide saver for this store and durability, made on first use and
            given to every caller that asks (what runs given no checkpointer use); closing it
            only closes its connections, which reopen when it is used again. Without it, a new
            saver the caller closes.
    """
    where = _target(target)
    if not create and isinstance(where, Path) and not where.is_file():
        raise ConfigError(
            f"no checkpoint database at {where}; run something first, or pass --db / set "
            f"{DB_ENV_VAR}"
        )
    if not shared:
        return TrajectorySaver(where, durability=durability)
    key = (str(where if isinstance(where, str) else where.resolve()), durability)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = TrajectorySaver(where, durability=durability)
        return _shared[key]
