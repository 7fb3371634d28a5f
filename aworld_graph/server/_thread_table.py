"""The server's ``thread_metadata`` table, beside the ``runs`` table in the checkpoint store:
the metadata a client set on a thread that has runs (``PATCH /threads/{thread_id}``).

A thread's metadata is its checkpoints' metadata (a thread record's before it runs, and the
runs carry it on); a stored checkpoint is not rewritten, so what a client merges in later is
kept here, one row per thread (JSON, secrets stripped), and laid over the checkpoints' when
the thread is read. Made when a server opens the store (``CREATE TABLE IF NOT EXISTS``).
"""

from __future__ import annotations

import json
from typing import Any

from ..checkpoint import TrajectorySaver, Tx, strip_secrets

__all__ = ["ThreadTable"]


def _create(tx: Tx) -> None:
    tx.run("CREATE TABLE IF NOT EXISTS thread_metadata (thread_id TEXT PRIMARY KEY, metadata TEXT)")


class ThreadTable:
    """The ``thread_metadata`` table of one checkpoint store."""

    def __init__(self, saver: TrajectorySaver) -> None:
        self.database = saver.database
        self.database.each(_create)

    def get(self, thread_id: str) -> dict[str, Any]:
        """The metadata set on ``thread_id`` (``{}`` when none was)."""
        with self.database.read() as tx:
            found = tx.one("SELECT metadata FROM thread_metadata WHERE thread_id = ?", [thread_id])
        return dict(json.loads(found[0])) if found and found[0] else {}

    def created_at(self, thread_id: str) -> str | None:
        """The time of ``thread_id``'s oldest checkpoint (``None`` when it has none)."""
        with self.database.read() as tx:
            found = tx.one(
                "SELECT min(created_at) FROM checkpoints WHERE thread_id = ?", [thread_id]
            )
        return str(found[0]) if found and found[0] else None

    async def put(self, thread_id: str, metadata: dict[str, Any]) -> None:
        """Replace the metadata set on ``thread_id``; committed when this returns."""
        text = json.dumps(strip_secrets(metadata))
        sql = (
            "INSERT INTO thread_metadata (thread_id, metadata) VALUES (?, ?) "
            "ON CONFLICT (thread_id) DO UPDATE SET metadata = excluded.metadata"
        )
        await self.database.aeach(lambda tx: tx.run(sql, [thread_id, text]))

    async def delete(self, thread_id: str) -> None:
        await self.database.aeach(
            lambda tx: tx.run("DELETE FROM thread_metadata WHERE thread_id = ?", [thread_id])
        )
