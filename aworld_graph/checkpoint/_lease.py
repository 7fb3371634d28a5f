"""One writer per thread, so two runs cannot fork its checkpoint chain: ``hold(thread_id)``
writes a ``checkpoint_leases`` row (holder, host, pid, expiry) and another saver's ``hold``,
``put`` or ``put_writes`` of the thread raises :class:`~aworld_graph.errors.ThreadBusy`. The
holder's writes renew it; it stops counting when it expires, or at once when its holder's
process on this host is gone. On PostgreSQL a write of a thread also takes a shared advisory
lock on it, retention an exclusive one, so deleting values never interleaves with a write
that builds a delta on them (docs/checkpoints.md, *One writer per thread*).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

from ..errors import ThreadBusy
from ._db import Tx
from ._schema import upsert_sql

__all__ = [
    "HOST",
    "LEASE_COLUMNS",
    "LEASE_WIDTH",
    "Admit",
    "acquire",
    "admit",
    "lease_from",
    "lock_for_retention",
    "release",
]

HOST = socket.gethostname()


def _alive(host: str, pid: int | None) -> bool:
    """Whether a holder's process may still run (another host's: assumed so)."""
    try:
        if host == HOST and pid:
            os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


Admit = Callable[[Tx, str, Any], None]
"""``admit(tx, thread_id, LEASE_COLUMNS)``: the store's schema checked, then :func:`admit`
with the writer's identity bound."""

LEASE_COLUMNS = "one.schema_version, l.holder, l.host, l.pid, l.expires_at"
"""The columns a write's first query reads (with :func:`lease_from`): the store's schema
version as stored (a newer aworld-graph may have moved it on meanwhile), then the lease."""
LEASE_WIDTH = 5
"""How many columns :data:`LEASE_COLUMNS` are."""


def lease_from(dialect: str) -> str:
    """A ``FROM`` of one row, the schema version and the thread's lease (or NULLs), that a
    write joins what it reads to (parameters: the thread id twice); on PostgreSQL it takes
    the shared advisory lock."""
    first = "pg_advisory_xact_lock_shared(hashtextextended(?, 0))" if dialect == "postgres" else "?"
    version = "(SELECT value FROM aworld_meta WHERE key = 'schema_version')"
    return (
        f"(SELECT {first} AS one, {version} AS schema_version) AS one "
        "LEFT JOIN checkpoint_leases AS l ON l.thread_id = ?"
    )


def admit(tx: Tx, thread_id: str, me: str, held: bool, seconds: float, lease: Any) -> None:
    """Let a write of ``thread_id`` by ``me`` go on, given its lease (the last four of
    :data:`LEASE_COLUMNS`): refuse it while another live holder has the lease; ``me``'s
    lease is renewed once half of it is used."""
    holder, host, pid, expires = lease
    now = time.time()
    if holder == me:
        if held and expires - now < seconds / 2:
            tx.run(
                "UPDATE checkpoint_leases SET expires_at = ? WHERE thread_id = ? AND holder = ?",
                (now + seconds, thread_id, me),
            )
        return
    if holder is not None and expires >= now and _alive(host, pid):
        raise ThreadBusy(
            f"thread {thread_id!r} is being run by {holder} (host {host}, pid {pid}); a second "
            "run at the same time would fork its checkpoint chain. Wait for that run to finish "
            f"(its lease ends in {max(0.0, expires - now):.0f} s if it died on another host), "
            "or use another thread id",
            thread_id=thread_id,
            holder=holder,
        )
    if held:  # lost (expired and taken, or deleted): take it back
        acquire(tx, thread_id, me, seconds)


def acquire(tx: Tx, thread_id: str, me: str, seconds: float) -> None:
    """Take the lease of ``thread_id`` for ``me``, or raise :class:`ThreadBusy`. On PostgreSQL
    the thread's exclusive advisory lock comes first: it waits for the writes and the other
    takers of the thread in progress, so the lease read next is what they committed."""
    if tx.dialect == "postgres":
        tx.one("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (thread_id,))
    lease = tx.one(f"SELECT {LEASE_COLUMNS} FROM {lease_from(tx.dialect)}", (thread_id,) * 2)
    admit(tx, thread_id, me, False, seconds, lease[1:])  # type: ignore[index]
    row = (thread_id, me, HOST, os.getpid(), time.time() + seconds)
    tx.run(upsert_sql(tx.dialect, "checkpoint_leases"), row)


def release(tx: Tx, thread_id: str, me: str) -> None:
    """Give the lease of ``thread_id`` back (if ``me`` still holds it)."""
    tx.run("DELETE FROM checkpoint_leases WHERE thread_id = ? AND holder = ?", (thread_id, me))


def lock_for_retention(tx: Tx, thread_ids: list[str]) -> None:
    """PostgreSQL: wait for running writes of these threads, and hold theirs off until the
    transaction ends (SQLite's write transaction already excludes every other writer)."""
    if tx.dialect != "postgres":
        return
    for thread_id in sorted(set(thread_ids)):
        tx.one("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (thread_id,))
