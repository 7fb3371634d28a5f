"""Scale-out: a batch on the local engine vs on Ray with 2 worker actors, same store.

Batches of one-LLM-call tasks, the call simulated by an ``asyncio.sleep`` in a
``FunctionModel`` (bench/_scale_app.py): 1,000 tasks at 5 ms (the local engine is bound by
its one core: LangGraph, the agent loop and checkpointing cost more than the call) and 200 at
50 ms. *ours* is Ray's throughput (tasks/s), *peer* the local engine's, on a fresh SQLite
store each, with the same runs at once in all: 32 (local: 32; Ray: 2 workers x 16), where
the local engine's one core is saturated (it ran 351 tasks/s at 16, 360 at 32, 364 at 64),
and, reported without a goal, 16 (the set-up of earlier releases: Ray's two workers, 8 runs
each, then idle a quarter of the time, waiting for the file's lock). Goal for the 5 ms batch
at 32: ``>= 1.6x`` on 2 cores.

A third side, *two processes*, runs the batch without Ray: two plain processes started
together, each the local engine with half the runs at once on half of it, writing the same file. It
is what any two-worker engine could reach on this store and machine, so the gap between it
and Ray is Ray's own cost (its row has no goal).

Ray starts a local cluster on 127.0.0.1 (no dashboard), and the workers of each set-up
before its timed batches (a warm-up batch each). The two sides take turns, 3 rounds (``--quick``: 1), and each
row gives the medians. The note says, per task, the wall time of each side and the CPU time
it used: the local engine's process, and on Ray the driver and the two workers; with the
load average, since the machine may be shared (all of one session's processes share one
CPU share of the kernel's scheduler: the driver, Ray and its workers together get no more
CPU than the local engine's one process when other sessions keep every core busy).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import statistics
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
    engine,
)

app = importlib.import_module("bench._scale_app")


def _cpu_seconds(pids: list[int]) -> list[float]:
    """CPU time (user + system) each of ``pids`` has used so far."""
    import psutil

    return [sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids]


def _worker_pids(conf: RunConfig) -> list[int]:
    """The pids of the workers of ``conf``'s set-up, if they have started."""
    from aworld_graph.engine._ray import _pools

    return [pid for pool in _pools.values() if pool.conf == conf for pid in pool.pids]


def _tasks(n: int, latency: float, tag: str) -> list[Task]:
    return [Task(input=f"{latency} task {i}", agent=app.agent, id=f"{tag}-{i}") for i in range(n)]


async def _batch(n: int, latency: float, conf: RunConfig, db: Path, tag: str) -> dict[str, Any]:
    """One batch: its wall time and the CPU seconds of this process and of the workers."""
    saver = TrajectorySaver(db)
    tasks = _tasks(n, latency, tag)
    workers = _worker_pids(conf) if conf.engine_name == "ray" else []
    before, own = _cpu_seconds(workers), time.process_time()
    started = time.perf_counter()
    out = await Runners.run_task(tasks, checkpointer=saver, run_conf=conf)
    seconds = time.perf_counter() - started
    own, after = time.process_time() - own, _cpu_seconds(workers)
    bad = [r.id for r in out.values() if not r.success]
    if bad:
        raise RuntimeError(f"{len(bad)} runs failed, e.g. {out[bad[0]].msg}")
    saver.close()
    return {
        "wall": seconds,
        "driver": own,
        "workers": [b - a for a, b in zip(before, after, strict=True)],
    }


def _half(db: str, tag: str, n: int, latency: float, runs: int, ready: Any, results: Any) -> None:
    """One of the two plain processes (this module imported afresh: ``app`` is there): a
    warm-up, then its half of the batch at the signal."""

    async def batch(saver: TrajectorySaver, prefix: str, count: int) -> None:
        tasks = _tasks(count, latency, prefix)
        await Runners.run_task(tasks, checkpointer=saver, run_conf=RunConfig(max_concurrency=runs))

    asyncio.run(batch(TrajectorySaver(f"{db}.warm-{tag}"), f"warm-{tag}", 20))
    saver = TrajectorySaver(db)
    ready.wait()
    started, own = time.perf_counter(), time.process_time()
    asyncio.run(batch(saver, tag, n))
    results.put((time.perf_counter() - started, time.process_time() - own))


def _two_processes(n: int, latency: float, db: Path, tag: str, runs: int) -> dict[str, Any]:
    """The batch split over two plain processes on one store (no Ray): the slower one's wall
    time, and the CPU seconds of both."""
    import multiprocessing

    TrajectorySaver(db).migrate()  # the tables exist before both open the file
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Barrier(2, timeout=300), ctx.Queue()
    procs = [
        ctx.Process(
            target=_half, args=(str(db), f"{tag}-{k}", n // 2, latency, runs, ready, results)
        )
        for k in range(2)
    ]
    try:
        for proc in procs:
            proc.start()
        done = [results.get(timeout=600) for _ in procs]
    finally:  # a half that failed leaves no process behind
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return {"wall": max(w for w, _ in done), "driver": sum(c for _, c in done), "workers": []}


def _median(batches: list[dict[str, Any]], key: str) -> float:
    return statistics.median(b[key] for b in batches)


def _ms(seconds: float, n: int) -> str:
    return f"{seconds / n * 1000:.2f}"


def run(quick: bool = False) -> list[dict[str, Any]]:
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # (tasks, latency, runs at once in all: local; Ray and the two processes half each, goal)
    rows_wanted = [(1000, 0.005, 32, ">= 1.6x"), (1000, 0.005, 16, None), (200, 0.05, 32, None)]
    if quick:
        rows_wanted = [(200, 0.005, 32, ">= 1.6x"), (50, 0.05, 32, None)]
    rounds = 1 if quick else 3
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
        for n, latency, total, goal in rows_wanted:
            ms = int(latency * 1000)
            local = RunConfig(engine_name="local", max_concurrency=total)
            on_ray = RunConfig(engine_name="ray", worker_num=2, max_concurrency=total // 2)
            # the workers of this set-up started (a warm-up batch) before the timed batches
            asyncio.run(_batch(20, 0.005, on_ray, tmp / "warm.db", f"warm-ray-{total}"))
            start_up = time.perf_counter() - started
            asyncio.run(_batch(20, 0.005, local, tmp / "warm.db", f"warm-local-{total}"))
            sides: dict[str, list[dict[str, Any]]] = {"local": [], "ray": [], "procs": []}
            loads = []
            for r in range(rounds):
                for side, conf in (("local", local), ("ray", on_ray)):
                    db = tmp / f"{side}-{ms}-{total}-{r}.db"
                    tag = f"{side}{ms}-{total}"
                    sides[side].append(asyncio.run(_batch(n, latency, conf, db, tag)))
                db = tmp / f"procs-{ms}-{total}-{r}.db"
                sides["procs"].append(
                    _two_processes(n, latency, db, f"procs{ms}-{total}", total // 2)
                )
                loads.append(os.getloadavg()[0])
            started = time.perf_counter()

            t_local, t_ray = _median(sides["local"], "wall"), _median(sides["ray"], "wall")
            workers = [
                statistics.median(b["workers"][k] for b in sides["ray"])
                for k in range(len(sides["ray"][0]["workers"]))
            ]
            what = f"{n} tasks, {ms} ms LLM call, {total} runs at once"
            rows.append(
                {
                    "name": f"{what}: Ray 2 workers x {total // 2} vs local, tasks/s",
                    "ours": round(n / t_ray, 1),
                    "peer": round(n / t_local, 1),
                    "ratio": round(t_local / t_ray, 2),
                    "goal": goal,
                    "note": (
                        f"median of {rounds}: wall per task {_ms(t_ray, n)} ms vs "
                        f"{_ms(t_local, n)} ms; CPU per task: local {_ms(_median(sides['local'], 'driver'), n)}"
                        f" ms, Ray driver {_ms(_median(sides['ray'], 'driver'), n)} ms + workers "
                        + " + ".join(_ms(w, n) for w in workers)
                        + f" ms; Ray start-up (cluster or new workers + warm-up) {start_up:.1f} s; "
                        f"load average {statistics.median(loads):.1f} on {os.cpu_count()} cores"
                    ),
                }
            )
            t_procs = _median(sides["procs"], "wall")
            rows.append(
                {
                    "name": f"{what}: 2 plain processes on one file (no Ray) vs local, tasks/s",
                    "ours": round(n / t_procs, 1),
                    "peer": round(n / t_local, 1),
                    "ratio": round(t_local / t_procs, 2),
                    "goal": None,
                    "note": (
                        f"median of {rounds}: wall per task {_ms(t_procs, n)} ms, CPU per task "
                        f"{_ms(_median(sides['procs'], 'driver'), n)} ms (both processes); Ray "
                        f"reached {t_procs / t_ray:.2f} of it"
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
