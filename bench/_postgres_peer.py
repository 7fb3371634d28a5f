"""PostgreSQL for ``bench_checkpoint.py``: one throw-away server, LangGraph's savers on it.

The server is ``tests/postgres.py``'s ``PostgresServer`` (a fresh cluster on 127.0.0.1 in a
temporary directory, ``fsync=off``). Every saver gets a database of its own on it, so that
both sides' tables (they share names such as ``checkpoints``) never mix and each database's
size is one saver's.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from itertools import count
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_names = count()


class Postgres:
    """A running throw-away server; :meth:`database` makes a new, empty database."""

    def __init__(self, server: Any) -> None:
        self._server = server

    def database(self, label: str) -> str:
        """The URL of a new database named after ``label``."""
        return str(self._server.create_database(f"{label}_{next(_names)}"))


def unavailable() -> str | None:
    """Why the PostgreSQL rows cannot run here, or None when they can."""
    from tests.postgres import skip_reason

    reason = skip_reason()
    if reason is None and importlib.util.find_spec("langgraph.checkpoint.postgres") is None:
        reason = "langgraph-checkpoint-postgres is not installed; pip install -e '.[dev]'"
    return reason


@contextmanager
def server() -> Iterator[Postgres | str]:
    """A :class:`Postgres` for the length of the block, or the reason there is none."""
    reason = unavailable()
    if reason is not None:
        yield reason
        return
    from tests.postgres import PostgresServer

    stack = ExitStack()
    try:
        running = stack.enter_context(PostgresServer())
    except RuntimeError as exc:
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        yield f"the throw-away PostgreSQL server did not start: {first}"
        return
    with stack:
        yield Postgres(running)


def peer(url: str, stack: ExitStack) -> Any:
    """LangGraph's ``PostgresSaver`` on ``url`` (tables set up), closed with ``stack``."""
    from langgraph.checkpoint.postgres import PostgresSaver

    saver = stack.enter_context(PostgresSaver.from_conn_string(url))
    saver.setup()
    return saver


@asynccontextmanager
async def apeer(url: str) -> AsyncIterator[Any]:
    """LangGraph's ``AsyncPostgresSaver`` on ``url`` (tables set up)."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()
        yield saver


def stored_bytes(url: str, table: str | None = None) -> int:
    """``pg_total_relation_size`` (heap, indexes, TOAST) summed over the database's tables
    (or of the one named ``table``)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname = coalesce(%s, c.relname)",
            (table,),
        ).fetchone()
    return int(row[0]) if row else 0
