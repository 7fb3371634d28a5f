"""The store a command's ``--db`` names, opened the one way the library opens one
(:func:`aworld_graph.checkpoint.open_saver`); ``--db`` travels as a value, never through the
environment."""

from __future__ import annotations

from pathlib import Path

import click

from ..checkpoint import TrajectorySaver, default_target, is_url, open_saver

__all__ = ["open_store", "store_target"]


def store_target(db: str | None) -> str | Path:
    """``--db``'s value, else the default store (``$AWORLD_GRAPH_DB`` or ``checkpoints/aworld.db``)."""
    return db if db else default_target()


def open_store(db: str | None, *, existing: bool = True) -> TrajectorySaver:
    """A saver on the store ``db`` names; with ``existing``, a missing SQLite file is a one-line
    CLI error instead of a new empty store."""
    target = store_target(db)
    if existing and not is_url(target) and not Path(target).is_file():
        raise click.ClickException(
            f"no checkpoint database at {target}; run something first, or pass --db / set "
            "AWORLD_GRAPH_DB"
        )
    return open_saver(target)
