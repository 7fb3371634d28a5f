"""The server's ``runs`` table, in the checkpoint store beside the checkpoints, read and
written through the store's database layer (:attr:`TrajectorySaver.database
<aworld_graph.checkpoint.TrajectorySaver.database>`), so on SQLite and PostgreSQL alike and
on the saver's own connections and locks, as the optimizer keeps its tables.

One row per run the server accepted: ``run_id``, ``thread_id``, ``assistant_id``,
``status`` (``pending`` → ``running`` → ``success`` / ``error`` / ``interrupted``),
``multitask_strategy``, the run's ``kwargs`` and ``metadata`` as JSON text with secrets
stripped (:func:`aworld_graph.secrets.strip_secrets`), its ``error`` (JSON, when it failed),
``created_at`` and ``updated_at``. A row is committed before the server acknowledges its run.
A ``webhook`` URL an older version stored with ``user:password@`` is read without them
(:func:`without_credentials`): never answered back, logged or sent to.

The table is made when a server opens the store (``CREATE TABLE IF NOT EXISTS``); it is not
part of the checkpoint schema, so no migration is needed and older stores gain it on first
serve.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..checkpoint import TrajectorySaver, Tx, strip_secrets

__all__ = ["RunTable", "without_credentials"]

_COLUMNS = (
    "run_id",
    "thread_id",
    "assistant_id",
    "status",
    "multitask_strategy",
    "kwargs",
    "metadata",
    "error",
    "created_at",
    "updated_at",
)
_JSON = ("kwargs", "metadata", "error")
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM runs"


def _create(tx: Tx) -> None:
    columns = ", ".join(f"{name} TEXT" for name in _COLUMNS[1:])
    tx.run(f"CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, {columns})")
    tx.run("CREATE INDEX IF NOT EXISTS runs_by_thread ON runs (thread_id, created_at)")
    tx.run("CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, created_at)")


def without_credentials(request: Any) -> Any:
    """A stored run request (``kwargs``, a cron's ``payload``) with its ``webhook`` URL
    stripped of a ``user:password@`` part: new requests are refused one (a 422), but an older
    version stored it as given."""
    url = request.get("webhook") if isinstance(request, dict) else None
    if not isinstance(url, str):
        return request
    try:
        parts = urlsplit(url)
        named = parts.username is not None or parts.password is not None
    except ValueError:  # not a URL this server would send to: left as it is
        return request
    if named:
        host = parts.netloc.rpartition("@")[2]
        request["webhook"] = urlunsplit(parts._replace(netloc=host))
    return request


def _row(values: tuple[Any, ...]) -> dict[str, Any]:
    row = dict(zip(_COLUMNS, values, strict=True))
    for name in _JSON:
        row[name] = json.loads(row[name]) if row[name] else None
    row["kwargs"] = without_credentials(row["kwargs"])
    return row


class RunTable:
    """The ``runs`` table of one checkpoint store; made (with the store brought to this
    version's schema) when this is built."""

    def __init__(self, saver: TrajectorySaver) -> None:
        self.database = saver.database
        saver.migrate()
        self.database.each(_create)

    async def put(self, row: dict[str, Any]) -> None:
        """Store ``row`` (every column), replacing a row of the same ``run_id``; committed
        when this returns."""
        stored = {k: row.get(k) for k in _COLUMNS}
        for name in _JSON:
            value = stored[name]
            stored[name] = None if value is None else json.dumps(strip_secrets(value))
        names = ", ".join(_COLUMNS)
        update = ", ".join(f"{n} = excluded.{n}" for n in _COLUMNS[1:])
        sql = (
            f"INSERT INTO runs ({names}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
            f"ON CONFLICT (run_id) DO UPDATE SET {update}"
        )
        await self.database.aeach(lambda tx: tx.run(sql, [stored[n] for n in _COLUMNS]))

    async def set_status(
        self, run_id: str, status: str, updated_at: str, error: dict[str, str] | None = None
    ) -> None:
        """Move a stored run to ``status`` (``running`` only from ``pending``: a run that
        ended while this was on its way keeps its end)."""
        sql = "UPDATE runs SET status = ?, updated_at = ?, error = ? WHERE run_id = ?"
        if status == "running":
            sql += " AND status = 'pending'"
        text = None if error is None else json.dumps(strip_secrets(error))
        await self.database.aeach(lambda tx: tx.run(sql, [status, updated_at, text, run_id]))

    def get(self, run_id: str) -> dict[str, Any] | None:
        with self.database.read() as tx:
            found = tx.one(f"{_SELECT} WHERE run_id = ?", [run_id])
        return None if found is None else _row(found)

    def of_thread(self, thread_id: str) -> list[dict[str, Any]]:
        """A thread's stored runs, oldest first."""
        with self.database.read() as tx:
            found = tx.all(f"{_SELECT} WHERE thread_id = ? ORDER BY created_at", [thread_id])
        return [_row(r) for r in found]

    def unfinished(self) -> list[dict[str, Any]]:
        """The runs stored ``pending`` or ``running``, oldest first."""
        sql = f"{_SELECT} WHERE status IN ('pending', 'running') ORDER BY created_at"
        with self.database.read() as tx:
            return [_row(r) for r in tx.all(sql)]

    async def delete(self, *, run_id: str | None = None, thread_id: str | None = None) -> None:
        """Forget a run, or every run of a thread."""
        column, value = ("run_id", run_id) if run_id is not None else ("thread_id", thread_id)
        await self.database.aeach(
            lambda tx: tx.run(f"DELETE FROM runs WHERE {column} = ?", [value])
        )
