"""The Ray engine's driver side: worker actors, one streaming call per worker, retries.

The batch is dealt round-robin into one chunk per worker actor and each chunk is one call
of the actor's async generator ``stream``: the worker runs its chunk on its event loop, at
most ``max_concurrency`` runs at a time, and yields each run's response as the run ends (the
responses of runs that end together travel together). Ray does the scheduling and the
transport; this module deals the chunks, deals again what a dead worker's chunk left over
the live workers, and hands each response to the caller as it arrives.
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
from ..config import RunConfig
from ..errors import ConfigError, DefinitionError
from ..model import sampling_temperature_now
from ..run import GraphRun
from ..task import Task, TaskResponse
from ._specs import source_spec, task_spec

__all__ = ["run_on_ray", "shutdown"]


_ONE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch, read once when ``ray`` is imported, that makes this process take 127.0.0.1
as its node's address instead of finding the machine's outward address (a connection
attempt towards 8.8.8.8, and a warning on stderr where there is no route)."""


def _ray(*, local: bool) -> Any:
    """``ray``, imported. ``local``: this process will start a cluster of its own, on this
    machine only. Where this process imports Ray first, Ray is then imported with its node
    address fixed to 127.0.0.1, and with its token authentication on, as Ray's default for a
    new local cluster is, but without the warning that announces that default."""
    try:
        if local and "ray" not in sys.modules and _ONE_MACHINE not in os.environ:
            os.environ.setdefault("RAY_AUTH_MODE", "token")  # Ray sets it so itself, loudly
            os.environ[_ONE_MACHINE] = "0"
            try:
                import ray
            finally:
                del os.environ[_ONE_MACHINE]  # not inherited by what this process starts
        else:
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
            max_concurrency=_CALLS,
            runtime_env=self.conf.runtime_env,
            max_restarts=0,
            scheduling_strategy="SPREAD",  # over the cluster's machines, not packed on one
        )
        return remote.remote([os.getcwd()], self.conf.max_concurrency)

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

_CALLS = 64
"""Calls an actor takes at once (the streams of the chunks it holds, its pid); its runs are
limited by the worker's own gate, ``max_concurrency`` over all of them."""


async def _pool(ray: Any, conf: RunConfig, store: dict[str, Any]) -> _Pool:
    if not ray.is_initialized():
        _pools.clear()
        if conf.address:
            ray.init(address=conf.address)
        else:  # a local cluster, reachable only from this machine
            ray.init(include_dashboard=False, _node_ip_address="127.0.0.1")
    machines = sorted({str(n.get("NodeManagerAddress")) for n in ray.nodes() if n.get("Alive")})
    if store["sqlite"] and len(machines) > 1:  # nodes on one machine share its disk
        raise ConfigError(
            f"the store {store['target']} is a SQLite file, and this Ray cluster spans "
            f"{len(machines)} machines ({', '.join(machines)}) whose workers cannot all write "
            "to it; use a PostgreSQL store every machine reaches "
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


async def _read_back(task: Task, error: str, saver: Any, started: float) -> TaskResponse:
    """The response of a task no worker could finish, from the store: its state at its last
    checkpoint and ``error``, as the local engine reports a run that failed."""
    async with GraphRun(task, saver) as run:
        return await run.response(error=error, started=started)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


async def run_on_ray(
    tasks: Sequence[Task],
    conf: RunConfig,
    saver: BaseCheckpointSaver[Any],
    tick: Callable[[TaskResponse], None] | None = None,
) -> dict[str, TaskResponse]:
    """Run ``tasks`` on Ray worker actors; ``{task.id: response}``, in the order of ``tasks``.

    Every task is turned into a spec first, so a task that cannot be rebuilt on a worker is
    an error before anything is sent. The batch is dealt round-robin into one chunk per
    worker, each sent as one streaming call; the worker yields each run's response as the
    run ends. When a worker dies, what its chunk had not finished is dealt again over the
    workers (a fresh actor takes the dead one's place) and resumes from its last checkpoint.
    ``tick`` is called with each response as it arrives."""
    ray = _ray(local=not conf.address and not os.environ.get("RAY_ADDRESS"))
    from ray.exceptions import RayActorError

    store = _store(saver)
    sources: dict[int, dict[str, Any]] = {}
    specs: list[dict[str, Any]] = []
    temperature = sampling_temperature_now()
    for task in tasks:
        obj = task.source
        if id(obj) not in sources:
            try:
                sources[id(obj)] = source_spec(obj)
            except DefinitionError as exc:
                raise DefinitionError(f"task {task.id}: {exc}") from None
        specs.append({**task_spec(task, sources[id(obj)]), "temperature": temperature})
    pool = await _pool(ray, conf, store)
    for task in tasks:  # as after a local run: the thread exists from now on
        task.new_thread = False
    index = {task.id: i for i, task in enumerate(tasks)}
    responses: list[TaskResponse | None] = [None] * len(tasks)
    retried: dict[str, list[str]] = {}
    deaths = [0] * len(tasks)
    started = time.perf_counter()
    calls: set[Any] = set()  # the streaming calls in flight
    jobs: set[asyncio.Future[None]] = set()

    def settle(i: int, response: TaskResponse) -> None:
        response.retried = list(retried.get(tasks[i].id, []))
        responses[i] = response
        if tick is not None:
            tick(response)

    def arrived(summary: dict[str, Any]) -> None:
        i = index[summary["id"]]
        task = tasks[i]
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
        settle(i, summary["response"])

    async def chunk(slot: int, share: list[int]) -> None:
        """Run the tasks ``share`` on the worker in ``slot``; deal again what its death left."""
        actor, pid = pool.actors[slot], pool.pids[slot]
        trace = tracing.inject()  # the workers' spans join this trace
        call = actor.stream.remote([{**specs[i], "trace": trace} for i in share], store)
        calls.add(call)
        left = set(share)
        try:
            async for ref in call:
                for summary in await ref:
                    left.discard(index[summary["id"]])
                    arrived(summary)
        except RayActorError as exc:
            await pool.replace(ray, slot, actor)
            again = []
            for i in sorted(left):
                note = f"worker pid {pid} died ({_reason(exc)})"
                retried.setdefault(tasks[i].id, []).append(note)
                deaths[i] += 1
                if deaths[i] > conf.max_retries:
                    error = f"its worker died {deaths[i]} times: " + "; ".join(retried[tasks[i].id])
                    settle(i, await _read_back(tasks[i], error, saver, started))
                else:
                    specs[i] = {**specs[i], "new": False, "retry": True}
                    again.append(i)
            deal(again, slot + 1)
        finally:
            calls.discard(call)

    def deal(indices: list[int], first: int) -> None:
        n = len(pool.actors)
        for k in range(n):
            if indices[k::n]:
                jobs.add(asyncio.ensure_future(chunk((first + k) % n, indices[k::n])))

    deal(list(range(len(tasks))), 0)
    try:
        while jobs:
            done, _ = await asyncio.wait(jobs, return_when=asyncio.FIRST_EXCEPTION)
            for job in done:
                jobs.discard(job)
                job.result()
    except BaseException:  # Ctrl-C, cancellation or an error: stop what is still running
        for job in jobs:
            job.cancel()
        for call in list(calls):
            ray.cancel(call)
        await asyncio.gather(*jobs, return_exceptions=True)
        raise
    assert all(r is not None for r in responses), "every task got a response"
    return {r.id: r for r in responses if r is not None}
