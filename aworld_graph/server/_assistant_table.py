"""The assistants created over the API, in the checkpoint store beside the ``runs`` table:
tables ``assistants`` (one row per assistant: its latest version's fields) and
``assistant_versions`` (one row per version), read and written through the store's database
layer (:attr:`TrajectorySaver.database <aworld_graph.checkpoint.TrajectorySaver.database>`),
so on SQLite and PostgreSQL alike, on the saver's own connections and locks.

A row holds ``assistant_id``, ``graph_id``, ``version``, ``name``, ``description``, the
``config``, ``context`` and ``metadata`` objects as JSON text (secrets stripped, as in
checkpoints: :func:`aworld_graph.secrets.strip_secrets`), ``created_at`` and
``updated_at``. Each change is one transaction, committed before the server answers: a
create writes version 1 into both tables, an update writes version ``max + 1`` and makes it
the assistant's, setting the latest version copies that version's fields into the assistant's
row, a delete removes the assistant and its versions.

The tables are made when a server opens the store (``CREATE TABLE IF NOT EXISTS``), as the
``runs`` table is; they are not part of the checkpoint schema, so no migration is needed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from ..checkpoint import TrajectorySaver, Tx, strip_secrets
from ._wire import ApiError, now

__all__ = ["AssistantTable"]

_FIELDS = ("graph_id", "name", "description", "config", "context", "metadata")
_JSON = ("config", "context", "metadata")
_COLUMNS = ("assistant_id", "version", *_FIELDS, "created_at", "updated_at")
_VERSION_COLUMNS = ("assistant_id", "version", *_FIELDS, "created_at")


def _create(tx: Tx) -> None:
    text = ", ".join(f"{name} TEXT" for name in _FIELDS)
    tx.run(
        "CREATE TABLE IF NOT EXISTS assistants (assistant_id TEXT PRIMARY KEY, "
        f"version INTEGER NOT NULL, {text}, created_at TEXT, updated_at TEXT)"
    )
    tx.run(
        "CREATE TABLE IF NOT EXISTS assistant_versions (assistant_id TEXT NOT NULL, "
        f"version INTEGER NOT NULL, {text}, created_at TEXT, "
        "PRIMARY KEY (assistant_id, version))"
    )


def _stored(row: Mapping[str, Any], name: str) -> Any:
    value = row.get(name)
    if name in _JSON:
        return json.dumps(strip_secrets(dict(value or {})))
    return value


def _read(columns: tuple[str, ...], values: tuple[Any, ...], tx: Tx) -> dict[str, Any]:
    row = dict(zip(columns, values, strict=True))
    for name in _JSON:
        row[name] = tx.json(row[name]) if row[name] else {}
    row["version"] = int(row["version"])
    return row


def _insert(tx: Tx, table: str, columns: tuple[str, ...], row: Mapping[str, Any]) -> None:
    marks = ", ".join("?" * len(columns))
    tx.run(
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
        [_stored(row, c) for c in columns],
    )


def _one(tx: Tx, assistant_id: str) -> dict[str, Any] | None:
    found = tx.one(
        f"SELECT {', '.join(_COLUMNS)} FROM assistants WHERE assistant_id = ?", [assistant_id]
    )
    return None if found is None else _read(_COLUMNS, found, tx)


def _missing(assistant_id: str) -> ApiError:
    return ApiError(
        404,
        "assistant_not_found",
        f"no assistant {assistant_id!r}; POST /assistants/search lists them",
    )


class AssistantTable:
    """The ``assistants`` and ``assistant_versions`` tables of one checkpoint store; made
    (with the store brought to this version's schema) when this is built."""

    def __init__(self, saver: TrajectorySaver) -> None:
        self.database = saver.database
        saver.migrate()
        self.database.each(_create)

    def get(self, assistant_id: str) -> dict[str, Any] | None:
        """The assistant's row (its latest version's fields), or ``None``."""
        with self.database.read() as tx:
            return _one(tx, assistant_id)

    def all(self) -> list[dict[str, Any]]:
        """Every stored assistant, oldest first."""
        with self.database.read() as tx:
            found = tx.all(f"SELECT {', '.join(_COLUMNS)} FROM assistants ORDER BY created_at")
            return [_read(_COLUMNS, r, tx) for r in found]

    async def aall(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.all)

    async def create(self, row: Mapping[str, Any], if_exists: str) -> tuple[dict[str, Any], bool]:
        """Store a new assistant as version 1 of ``row``; with ``if_exists="do_nothing"`` an
        assistant of the same id is returned as it is (else a 409). The row and whether it
        was made."""
        assistant_id = str(row["assistant_id"])

        def write(tx: Tx) -> tuple[dict[str, Any], bool]:
            found = _one(tx, assistant_id)
            if found is not None:
                if if_exists == "do_nothing":
                    return found, False
                raise ApiError(
                    409,
                    "assistant_exists",
                    f"assistant {assistant_id} exists; use another assistant_id, "
                    "if_exists='do_nothing', or PATCH /assistants/{assistant_id} to change it",
                )
            stamp = now()
            made = {**row, "version": 1, "created_at": stamp, "updated_at": stamp}
            _insert(tx, "assistants", _COLUMNS, made)
            _insert(tx, "assistant_versions", _VERSION_COLUMNS, made)
            return _one(tx, assistant_id) or made, True

        return await self.database.aeach(write)

    async def update(self, assistant_id: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """A new version of the assistant with ``changes`` (``metadata`` merged into the
        current one, other fields replaced) made its latest; the updated row."""

        def write(tx: Tx) -> dict[str, Any]:
            current = _one(tx, assistant_id)
            if current is None:
                raise _missing(assistant_id)
            top = tx.one(
                "SELECT MAX(version) FROM assistant_versions WHERE assistant_id = ?",
                [assistant_id],
            )
            version = int((top or (0,))[0] or 0) + 1
            new = {k: current[k] for k in _FIELDS}
            new.update({k: v for k, v in changes.items() if k in _FIELDS and k != "metadata"})
            new["metadata"] = {**current["metadata"], **dict(changes.get("metadata") or {})}
            stamp = now()
            version_row = {"assistant_id": assistant_id, "version": version, **new}
            _insert(
                tx, "assistant_versions", _VERSION_COLUMNS, {**version_row, "created_at": stamp}
            )
            self._point(tx, assistant_id, version_row, stamp)
            return _one(tx, assistant_id) or version_row

        return await self.database.aeach(write)

    @staticmethod
    def _point(tx: Tx, assistant_id: str, version: Mapping[str, Any], stamp: str) -> None:
        """Make ``version`` (a version row) the assistant's own fields."""
        names = ("version", *_FIELDS, "updated_at")
        values = [_stored({**version, "updated_at": stamp}, n) for n in names]
        sets = ", ".join(f"{n} = ?" for n in names)
        tx.run(f"UPDATE assistants SET {sets} WHERE assistant_id = ?", [*values, assistant_id])

    async def set_latest(self, assistant_id: str, version: int) -> dict[str, Any]:
        """Make ``version`` the assistant's latest; the updated row."""

        def write(tx: Tx) -> dict[str, Any]:
            if _one(tx, assistant_id) is None:
                raise _missing(assistant_id)
            found = tx.one(
                f"SELECT {', '.join(_VERSION_COLUMNS)} FROM assistant_versions "
                "WHERE assistant_id = ? AND version = ?",
                [assistant_id, version],
            )
            if found is None:
                raise ApiError(
                    404,
                    "version_not_found",
                    f"assistant {assistant_id} has no version {version}; POST "
                    f"/assistants/{assistant_id}/versions lists them",
                )
            self._point(tx, assistant_id, _read(_VERSION_COLUMNS, found, tx), now())
            return _one(tx, assistant_id) or {}

        return await self.database.aeach(write)

    def versions(self, assistant_id: str) -> list[dict[str, Any]]:
        """The assistant's versions, newest first (empty: no such assistant)."""
        with self.database.read() as tx:
            found = tx.all(
                f"SELECT {', '.join(_VERSION_COLUMNS)} FROM assistant_versions "
                "WHERE assistant_id = ? ORDER BY version DESC",
                [assistant_id],
            )
            return [_read(_VERSION_COLUMNS, r, tx) for r in found]

    async def delete(self, assistant_id: str) -> None:
        """Forget the assistant and its versions (a 404 when there is none)."""

        def write(tx: Tx) -> None:
            if _one(tx, assistant_id) is None:
                raise _missing(assistant_id)
            tx.run("DELETE FROM assistant_versions WHERE assistant_id = ?", [assistant_id])
            tx.run("DELETE FROM assistants WHERE assistant_id = ?", [assistant_id])

        await self.database.aeach(write)
