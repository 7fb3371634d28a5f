"""The server's key-value store (LangGraph's ``BaseStore``), in the checkpoint store beside the
checkpoints: table ``store_items``, read and written through the store's database layer
(:attr:`TrajectorySaver.database <aworld_graph.checkpoint.TrajectorySaver.database>`), on
SQLite and PostgreSQL alike.

Why not LangGraph's own ``SqliteStore`` / ``PostgresStore``: each opens a connection of its
own (a ``sqlite3.Connection``, a psycopg connection or pool) and commits on it, so its writes
would bypass the saver's write path (on SQLite the file's ``flock`` that every saver of every
process takes in turn, on PostgreSQL the saver's pool), and a second process writing the same
file would meet SQLite's busy timeout instead of taking its turn. The store keeps one write
path, so this class implements LangGraph's ``BaseStore`` (its ``batch``/``abatch`` of
``GetOp``, ``PutOp``, ``SearchOp`` and ``ListNamespacesOp``) on that layer, with
LangGraph's semantics:

* a namespace is a tuple of non-empty labels without ``.``; ``put`` replaces an item (its
  ``created_at`` kept), a ``None`` value deletes it; secrets in a value are stripped before
  it is stored, as in checkpoints (:func:`aworld_graph.secrets.strip_secrets`);
* ``search`` lists the items under a namespace prefix, newest update first; ``filter`` keeps
  items whose value matches each key (equality, nested objects and lists compared whole,
  or the operators ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``), as LangGraph's
  stores do;
* ``query`` is served without an embedding model, as a keyword match: an item is found when
  its indexed text (every string in its value; with ``index=[paths]`` the text at those
  paths; with ``index=False`` none) contains at least one of the query's words, ignoring
  case. Items with more of the words come first; ``score`` is the fraction of the query's
  words found (``None`` in a search without a query);
* ``list_namespaces`` takes prefix and suffix conditions (``*`` matches any label) and
  ``max_depth`` (namespaces cut to that many labels, duplicates dropped), sorted.

Items have no time to live (``ttl``): the routes refuse one with a 422. Timestamps are UTC
ISO strings, so they sort as text on both back ends.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
)

from ..checkpoint import Database, Tx, strip_secrets

__all__ = ["ItemStore", "matches"]

_COLUMNS = "namespace, key, value, text, created_at, updated_at"
_WORD = re.compile(r"\w+")


def _create(tx: Tx) -> None:
    tx.run(
        "CREATE TABLE IF NOT EXISTS store_items (namespace TEXT NOT NULL, key TEXT NOT NULL, "
        "value TEXT NOT NULL, text TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, "
        "PRIMARY KEY (namespace, key))"
    )


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _text(value: dict[str, Any], index: Any) -> str | None:
    """The text ``query`` searches: every string of ``value``, or those at the ``index``
    paths; ``None`` (not searchable) with ``index=False``."""
    if index is False:
        return None
    if index is None:
        return "\n".join(_strings(value)).lower()
    return "\n".join(t for path in index for t in get_text_at_path(value, path)).lower()


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return (
            isinstance(value, list)
            and len(value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    order = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}
    if op not in order:
        raise ValueError(f"filter operator {op!r} is not one of $eq $ne $gt $gte $lt $lte")
    try:
        return bool(order[op](float(value), float(operand)))
    except (TypeError, ValueError):  # a value that is not a number is not in the range
        return False


def matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    """Whether an item's ``value`` passes a search ``filter`` (LangGraph's rules)."""
    return not filter or all(_compare(value.get(k), v) for k, v in filter.items())


def _conditions_hold(namespace: tuple[str, ...], conditions: Iterable[MatchCondition]) -> bool:
    for condition in conditions:
        path = tuple(condition.path)
        if len(namespace) < len(path):
            return False
        part = (
            namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
        )
        if path and any(p not in ("*", n) for p, n in zip(path, part, strict=True)):
            return False
    return True


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


class ItemStore(BaseStore):
    """LangGraph's ``BaseStore`` on a checkpoint store's database layer (table
    ``store_items``, made when this is built)."""

    supports_ttl = False

    def __init__(self, database: Database) -> None:
        self.database = database
        database.each(_create)

    # -- BaseStore -------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in one transaction (a write one when any of them writes), results in
        their order."""
        ops = list(ops)
        if any(isinstance(op, PutOp) for op in ops):
            return self.database.each(lambda tx: [self._one(tx, op) for op in ops])
        with self.database.read() as tx:
            return [self._one(tx, op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # -- the operations --------------------------------------------------------------------

    def _one(self, tx: Tx, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = tx.one(
                f"SELECT {_COLUMNS} FROM store_items WHERE namespace = ? AND key = ?",
                [".".join(op.namespace), op.key],
            )
            return None if found is None else _item(found)
        if isinstance(op, PutOp):
            self._put(tx, op)
            return None
        if isinstance(op, SearchOp):
            return self._search(tx, op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(tx, op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    def _put(self, tx: Tx, op: PutOp) -> None:
        namespace = ".".join(op.namespace)
        if op.value is None:
            tx.run("DELETE FROM store_items WHERE namespace = ? AND key = ?", [namespace, op.key])
            return
        value = strip_secrets(op.value)  # as in checkpoints: no credential is stored
        stamp = datetime.now(UTC).isoformat()
        tx.run(
            f"INSERT INTO store_items ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, "
            "text = excluded.text, updated_at = excluded.updated_at",
            [namespace, op.key, json.dumps(value), _text(value, op.index), stamp, stamp],
        )

    def _search(self, tx: Tx, op: SearchOp) -> list[SearchItem]:
        sql = f"SELECT {_COLUMNS} FROM store_items"
        params: list[Any] = []
        if op.namespace_prefix:
            prefix = ".".join(op.namespace_prefix)
            sql += " WHERE (namespace = ? OR substr(namespace, 1, ?) = ?)"
            params += [prefix, len(prefix) + 1, prefix + "."]
        rows = tx.all(sql + " ORDER BY updated_at DESC, namespace, key", params)
        words = sorted(set(_WORD.findall((op.query or "").lower())))
        found: list[tuple[float | None, tuple[Any, ...]]] = []
        for row in rows:
            if not matches(json.loads(row[2]), op.filter):
                continue
            if not words:
                found.append((None, row))
                continue
            text = row[3] or ""
            score = sum(w in text for w in words) / len(words)
            if score > 0:
                found.append((score, row))
        if words:  # stable: equal scores keep the newest first
            found.sort(key=lambda pair: -(pair[0] or 0.0))
        page = found[op.offset : op.offset + op.limit]
        return [SearchItem(**_fields(row), score=score) for score, row in page]

    def _namespaces(self, tx: Tx, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        rows = tx.all("SELECT DISTINCT namespace FROM store_items")
        names: set[tuple[str, ...]] = set()
        for (text,) in rows:
            namespace = tuple(str(text).split("."))
            if _conditions_hold(namespace, op.match_conditions or ()):
                names.add(namespace[: op.max_depth] if op.max_depth else namespace)
        return sorted(names)[op.offset : op.offset + op.limit]


def _fields(row: tuple[Any, ...]) -> dict[str, Any]:
    namespace, key, value, _, created_at, updated_at = row
    return {
        "namespace": tuple(str(namespace).split(".")),
        "key": str(key),
        "value": json.loads(value),
        "created_at": _at(str(created_at)),
        "updated_at": _at(str(updated_at)),
    }


def _item(row: tuple[Any, ...]) -> Item:
    return Item(**_fields(row))
