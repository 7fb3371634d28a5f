"""The Ray engine's driver side: worker actors, one call per task, retries, reading back.

Each task becomes one call of a worker actor's async ``run`` method (Ray queues the calls
and runs at most ``max_concurrency`` of them at a time on the actor's event loop); the
tasks are dealt round-robin, so each worker gets a share of the batch. Ray does the
scheduling; this module only deals the tasks, retries a task whose worker died on the next
worker, and reads each response back from the shared store when its summary arrives.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from .. import tracing
from .._run_impl import close_graph, open_graph, respond, run_config
from ..config import RunConfig
from ..errors import ConfigError, DefinitionError
from ..model import _SAMPLING_TEMPERATURE
from ..task import Task, TaskResponse
from ._specs import source_spec, task_spec

__all__ = ["run_on_ray", "shutdown"]


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "RunConfig(engine_name='ray') needs Ray: pip install 'aworld-graph[ray]'"
        ) from None
    return ray


def _store(saver: BaseCheckpointSaver[Any]) -> dict[str, Any]:
    from ..checkpoint import TrajectorySaver

    if not isinstance(saver, TrajectorySaver):
        raise ConfigError(
            f"the Ray engine needs a store every worker can open, and {type(saver).__name__} "
            "lives in this process; pass checkpointer=TrajectorySaver('postgresql://…') (or a "
            "SQLite file on a one-machine cluster)"
        )
    if saver.url:
        target = saver.url
    else:
        assert saver.path is not None, "a TrajectorySaver without a URL has a file"
        target = str(saver.path.resolve())
    # the driver creates (or checks) the store's tables before workers open it, so that they
    # do not all create them at once on a fresh database
    saver.get_tuple({"configurable": {"thread_id": "aworld-graph-engine", "checkpoint_ns": ""}})
    return {"target": target, "durability": saver.durability, "sqlite": saver.url is None}


@dataclass(eq=False)
class _Pool:
    """The worker actors of one configuration, kept for the next batch."""

    key: str
    conf: RunConfig
    actors: list[Any] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)

    def start_one(self, ray: Any) -> Any:
        from ._worker import Worker

        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        remote = ray.remote(Worker).options(
            num_cpus=min(1.0, cpus / self.conf.worker_num),
            max_concurrency=self.conf.max_concurrency,
            runtime_env=self.conf.runtime_env,
            max_restarts=0,
        )
        return remote.remote([os.getcwd()])

    async def start(self, ray: Any) -> None:
        self.actors = [self.start_one(ray) for _ in range(self.conf.worker_num)]
        self.pids = list(await asyncio.gather(*(a.pid.remote() for a in self.actors)))

    async def replace(self, ray: Any, slot: int, dead: Any) -> None:
        """A new actor in ``slot`` if ``dead`` is still there (the first failure replaces)."""
        if self.actors[slot] is dead:
            self.actors[slot] = fresh = self.start_one(ray)
            self.pids[slot] = -1
            self.pids[slot] = await fresh.pid.remote()


_pools: dict[str, _Pool] = {}


async def _pool(ray: Any, conf: RunConfig, store: dict[str, Any]) -> _Pool:
    if not ray.is_initialized():
        _pools.clear()
        if conf.address:
            ray.init(address=conf.address)
        else:  # a local cluster, reachable only from this machine
            ray.init(include_dashboard=False, _node_ip_address="127.0.0.1")
    if store["sqlite"] and sum(1 for n in ray.nodes() if n.get("Alive")) > 1:
        raise ConfigError(
            f"the store {store['target']} is a SQLite file, and this Ray cluster spans "
            "machines that do not share it; use a PostgreSQL store "
            "(TrajectorySaver('postgresql://…') or --db postgresql://…)"
        )
    key = json.dumps([conf.worker_num, conf.max_concurrency, conf.runtime_env], sort_keys=True)
    pool = _pools.get(key)
    if pool is None:
        for other in list(_pools.values()):  # idle actors of another set-up hold CPUs
            for actor in other.actors:
                ray.kill(actor)
        _pools.clear()
        pool = _Pool(key=key, conf=conf)
        await pool.start(ray)
        _pools[key] = pool
    return pool


def shutdown() -> None:
    """Stop the Ray worker actors this process started (they are kept between batches)."""
    if "ray" not in sys.modules:
        return
    ray = sys.modules["ray"]
    if ray.is_initialized():
        for pool in _pools.values():
            for actor in pool.actors:
                ray.kill(actor)
    _pools.clear()


async def _read_back(
    task: Task, summary: dict[str, Any], saver: Any, started: float
) -> TaskResponse:
    """The task's response from the store, as the local engine would have made it."""
    if summary["status"] == "busy":
        return TaskResponse(
            id=task.id, success=False, msg=summary.get("msg"), status="busy", thread_id=task.id
        )
    graph = open_graph(task)
    try:
        compiled = graph.compile(saver)
        config = run_config(task, graph)
        # the worker's map of supersteps to checkpoints spares the walk over the thread
        chain = {int(step): c for step, c in (summary.get("chain") or {}).items()}
        return await respond(
            task, compiled, config, started=started, error=summary.get("error"), chain=chain
        )
    finally:
        await close_graph(graph)


async def run_on_ray(
    tasks: Sequence[Task],
    conf: RunConfig,
    saver: BaseCheckpointSaver[Any],
    tick: Callable[[TaskResponse], None] | None = None,
) -> dict[str, TaskResponse]:
    """Run ``tasks`` on Ray worker actors; ``{task.id: response}`` read back from ``saver``.

    Every task is turned into a spec first, so a task that cannot be rebuilt on a worker is
    an error before anything is sent. ``tick`` is called with each response as it arrives."""
    ray = _ray()
    from ray.exceptions import RayActorError

    store = _store(saver)
    sources: dict[int, dict[str, Any]] = {}
    specs: list[dict[str, Any]] = []
    temperature = _SAMPLING_TEMPERATURE.get()
    for task in tasks:
        obj = task.agent if task.agent is not None else task.swarm
        if id(obj) not in sources:
            try:
                sources[id(obj)] = source_spec(obj)
            except DefinitionError as exc:
                raise DefinitionError(f"task {task.id}: {exc}") from None
        specs.append({**task_spec(task, sources[id(obj)]), "temperature": temperature})
    pool = await _pool(ray, conf, store)
    refs: dict[str, Any] = {}
    retried: dict[str, list[str]] = {}

    async def one(index: int, task: Task, spec: dict[str, Any]) -> TaskResponse:
        started = time.perf_counter()
        slot = index % len(pool.actors)
        summary: dict[str, Any] | None = None
        for _attempt in range(conf.max_retries + 1):
            actor, pid = pool.actors[slot], pool.pids[slot]
            traced = {**spec, "trace": tracing.inject()}  # the worker's spans join this trace
            refs[task.id] = ref = actor.run.remote(traced, store)
            try:
                summary = await ref
                break
            except RayActorError as exc:
                await pool.replace(ray, slot, actor)
                slot = (slot + 1) % len(pool.actors)
                reason = (
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                )
                retried.setdefault(task.id, []).append(f"worker pid {pid} died ({reason[:200]})")
                spec = {**spec, "new": False, "retry": True}
                summary = None
        if summary is None:
            summary = {
                "status": "error",
                "error": f"its worker died {conf.max_retries + 1} times: "
                + "; ".join(retried[task.id]),
            }
        if summary["status"] in ("rejected", "crashed"):
            raise DefinitionError(
                f"task {task.id}: the Ray worker (host {summary.get('host')}, pid "
                f"{summary.get('pid')}) could not run it: {summary['error']}"
            )
        if task.id in retried:
            resumed = summary.get("resumed_from")
            retried[task.id][-1] += (
                f"; resumed on worker pid {summary.get('pid')} from checkpoint {resumed}"
                if resumed
                else f"; started again on worker pid {summary.get('pid')} (it had not begun)"
            )
        response = await _read_back(task, summary, saver, started)
        response.retried = list(retried.get(task.id, []))
        if tick is not None:
            tick(response)
        return response

    jobs = [
        asyncio.ensure_future(one(i, t, s))
        for i, (t, s) in enumerate(zip(tasks, specs, strict=True))
    ]
    try:
        responses = await asyncio.gather(*jobs)
    except BaseException:  # Ctrl-C, cancellation or an error: stop what is still running
        for job in jobs:
            job.cancel()
        for ref in refs.values():
            ray.cancel(ref)
        await asyncio.gather(*jobs, return_exceptions=True)
        raise
    return {r.id: r for r in responses}
