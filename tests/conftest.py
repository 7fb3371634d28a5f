"""Test-wide guards: no real model endpoint, a fresh database per test; PostgreSQL servers."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_openai import FakeOpenAI
from tests.postgres import PostgresServer, skip_reason

os.environ["AWORLD_GRAPH_BLOCK_REMOTE"] = "1"
for _var in ("LLM_MODEL_NAME", "LLM_API_KEY", "LLM_BASE_URL", "LLM_PROVIDER", "LLM_TEMPERATURE"):
    os.environ.pop(_var, None)


@pytest.fixture(autouse=True)
def _isolated_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own default database file."""
    db = tmp_path / "aworld.db"
    monkeypatch.setenv("AWORLD_GRAPH_DB", str(db))
    return db


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def saver(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A checkpointer on a real SQLite file when the project's saver is available."""
    try:
        from aworld_graph.checkpoint import TrajectorySaver
    except ImportError:
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver()
    return TrajectorySaver(str(tmp_path / "runs.db"))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throw-away PostgreSQL server for the session, started by the first test that asks.

    Skips (with the reason) where PostgreSQL's programs or psycopg are not installed.
    """
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    with PostgresServer() as server:
        yield server


_databases = itertools.count(1)


@pytest.fixture(scope="module")
def pg_url(request: pytest.FixtureRequest, postgres_server: PostgresServer) -> str:
    """The URL of a fresh, empty database on ``postgres_server``, one per test module."""
    module = request.module.__name__.rsplit(".", 1)[-1]
    name = f"{re.sub(r'[^a-z0-9_]', '_', module.lower())[:40]}_{next(_databases)}"
    return postgres_server.create_database(name)
