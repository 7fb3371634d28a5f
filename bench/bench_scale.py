"""Scale-out: a batch on the local engine vs on Ray with 2 worker actors, same store.

Two batches of one-LLM-call tasks, the call simulated by an ``asyncio.sleep`` in a
``FunctionModel`` (bench/_scale_app.py): 1,000 tasks at 5 ms (the local engine is bound by
its one core: LangGraph, the agent loop and checkpointing cost more than the call) and 200 at
50 ms. *ours* is Ray's throughput (tasks/s), *peer* the local engine's, on a fresh SQLite
store each, with the same concurrency in total (local: 16 runs at once; Ray: 2 workers x 8).
Goal for the 5 ms batch: ``>= 1.6x`` on 2 cores. Ray starts a local cluster on 127.0.0.1
(no dashboard) and its workers once, before the timed batches (a warm-up batch each); the
note gives that start-up and the time per task on each side.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.chdir(ROOT)  # Ray workers start here, so they import bench._scale_app as the driver does

from aworld_graph import (  # noqa: E402
    RunConfig,
    Runners,
    Task,
    TrajectorySaver,
    engine,  # noqa: E402
)

app = importlib.import_module("bench._scale_app")


async def _batch(n: int, latency: float, conf: RunConfig, db: Path, tag: str) -> float:
    saver = TrajectorySaver(db)
    tasks = [Task(input=f"{latency} task {i}", agent=app.agent, id=f"{tag}-{i}") for i in range(n)]
    started = time.perf_counter()
    out = await Runners.run_task(tasks, checkpointer=saver, run_conf=conf)
    seconds = time.perf_counter() - started
    bad = [r.id for r in out.values() if not r.success]
    if bad:
        raise RuntimeError(f"{len(bad)} runs failed, e.g. {out[bad[0]].msg}")
    saver.close()
    return seconds


def run(quick: bool = False) -> list[dict[str, Any]]:
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    sizes = [(200, 0.005), (50, 0.05)] if quick else [(1000, 0.005), (200, 0.05)]
    local = RunConfig(engine_name="local", max_concurrency=16)
    on_ray = RunConfig(engine_name="ray", worker_num=2, max_concurrency=8)
    tmp = Path(tempfile.mkdtemp(prefix="bs-", dir="/tmp"))
    rows: list[dict[str, Any]] = []
    try:
        started = time.perf_counter()
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            _temp_dir=str(tmp / "ray"),
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
        )
        asyncio.run(_batch(20, 0.005, on_ray, tmp / "warm.db", "warm-ray"))
        start_up = time.perf_counter() - started
        asyncio.run(_batch(20, 0.005, local, tmp / "warm.db", "warm-local"))
        for n, latency in sizes:
            ms = int(latency * 1000)
            t_local = asyncio.run(_batch(n, latency, local, tmp / f"local-{ms}.db", f"l{ms}"))
            t_ray = asyncio.run(_batch(n, latency, on_ray, tmp / f"ray-{ms}.db", f"r{ms}"))
            rows.append(
                {
                    "name": f"{n} tasks, {ms} ms LLM call: Ray 2 workers vs local, tasks/s",
                    "ours": round(n / t_ray, 1),
                    "peer": round(n / t_local, 1),
                    "ratio": round(t_local / t_ray, 2),
                    "goal": ">= 1.6x" if ms == 5 else None,
                    "note": (
                        f"wall {t_ray:.2f} s vs {t_local:.2f} s; per task {t_ray / n * 1000:.2f} ms"
                        f" vs {t_local / n * 1000:.2f} ms; Ray start-up (cluster + 2 workers + "
                        f"warm-up) {start_up:.1f} s"
                    ),
                }
            )
    finally:
        engine.shutdown()
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(row)
