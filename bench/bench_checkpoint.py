"""TrajectorySaver against langgraph-checkpoint-sqlite, same graphs, same process.

    python bench/bench_checkpoint.py            # full sizes
    python bench/bench_checkpoint.py --quick    # seconds

Rows: ``name``, ``ours``, ``peer``, ``ratio`` (ours / peer) and ``goal`` (the ratio to beat).

* db size: file size (WAL checkpointed) after a long chat thread.
* per-step cost: what the saver adds per step of a 100-node chain — wall time with the saver
  minus wall time with a saver that stores nothing (so LangGraph's own checkpointing work,
  the same for every saver, is not counted). LangGraph saves from background threads while
  the next step runs, so this includes what the saver's work costs the graph's thread.
  Measured at LangGraph's default ``durability="async"`` (the goals), and reported without a
  goal at ``durability="sync"``, where LangGraph waits for every save before the next step.
* replayed saver calls (reported, no goal): the put/put_writes calls of that chain, recorded
  once and replayed in one thread — the savers' own cost, without a graph sharing the GIL.
* list(): iterate every checkpoint of one long thread; and iterate it reading each tuple's
  values, metadata and pending writes (ours decodes a page of tuples on first use, so the
  first row is what a history walk for ids and configs costs, the second a full read).
* get_tuple(latest): the long thread against a 10-checkpoint thread in the same file ("peer"
  is the short thread here: the goal is the same speed).
* concurrent runs: wall time of N concurrent runs with a 50 ms "LLM call", checkpoints on
  vs no checkpointer.

Times are the best of ``Sizes.repeats`` runs, taken in turn (ours, peer, ours, …); the chain
is timed one run at a time per saver, in turn, ``chain_runs × repeats`` runs each.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import operator
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from aworld_graph.checkpoint import TrajectorySaver


@dataclass(frozen=True)
class Sizes:
    """Workload sizes."""

    turns: int = 200
    """Turns of the message thread (a)."""
    chain: int = 100
    """Nodes of the chain graph (b)."""
    chain_runs: int = 5
    """Runs of the chain graph per saver and repeat (b)."""
    history: int = 10_000
    """Checkpoints of the history thread (c)."""
    concurrent: int = 1_000
    """Concurrent runs (d)."""
    history_messages: int = 2_000
    """Checkpoints of the history thread whose message list grows each step (c')."""
    repeats: int = 3
    """Repetitions of the timed workloads; the best time counts."""


QUICK = Sizes(
    turns=60,
    chain=100,
    chain_runs=2,
    history=1_000,
    concurrent=200,
    history_messages=300,
    repeats=1,
)


class ChatState(TypedDict):
    messages: Annotated[list, add_messages]


class DictChatState(TypedDict):
    messages: Annotated[list, operator.add]


class ChainState(TypedDict):
    count: int
    messages: Annotated[list, operator.add]


class LoopState(TypedDict):
    n: int


class GrowState(TypedDict):
    n: int
    messages: Annotated[list, operator.add]


def _sqlite_saver(path: Path, stack: ExitStack) -> SqliteSaver:
    conn = stack.enter_context(sqlite3.connect(str(path), check_same_thread=False))
    return SqliteSaver(conn)


def _ours(path: Path, stack: ExitStack, durability: str = "normal") -> TrajectorySaver:
    return stack.enter_context(TrajectorySaver(path, durability=durability))  # type: ignore[arg-type]


def _file_size(path: Path) -> int:
    with sqlite3.connect(str(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


# -- (a) database size of a long conversation -------------------------------------------------


def _chat_graph(state: type, saver: BaseCheckpointSaver) -> Any:
    reply = "Sure. " + "Here is a detailed answer with several sentences of content. " * 5

    def chat(s: Any) -> dict[str, Any]:
        return {"messages": [{"role": "assistant", "content": f"{reply} ({len(s['messages'])})"}]}

    g = StateGraph(state)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    g.add_edge("chat", END)
    return g.compile(checkpointer=saver)


def bench_size(tmp: Path, sizes: Sizes, state: type, label: str) -> dict[str, Any]:
    question = "Please explain the following topic in some depth, with examples: " * 2
    out: dict[str, int] = {}
    for name, factory in (("ours", _ours), ("peer", _sqlite_saver)):
        path = tmp / f"size-{label}-{name}.db"
        with ExitStack() as stack:
            app = _chat_graph(state, factory(path, stack))
            cfg = {"configurable": {"thread_id": "chat"}}
            for i in range(sizes.turns):
                app.invoke({"messages": [{"role": "user", "content": f"{question} #{i}"}]}, cfg)
        out[name] = _file_size(path)
    return _row(f"db size, {sizes.turns}-turn thread ({label}), bytes", out, 0.1)


# -- (b) per-step overhead on a chain -----------------------------------------------------------


def _chain_graph(n: int, saver: BaseCheckpointSaver | None) -> Any:
    g = StateGraph(ChainState)

    def make(i: int) -> Callable[[ChainState], dict[str, Any]]:
        def node(s: ChainState) -> dict[str, Any]:
            return {"count": s["count"] + 1, "messages": [{"role": "tool", "content": f"n{i}"}]}

        return node

    g.add_sequence([(f"n{i}", make(i)) for i in range(n)])
    g.add_edge(START, "n0").add_edge(f"n{n - 1}", END)
    return g.compile(checkpointer=saver)


def _time_sync(app: Any, thread: str, durability: str | None = None) -> float:
    start = time.perf_counter()
    config = {"configurable": {"thread_id": thread}}
    app.invoke({"count": 0, "messages": []}, config, durability=durability)
    return time.perf_counter() - start


async def _time_async(app: Any, thread: str) -> float:
    start = time.perf_counter()
    await app.ainvoke({"count": 0, "messages": []}, {"configurable": {"thread_id": thread}})
    return time.perf_counter() - start


class NoopSaver(InMemorySaver):
    """Stores nothing: measures what LangGraph itself spends on checkpointing."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        conf = config["configurable"]
        return {
            "configurable": {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": conf.get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        return None


def bench_chain(tmp: Path, sizes: Sizes) -> list[dict[str, Any]]:
    """Checkpointing cost per step: (time with the saver − time with a no-op saver) / steps.

    Every saver runs the chain once in turn, ``chain_runs × repeats`` times; the fastest run of
    each counts (this box drifts by tens of percent over a minute, so savers timed side by
    side, one run at a time, compare better than blocks of runs)."""
    n, runs = sizes.chain, sizes.chain_runs * sizes.repeats
    with ExitStack() as stack:
        apps = {
            name: _chain_graph(n, saver)
            for name, saver in {
                "noop": NoopSaver(),
                "ours": _ours(tmp / "c-o.db", stack),
                "ours_full": _ours(tmp / "c-of.db", stack, "full"),
                "peer": _sqlite_saver(tmp / "c-p.db", stack),
            }.items()
        }
        best: dict[str, float] = {}
        waited: dict[str, float] = {}  # LangGraph's durability="sync": each save waited for
        for run in range(runs):
            for name, app in apps.items():
                t = _time_sync(app, f"r{run}")
                best[name] = min(best.get(name, t), t)
                t = _time_sync(app, f"w{run}", "sync")
                waited[name] = min(waited.get(name, t), t)

    async def run_async() -> dict[str, float]:
        async with (
            AsyncSqliteSaver.from_conn_string(str(tmp / "ca-p.db")) as peer,
            TrajectorySaver(tmp / "ca-o.db") as ours,
            TrajectorySaver(tmp / "ca-of.db", durability="full") as ours_full,
        ):
            savers = {"noop": NoopSaver(), "ours": ours, "ours_full": ours_full, "peer": peer}
            apps = {name: _chain_graph(n, saver) for name, saver in savers.items()}
            fastest: dict[str, float] = {}
            for run in range(runs):
                for name, app in apps.items():
                    t = await _time_async(app, f"r{run}")
                    fastest[name] = min(fastest.get(name, t), t)
            return fastest

    best_async = asyncio.run(run_async())
    sync = {k: (v - best["noop"]) / n * 1e6 for k, v in best.items() if k != "noop"}
    sync_waited = {k: (v - waited["noop"]) / n * 1e6 for k, v in waited.items() if k != "noop"}
    asyn = {k: (v - best_async["noop"]) / n * 1e6 for k, v in best_async.items() if k != "noop"}
    return [
        _row(f"sync per-step cost, {n}-node chain, us (normal vs peer)", sync, 0.5),
        _row(f"sync per-step cost, {n}-node chain, us (full vs peer)", _full(sync), 1.0),
        # reported, no goal: LangGraph's durability="sync" waits for every save (nothing
        # can be queued), not the default the goals are set for
        _row("sync per-step cost, durability=sync, us (normal vs peer)", sync_waited, None),
        _row("sync per-step cost, durability=sync, us (full vs peer)", _full(sync_waited), None),
        _row(f"async per-step cost, {n}-node chain, us (normal vs peer)", asyn, 0.5),
        _row(f"async per-step cost, {n}-node chain, us (full vs peer)", _full(asyn), 1.0),
    ]


class RecordingSaver(NoopSaver):
    """Stores nothing; keeps a copy of every put/put_writes call to replay on real savers."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.calls.append(("put", copy.deepcopy((config, checkpoint, metadata, new_versions))))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(("writes", copy.deepcopy((config, writes, task_id, task_path))))


def _replay(
    saver: BaseCheckpointSaver, calls: list[tuple[str, tuple[Any, ...]]], runs: int
) -> float:
    start = time.perf_counter()
    for r in range(runs):
        for kind, (config, *rest) in calls:
            conf = {"configurable": {**config["configurable"], "thread_id": f"replay-{r}"}}
            if kind == "put":
                saver.put(conf, *rest)
            else:
                saver.put_writes(conf, *rest)
    return time.perf_counter() - start


def bench_replay(tmp: Path, sizes: Sizes) -> list[dict[str, Any]]:
    """The savers' own cost per step: the put/put_writes calls of a 100-node chain run,
    recorded once and replayed in one thread (no graph, no GIL shared with it)."""
    recorder = RecordingSaver()
    _chain_graph(sizes.chain, recorder).invoke(
        {"count": 0, "messages": []}, {"configurable": {"thread_id": "rec"}}, durability="sync"
    )
    steps = sum(1 for kind, _ in recorder.calls if kind == "put") * sizes.chain_runs
    best: dict[str, float] = {}
    for rep in range(sizes.repeats):
        with ExitStack() as stack:
            savers: dict[str, BaseCheckpointSaver] = {
                "ours": _ours(tmp / f"r-o{rep}.db", stack),
                "ours_full": _ours(tmp / f"r-of{rep}.db", stack, "full"),
                "peer": _sqlite_saver(tmp / f"r-p{rep}.db", stack),
            }
            for name, saver in savers.items():
                t = _replay(saver, recorder.calls, sizes.chain_runs) / steps * 1e6
                best[name] = min(best.get(name, t), t)
    return [  # reported, no goal: the savers' own cost, one call after another
        _row(
            f"replayed saver calls, {sizes.chain}-node chain, us/step (normal vs peer)", best, None
        ),
        _row(
            f"replayed saver calls, {sizes.chain}-node chain, us/step (full vs peer)",
            _full(best),
            None,
        ),
    ]


def _full(values: dict[str, float]) -> dict[str, float]:
    return {"ours": values["ours_full"], "peer": values["peer"]}


# -- (c) history of a long thread ---------------------------------------------------------------


def _loop_graph(n: int, saver: BaseCheckpointSaver, grow: bool = False) -> Any:
    """One node looping ``n`` times; with ``grow`` it appends a message every step."""

    def step(s: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"n": s["n"] + 1}
        if grow:
            out["messages"] = [{"role": "assistant", "content": f"step {s['n']} " + "x" * 40}]
        return out

    g = StateGraph(GrowState if grow else LoopState)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["n"] >= n else "step")
    return g.compile(checkpointer=saver)


def _walk(saver: BaseCheckpointSaver, read: bool) -> int:
    """Iterate one thread's history; with ``read``, use every tuple's state and writes."""
    count = 0
    for t in saver.list({"configurable": {"thread_id": "long"}}):
        if read:
            _ = (t.checkpoint["channel_values"], t.metadata["step"], t.pending_writes)
        count += 1
    return count


def bench_history(tmp: Path, sizes: Sizes, grow: bool = False) -> list[dict[str, Any]]:
    """Time to list every checkpoint of one long thread (best of ``repeats``): walking the
    tuples, and walking them reading each one's values, metadata and pending writes."""
    n = sizes.history_messages if grow else sizes.history
    out: dict[bool, dict[str, float]] = {False: {}, True: {}}
    count: dict[str, int] = {}
    with ExitStack() as stack:
        savers = {
            "ours": _ours(tmp / f"h-o{grow}.db", stack),
            "peer": _sqlite_saver(tmp / f"h-p{grow}.db", stack),
        }
        state: dict[str, Any] = {"n": 0, "messages": []} if grow else {"n": 0}
        for saver in savers.values():
            cfg: Any = {"configurable": {"thread_id": "long"}, "recursion_limit": n + 10}
            _loop_graph(n - 2, saver, grow).invoke(state, cfg)
        for _ in range(max(2, sizes.repeats)):
            for read in (False, True):
                for name, saver in savers.items():
                    start = time.perf_counter()
                    count[name] = _walk(saver, read)
                    elapsed = (time.perf_counter() - start) * 1000
                    out[read][name] = min(out[read].get(name, elapsed), elapsed)
    assert count["ours"] == count["peer"], count
    what = "growing message list" if grow else "small state"
    return [
        _row(f"list() of a {count['ours']}-checkpoint thread ({what}), ms", out[False], 0.2),
        _row(  # reported, no goal: reading every state costs about what SqliteSaver's does
            f"list() of a {count['ours']}-checkpoint thread ({what}), every state read, ms",
            out[True],
            None,
        ),
    ]


def bench_latest(tmp: Path, sizes: Sizes) -> dict[str, Any]:
    """get_tuple() of the latest checkpoint: a long thread against a 10-checkpoint one."""
    with TrajectorySaver(tmp / "h-oFalse.db") as saver:  # the long thread of bench_history
        _loop_graph(8, saver).invoke({"n": 0}, {"configurable": {"thread_id": "short"}})
        best: dict[str, float] = {}
        for _ in range(5):
            for name in ("long", "short"):
                config = {"configurable": {"thread_id": name}}
                start = time.perf_counter()
                for _ in range(200):
                    saver.get_tuple(config)
                elapsed = (time.perf_counter() - start) / 200 * 1e6
                best[name] = min(best.get(name, elapsed), elapsed)
    return _row(
        f"get_tuple(latest), {sizes.history}- vs 10-checkpoint thread, us",
        {"ours": best["long"], "peer": best["short"]},
        1.25,
    )


# -- (d) many concurrent runs -------------------------------------------------------------------


def _llm_graph(saver: BaseCheckpointSaver | None) -> Any:
    async def llm(s: ChainState) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"count": s["count"] + 1, "messages": [{"role": "assistant", "content": "ok"}]}

    async def tool(s: ChainState) -> dict[str, Any]:
        return {"count": s["count"] + 1, "messages": [{"role": "tool", "content": "42"}]}

    g = StateGraph(ChainState)
    g.add_node("llm", llm)
    g.add_node("tool", tool)
    g.add_edge(START, "llm")
    g.add_edge("llm", "tool")
    g.add_edge("tool", END)
    return g.compile(checkpointer=saver)


async def _concurrent(app: Any, n: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(
        *(
            app.ainvoke({"count": 0, "messages": []}, {"configurable": {"thread_id": f"t{i}"}})
            for i in range(n)
        )
    )
    return time.perf_counter() - start


def bench_concurrent(tmp: Path, sizes: Sizes) -> list[dict[str, Any]]:
    """Wall time of many concurrent runs, with and without checkpoints (best of repeats)."""

    async def run() -> dict[str, float]:
        best: dict[str, float] = {}
        for rep in range(sizes.repeats):
            t = {"none": await _concurrent(_llm_graph(None), sizes.concurrent)}
            async with TrajectorySaver(tmp / f"d-o{rep}.db") as ours:
                t["ours"] = await _concurrent(_llm_graph(ours), sizes.concurrent)
            async with AsyncSqliteSaver.from_conn_string(str(tmp / f"d-p{rep}.db")) as peer:
                t["async_sqlite"] = await _concurrent(_llm_graph(peer), sizes.concurrent)
            for k, v in t.items():
                best[k] = min(best.get(k, v), v)
        return best

    t = asyncio.run(run())
    n = sizes.concurrent
    return [
        _row(
            f"{n} concurrent runs, s (ours vs no checkpointer)",
            {"ours": t["ours"], "peer": t["none"]},
            2.0,
        ),
        _row(
            f"{n} concurrent runs, s (AsyncSqliteSaver vs none)",
            {"ours": t["async_sqlite"], "peer": t["none"]},
            None,
        ),
    ]


def _row(name: str, values: dict[str, float], goal: float | None) -> dict[str, Any]:
    ours, peer = values["ours"], values["peer"]
    return {
        "name": name,
        "ours": round(ours, 3),
        "peer": round(peer, 3),
        "ratio": round(ours / peer, 3) if peer else None,
        "goal": goal,
    }


def run(quick: bool = False, sizes: Sizes | None = None) -> list[dict[str, Any]]:
    """Run every benchmark; ``quick`` uses small sizes that finish in seconds."""
    sizes = sizes or (QUICK if quick else Sizes())
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as d:
        tmp = Path(d)
        rows = [
            bench_size(tmp, sizes, ChatState, "add_messages"),
            bench_size(tmp, sizes, DictChatState, "operator.add dicts"),
        ]
        rows += bench_chain(tmp, sizes)
        rows += bench_replay(tmp, sizes)
        rows += bench_history(tmp, sizes)
        rows.append(bench_latest(tmp, sizes))
        rows += bench_history(tmp, sizes, grow=True)
        rows += bench_concurrent(tmp, sizes)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, runs in seconds")
    args = parser.parse_args()
    os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "false")
    rows = run(quick=args.quick)
    width = max(len(r["name"]) for r in rows)
    print(f"{'benchmark':<{width}}  {'ours':>12}  {'peer':>12}  {'ratio':>7}  {'goal':>6}  ok")
    for r in rows:
        goal = r["goal"]
        ok = "" if goal is None or r["ratio"] is None else ("yes" if r["ratio"] <= goal else "NO")
        goal_text = "-" if goal is None else f"<={goal}"
        print(
            f"{r['name']:<{width}}  {r['ours']:>12}  {r['peer']:>12}  {r['ratio']!s:>7}  "
            f"{goal_text:>6}  {ok}"
        )


if __name__ == "__main__":
    main()
