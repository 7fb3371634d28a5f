"""Shared graphs and fixtures for the checkpointer tests (real SQLite files in tmp_path)."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from aworld_graph.checkpoint import TrajectorySaver


class ChatState(TypedDict):
    """A chat whose message list grows by appending plain dicts."""

    messages: Annotated[list[dict[str, Any]], operator.add]
    turn: int


def chat_graph(checkpointer: Any) -> Any:
    """START → reply → END; the reply appends one assistant message."""

    def reply(state: ChatState) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "messages": [{"role": "assistant", "content": f"answer #{n}"}],
            "turn": state["turn"] + 1,
        }

    g = StateGraph(ChatState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=checkpointer)


def ask(app: Any, thread_id: str, text: str) -> dict[str, Any]:
    """One chat turn."""
    return app.invoke(
        {"messages": [{"role": "user", "content": text}], "turn": 0},
        {"configurable": {"thread_id": thread_id}},
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ckpt" / "test.db"


@pytest.fixture
def saver(db_path: Path) -> Iterator[TrajectorySaver]:
    with TrajectorySaver(db_path) as s:
        yield s


_stores = iter(range(1, 1_000_000))


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store on each back end: a SQLite file, or a database on the session's
    throw-away PostgreSQL server (skipped, with the reason, where it cannot run)."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    server = request.getfixturevalue("postgres_server")
    return str(server.create_database(f"store_{next(_stores)}"))


def execute(target: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one SQL statement on the store behind ``target`` with a connection of its own
    (``?`` placeholders), committed; returns the rows."""
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            cur = conn.execute(sql.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []
    import sqlite3

    with sqlite3.connect(target) as conn:
        return conn.execute(sql, params).fetchall()
