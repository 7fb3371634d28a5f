"""Shared by the meta tests: the synthetic benchmark's settings and one call to run it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aworld_graph.meta import Budget, OptimizeResult, default_operators, optimize
from aworld_graph.meta import synthetic as syn

ROOT = Path(__file__).resolve().parents[2]
BUDGET = Budget(llm_calls=2500, iterations=14)
"""The optimizer's budget in the synthetic benchmark."""
OPERATORS = ("rewrite_prompt", "demos", "topology")


async def run_synthetic(
    directory: Path, names: tuple[str, ...] = OPERATORS, **options: Any
) -> OptimizeResult:
    """Optimize the synthetic seed in ``directory`` (its database is ``directory/runs.db``)."""
    options.setdefault("model", syn.student_model())
    options.setdefault("budget", BUDGET)
    return await optimize(
        syn.write_seed(directory),
        syn.synthetic_tasks(),
        operators=default_operators(syn.teacher_model(), names=names),
        db=directory / "runs.db",
        **options,
    )
