"""The official ``langgraph-checkpoint-conformance`` suite: base and extended capabilities."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
    Capability,
)

from aworld_graph.checkpoint import TrajectorySaver


@pytest.mark.parametrize("capability", sorted(c.value for c in Capability))
async def test_conformance(capability: str, tmp_path: Path) -> None:
    counter = iter(range(1000))

    @checkpointer_test(name="TrajectorySaver")
    async def factory() -> AsyncIterator[TrajectorySaver]:
        async with TrajectorySaver(tmp_path / f"conf-{next(counter)}.db") as saver:
            yield saver

    await _passes(factory, capability)


@pytest.mark.parametrize("capability", sorted(c.value for c in Capability))
async def test_conformance_on_postgres(capability: str, pg_url: str) -> None:
    """The same suite on a real PostgreSQL database (one per module; the suite's threads
    are unique per test)."""

    @checkpointer_test(name="TrajectorySaver-postgres")
    async def factory() -> AsyncIterator[TrajectorySaver]:
        async with TrajectorySaver(pg_url) as saver:
            yield saver

    await _passes(factory, capability)


async def _passes(factory: object, capability: str) -> None:

    report = await validate(factory, capabilities={capability})  # type: ignore[arg-type]
    result = report.results[capability]
    assert result.detected, f"{capability} not detected as implemented"
    assert result.passed, "\n".join(result.failures)
    assert result.tests_failed == 0 and result.tests_passed > 0


def test_every_capability_is_covered() -> None:
    assert {c.value for c in BASE_CAPABILITIES | EXTENDED_CAPABILITIES} == {
        c.value for c in Capability
    }
