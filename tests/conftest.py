"""Test-wide guards: no real model endpoint, a fresh database per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_openai import FakeOpenAI

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
