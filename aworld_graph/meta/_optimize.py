"""``optimize``: run an :class:`~aworld_graph.meta.search.Optimizer` and write what it found.

It sits above :mod:`.search` (the search) and :mod:`.report` (the files it writes), so the
two do not import each other.

>>> result = await optimize("workflows/math.yaml", shipped("arithmetic"),
...                         budget=Budget.parse("calls=400"), out=".")   # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from .report import write_outputs
from .result import OptimizeResult
from .search import Optimizer
from .tasks import TaskSet

__all__ = ["optimize", "optimize_sync"]


async def optimize(
    workflow: str | Path,
    tasks: TaskSet,
    *,
    out: str | Path | None = None,
    **options: Any,
) -> OptimizeResult:
    """Run an :class:`Optimizer` (``options`` are its fields); with ``out``, write the new card
    versions, the best workflow and the report there (see :mod:`.report`)."""
    result = await Optimizer(workflow=workflow, tasks=tasks, **options).run()
    if out is not None:
        result.outputs = write_outputs(result, out)
    return result


def optimize_sync(workflow: str | Path, tasks: TaskSet, **options: Any) -> OptimizeResult:
    """Blocking :func:`optimize` (for scripts; not inside a running event loop)."""
    return asyncio.run(optimize(workflow, tasks, **options))
