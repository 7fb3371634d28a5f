"""Long strings stored once per thread: a long model answer sits in several channels at once
(``answer``, ``messages``, ``outputs``, ``trace``), as a task's write and as the next
checkpoint's value, so a string of :data:`TEXT_MIN` or more characters inside a plain value
(dicts, lists) is a ``checkpoint_texts`` row keyed by its BLAKE2b digest, and the value holds
a 16-byte reference (a msgpack extension) in its place; reading puts the string back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..errors import RuntimeFailure
from ._db import Tx
from ._schema import upsert_sql

__all__ = ["EXT_STORED_TEXT", "TEXT_MIN", "dumps", "reading_texts", "stored_text", "store"]

TEXT_MIN = 8192
"""Strings this long or longer are stored once, by digest."""
EXT_STORED_TEXT = 100
"""The msgpack extension code of a reference to a stored string (LangGraph uses 0–7)."""
_resolver: ContextVar[Callable[[bytes], str] | None] = ContextVar("texts", default=None)


def dumps(serde: SerializerProtocol, value: Any, texts: dict[bytes, str]) -> tuple[str, bytes]:
    """``serde.dumps_typed(value)`` with its long strings replaced by references (added to
    ``texts``). A value that serializes shorter than :data:`TEXT_MIN` holds none."""
    typed = serde.dumps_typed(value)
    if typed[0] != "msgpack" or len(typed[1]) < TEXT_MIN:
        return typed
    found: dict[bytes, str] = {}
    swapped = _swap(value, found)
    texts.update(found)
    return serde.dumps_typed(swapped) if found else typed


def _swap(value: Any, found: dict[bytes, str]) -> Any:
    if type(value) is str and len(value) >= TEXT_MIN:
        digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        found[digest] = value
        return ormsgpack.Ext(EXT_STORED_TEXT, digest)
    if type(value) is dict:
        return {k: _swap(v, found) for k, v in value.items()}
    if type(value) is list:
        return [_swap(v, found) for v in value]
    return value


def store(tx: Tx, thread_id: str, texts: dict[bytes, str]) -> None:
    """Insert the rows of ``texts`` of ``thread_id`` that are not stored yet."""
    rows = [(digest, thread_id, text) for digest, text in texts.items()]
    tx.many(upsert_sql(tx.dialect, "checkpoint_texts", replace=False), rows)


@contextmanager
def reading_texts(tx: Tx, label: str) -> Iterator[None]:
    """References decoded inside this block are looked up in ``tx`` (each once)."""
    seen: dict[bytes, str] = {}

    def look_up(digest: bytes) -> str:
        if digest not in seen:
            row = tx.one("SELECT text FROM checkpoint_texts WHERE digest = ? LIMIT 1", (digest,))
            if row is None:
                raise RuntimeFailure(
                    f"checkpoint database {label} lacks the stored text {digest.hex()} a value "
                    "refers to; it may be damaged. Restore a backup, or delete the thread"
                )
            seen[digest] = str(row[0])
        return seen[digest]

    token = _resolver.set(look_up)
    try:
        yield
    finally:
        _resolver.reset(token)


def stored_text(digest: bytes) -> str:
    """The string a reference names (inside :func:`reading_texts`)."""
    look_up = _resolver.get()
    if look_up is None:
        raise RuntimeFailure("a stored-text reference can only be read through TrajectorySaver")
    return look_up(bytes(digest))


def garbage_sql(dialect: str) -> str:
    """``DELETE`` of a thread's texts no value or write of it refers to any more."""
    has = "instr({0}.value, t.digest)" if dialect == "sqlite" else "position(t.digest in {0}.value)"
    return (
        "DELETE FROM checkpoint_texts AS t WHERE t.thread_id = ? "
        "AND NOT EXISTS (SELECT 1 FROM checkpoint_blobs AS b WHERE b.thread_id = t.thread_id "
        f"AND {has.format('b')} > 0) AND NOT EXISTS (SELECT 1 FROM checkpoint_writes AS w "
        f"WHERE w.thread_id = t.thread_id AND {has.format('w')} > 0)"
    )
