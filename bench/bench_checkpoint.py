"""TrajectorySaver against LangGraph's own savers, same graphs, same process, same server.

    python bench/bench_checkpoint.py            # full sizes (minutes)
    python bench/bench_checkpoint.py --quick    # seconds

Rows: ``name``, ``ours``, ``peer``, ``ratio`` (ours / peer) and ``goal`` (the bound on the
ratio; ``-`` where a row is reported without one). The peers are
``langgraph.checkpoint.sqlite`` (``SqliteSaver``, ``AsyncSqliteSaver``) on a SQLite file and
``langgraph.checkpoint.postgres`` (``PostgresSaver``, ``AsyncPostgresSaver``) on the same
throw-away PostgreSQL server as ours (``tests/postgres.py``; every saver has a database of
its own). Without the server programs, psycopg or langgraph-checkpoint-postgres, the
PostgreSQL rows say why and are skipped.

* per-step cost: what checkpointing adds per step of a 100-node chain — wall time with the
  saver minus wall time with no checkpointer, over the steps. Through ``invoke`` (sync
  savers) and ``ainvoke`` (async savers), at both LangGraph durabilities (``async``: saves
  run beside the next step; ``sync``: each save is waited for), for our ``normal`` and
  ``full`` durability against the peer as it comes.
* history: one long thread read whole, ``graph.get_state_history()`` and ``saver.list()``,
  using every state (each checkpoint's values, metadata and pending writes).
* get_tuple(latest): the long thread against a 10-checkpoint thread in the same file ("peer"
  is the short thread here: the goal is about the same speed).
* stored bytes of a long chat thread: the SQLite file (WAL checkpointed), or the saver's
  tables (``pg_total_relation_size``: heap, indexes, TOAST). The same sentences every turn,
  and words drawn at random from a fixed vocabulary ("varied text"): PostgreSQL compresses
  large values, and repeated sentences compress far better than prose.
* concurrent runs: wall time of N concurrent runs whose first node awaits a 50 ms "LLM call",
  ours against the async peer (the goal), and each against no checkpointer.

Times are the best of several runs, savers timed in turn (ours, peer, ours, …), one run at
a time: this box drifts by tens of percent over a minute, so side by side compares better
than blocks of runs.
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import _postgres_peer  # noqa: E402

from aworld_graph.checkpoint import TrajectorySaver  # noqa: E402


@dataclass(frozen=True, kw_only=True)
class Sizes:
    """Workload sizes."""

    turns: int = 200
    """Turns of the chat thread whose stored bytes are compared."""
    chain: int = 100
    """Nodes of the chain graph of the per-step rows."""
    chain_runs: int = 20
    """Runs of the chain per saver and durability; the fastest counts."""
    history: int = 3_000
    """Checkpoints of the long thread read whole (small state)."""
    history_messages: int = 1_000
    """Checkpoints of the long thread whose message list grows each step."""
    concurrent: int = 1_000
    """Concurrent runs."""
    repeats: int = 5
    """Repetitions of the history and concurrency workloads; the fastest counts."""


QUICK = Sizes(
    turns=60,
    chain=100,
    chain_runs=2,
    history=500,
    history_messages=200,
    concurrent=200,
    repeats=1,
)

DURABILITIES = ("async", "sync")
"""LangGraph's durabilities the per-step rows run at."""


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


# -- where the savers store: a SQLite file, or a database on the throw-away server -----------


@dataclass(frozen=True, kw_only=True)
class Backend:
    """One kind of store, and LangGraph's savers for it."""

    name: str
    """``SQLite`` or ``PostgreSQL``, as rows name it."""
    peer_name: str
    """The sync peer's class name."""
    apeer_name: str
    """The async peer's class name."""
    target: Callable[[str], Any]
    """A new, empty store (a file path or a URL) named after a label."""
    peer: Callable[[Any, ExitStack], BaseCheckpointSaver]
    """The sync peer on a store, closed with the stack."""
    apeer: Callable[[Any], AbstractAsyncContextManager[BaseCheckpointSaver]]
    """The async peer on a store."""
    stored_bytes: Callable[[Any], int]
    """What a store takes up."""


def _sqlite_saver(path: Path, stack: ExitStack) -> SqliteSaver:
    conn = stack.enter_context(sqlite3.connect(str(path), check_same_thread=False))
    return SqliteSaver(conn)


def _file_size(path: Path) -> int:
    with sqlite3.connect(str(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def sqlite_backend(tmp: Path) -> Backend:
    return Backend(
        name="SQLite",
        peer_name="SqliteSaver",
        apeer_name="AsyncSqliteSaver",
        target=lambda label: tmp / f"{label}.db",
        peer=_sqlite_saver,
        apeer=lambda path: AsyncSqliteSaver.from_conn_string(str(path)),
        stored_bytes=_file_size,
    )


def postgres_backend(pg: _postgres_peer.Postgres) -> Backend:
    return Backend(
        name="PostgreSQL",
        peer_name="PostgresSaver",
        apeer_name="AsyncPostgresSaver",
        target=pg.database,
        peer=_postgres_peer.peer,
        apeer=_postgres_peer.apeer,
        stored_bytes=_postgres_peer.stored_bytes,
    )


def _ours(target: Any, durability: str = "normal") -> TrajectorySaver:
    return TrajectorySaver(target, durability=durability)  # type: ignore[arg-type]


def _skipped(name: str, goal: float | None, reason: str) -> dict[str, Any]:
    return {"name": name, "ours": None, "peer": None, "ratio": None, "goal": goal, "note": reason}


# -- stored bytes of a long conversation ------------------------------------------------------


def _texts(varied: bool) -> tuple[Callable[[int], str], Callable[[int], str]]:
    """The user's and the model's text of turn ``i``: the same sentences every turn, or
    (``varied``) words drawn from a fixed vocabulary with a fixed seed, which compress about
    as poorly as prose (PostgreSQL compresses large values; SQLite does not)."""
    if not varied:
        question = "Please explain the following topic in some depth, with examples: " * 2
        reply = "Sure. " + "Here is a detailed answer with several sentences of content. " * 5
        return (lambda i: f"{question} #{i}"), (lambda i: f"{reply} ({i})")
    rnd = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rnd.choices(letters, k=rnd.randint(2, 9))) for _ in range(5_000)]

    def words(i: int, n: int) -> str:
        return " ".join(random.Random(i).choices(vocabulary, k=n))

    return (lambda i: words(2 * i, 20)), (lambda i: words(2 * i + 1, 50))


def _chat_graph(state: type, saver: BaseCheckpointSaver, reply: Callable[[int], str]) -> Any:
    def chat(s: Any) -> dict[str, Any]:
        return {"messages": [{"role": "assistant", "content": reply(len(s["messages"]))}]}

    g = StateGraph(state)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    g.add_edge("chat", END)
    return g.compile(checkpointer=saver)


def bench_size(
    backend: Backend, sizes: Sizes, state: type, label: str, varied: bool = False
) -> list[dict[str, Any]]:
    """Stored bytes of one chat thread; on PostgreSQL also the share of the peer's total that
    its ``checkpoints`` table alone takes (one row per checkpoint, as ours has): the ratio
    cannot fall below it, however small the values are stored."""
    question, reply = _texts(varied)
    out: dict[str, int] = {}
    floor: list[dict[str, Any]] = []
    for name in ("ours", "peer"):
        target = backend.target(f"size_{name}")
        with ExitStack() as stack:
            saver = (
                stack.enter_context(_ours(target))
                if name == "ours"
                else backend.peer(target, stack)
            )
            app = _chat_graph(state, saver, reply)
            cfg = {"configurable": {"thread_id": "chat"}}
            for i in range(sizes.turns):
                app.invoke({"messages": [{"role": "user", "content": question(i)}]}, cfg)
        out[name] = backend.stored_bytes(target)
        if name == "peer" and backend.name == "PostgreSQL":
            rows = {"ours": _postgres_peer.stored_bytes(target, "checkpoints"), "peer": out[name]}
            floor.append(_row(f"  the floor: {backend.peer_name}'s checkpoints table", rows, None))
    head = f"stored bytes, {sizes.turns}-turn chat, {backend.name}, {label}"
    return [_row(f"{head} (vs {backend.peer_name})", out, 0.1), *floor]


# -- per-step cost on a chain -------------------------------------------------------------------


def _chain_graph(n: int, saver: BaseCheckpointSaver | None) -> Any:
    g = StateGraph(ChainState)

    def make(i: int) -> Callable[[ChainState], dict[str, Any]]:
        def node(s: ChainState) -> dict[str, Any]:
            return {"count": s["count"] + 1, "messages": [{"role": "tool", "content": f"n{i}"}]}

        return node

    g.add_sequence([(f"n{i}", make(i)) for i in range(n)])
    g.add_edge(START, "n0").add_edge(f"n{n - 1}", END)
    return g.compile(checkpointer=saver)


def _chain_args(app: Any, thread: str, durability: str) -> tuple[Any, Any, dict[str, Any]]:
    # LangGraph warns about (and, at "sync", fails on) a durability without a checkpointer
    extra = {} if app.checkpointer is None else {"durability": durability}
    return {"count": 0, "messages": []}, {"configurable": {"thread_id": thread}}, extra


def _time_sync(app: Any, thread: str, durability: str) -> float:
    state, config, extra = _chain_args(app, thread, durability)
    start = time.perf_counter()
    app.invoke(state, config, **extra)
    return time.perf_counter() - start


async def _time_async(app: Any, thread: str, durability: str) -> float:
    state, config, extra = _chain_args(app, thread, durability)
    start = time.perf_counter()
    await app.ainvoke(state, config, **extra)
    return time.perf_counter() - start


def _fastest(times: dict[tuple[str, str], float], key: tuple[str, str], t: float) -> None:
    times[key] = min(times.get(key, t), t)


def _chain_sync(backend: Backend, sizes: Sizes) -> dict[tuple[str, str], float]:
    with ExitStack() as stack:
        savers: dict[str, BaseCheckpointSaver | None] = {
            "none": None,
            "ours": stack.enter_context(_ours(backend.target("chain_o"))),
            "peer": backend.peer(backend.target("chain_p"), stack),
            "ours_full": stack.enter_context(_ours(backend.target("chain_of"), "full")),
        }
        apps = {name: _chain_graph(sizes.chain, saver) for name, saver in savers.items()}
        best: dict[tuple[str, str], float] = {}
        for run in range(sizes.chain_runs):
            for durability in DURABILITIES:
                for name, app in apps.items():
                    t = _time_sync(app, f"{durability}-{run}", durability)
                    _fastest(best, (durability, name), t)
    return best


async def _chain_async(backend: Backend, sizes: Sizes) -> dict[tuple[str, str], float]:
    async with AsyncExitStack() as stack:
        savers: dict[str, BaseCheckpointSaver | None] = {
            "none": None,
            "ours": await stack.enter_async_context(_ours(backend.target("achain_o"))),
            "peer": await stack.enter_async_context(backend.apeer(backend.target("achain_p"))),
            "ours_full": await stack.enter_async_context(
                _ours(backend.target("achain_of"), "full")
            ),
        }
        apps = {name: _chain_graph(sizes.chain, saver) for name, saver in savers.items()}
        best: dict[tuple[str, str], float] = {}
        for run in range(sizes.chain_runs):
            for durability in DURABILITIES:
                for name, app in apps.items():
                    t = await _time_async(app, f"{durability}-{run}", durability)
                    _fastest(best, (durability, name), t)
    return best


def _chain_rows(
    backend: Backend, api: str, peer_name: str, n: int, best: dict[tuple[str, str], float]
) -> list[dict[str, Any]]:
    rows = []
    for durability in DURABILITIES:
        cost = {
            name: (best[(durability, name)] - best[(durability, "none")]) / n * 1e6
            for name in ("ours", "ours_full", "peer")
        }
        for ours, label in (("ours", "normal"), ("ours_full", "full")):
            rows.append(
                _row(
                    f"per-step cost, {backend.name}, {api} durability={durability}, us "
                    f"({label} vs {peer_name})",
                    {"ours": cost[ours], "peer": cost["peer"]},
                    1.0,
                )
            )
    return rows


def bench_chain(backend: Backend, sizes: Sizes) -> list[dict[str, Any]]:
    """Checkpointing cost per step: (time with the saver − time without one) / steps, through
    ``invoke`` and ``ainvoke``, at each LangGraph durability."""
    n = sizes.chain
    return [
        *_chain_rows(backend, "invoke", backend.peer_name, n, _chain_sync(backend, sizes)),
        *_chain_rows(
            backend, "ainvoke", backend.apeer_name, n, asyncio.run(_chain_async(backend, sizes))
        ),
    ]


def chain_skipped(reason: str) -> list[dict[str, Any]]:
    return [_skipped("per-step cost, PostgreSQL (invoke and ainvoke)", 1.0, reason)]


# -- history of a long thread ---------------------------------------------------------------


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


_LONG: Any = {"configurable": {"thread_id": "long"}}


def _touch(values: Any) -> int:
    """Use every value of a state (a lazily decoded value would be decoded here)."""
    return sum(len(v) if isinstance(v, list) else 1 for v in values.values())


def _read_history(app: Any) -> int:
    """``get_state_history`` of the long thread, using each snapshot's values and tasks."""
    count = 0
    for snap in app.get_state_history(_LONG):
        _ = (_touch(snap.values), snap.metadata, snap.tasks)
        count += 1
    return count


def _read_list(saver: BaseCheckpointSaver) -> int:
    """``list()`` of the long thread, using each tuple's values, metadata and writes."""
    count = 0
    for t in saver.list(_LONG):
        _ = (_touch(t.checkpoint["channel_values"]), t.metadata["step"], len(t.pending_writes))
        count += 1
    return count


def bench_history(backend: Backend, sizes: Sizes, grow: bool = False) -> list[dict[str, Any]]:
    """Time to read every state of one long thread (best of ``repeats``, at least 2)."""
    n = sizes.history_messages if grow else sizes.history
    out: dict[str, dict[str, float]] = {"history": {}, "list": {}}
    count: dict[str, int] = {}
    with ExitStack() as stack:
        savers = {
            "ours": stack.enter_context(_ours(backend.target(f"history_o{grow}"))),
            "peer": backend.peer(backend.target(f"history_p{grow}"), stack),
        }
        apps = {name: _loop_graph(n - 2, saver, grow) for name, saver in savers.items()}
        state: dict[str, Any] = {"n": 0, "messages": []} if grow else {"n": 0}
        for app in apps.values():
            app.invoke(state, {**_LONG, "recursion_limit": n + 10})
        for _ in range(max(2, sizes.repeats)):
            for what in ("history", "list"):
                for name in savers:
                    start = time.perf_counter()
                    if what == "history":
                        count[name] = _read_history(apps[name])
                    else:
                        count[name] = _read_list(savers[name])
                    elapsed = (time.perf_counter() - start) * 1000
                    out[what][name] = min(out[what].get(name, elapsed), elapsed)
    assert count["ours"] == count["peer"], count
    what = "growing message list" if grow else "small state"
    thread, vs = f"{count['ours']}-checkpoint thread ({what})", f"(vs {backend.peer_name})"
    return [
        _row(f"get_state_history() of a {thread}, ms {vs}", out["history"], 1.0),
        _row(f"list() of a {thread}, every state read, ms {vs}", out["list"], 1.0),
    ]


def bench_latest(backend: Backend, sizes: Sizes) -> dict[str, Any]:
    """get_tuple() of the latest checkpoint: a long thread against a 10-checkpoint one.

    The long thread is ``bench_history``'s (a SQLite target is a file path: the same label
    names the same file)."""
    with _ours(backend.target("history_oFalse")) as saver:
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


# -- many concurrent runs -------------------------------------------------------------------


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


async def _concurrent(saver: BaseCheckpointSaver | None, n: int) -> float:
    app = _llm_graph(saver)
    if saver is not None:  # its tables are made before the clock starts (the peers' setup)
        await saver.aget_tuple({"configurable": {"thread_id": "setup"}})
    start = time.perf_counter()
    await asyncio.gather(
        *(
            app.ainvoke({"count": 0, "messages": []}, {"configurable": {"thread_id": f"t{i}"}})
            for i in range(n)
        )
    )
    return time.perf_counter() - start


def bench_concurrent(backends: list[Backend], sizes: Sizes) -> dict[str, float]:
    """Wall time of many concurrent runs: no checkpointer, LangGraph's ``InMemorySaver`` (the
    floor: the loop's own checkpointing work, nothing stored), then each backend's savers in
    turn (best of ``repeats``); keys ``none``, ``memory``, ``<backend> ours``/``peer``."""

    async def run() -> dict[str, float]:
        best: dict[str, float] = {}
        for _ in range(sizes.repeats):
            t = {"none": await _concurrent(None, sizes.concurrent)}
            t["memory"] = await _concurrent(InMemorySaver(), sizes.concurrent)
            for b in backends:
                async with _ours(b.target("concurrent_o")) as ours:
                    t[f"{b.name} ours"] = await _concurrent(ours, sizes.concurrent)
                async with b.apeer(b.target("concurrent_p")) as peer:
                    t[f"{b.name} peer"] = await _concurrent(peer, sizes.concurrent)
            for k, v in t.items():
                best[k] = min(best.get(k, v), v)
        return best

    return asyncio.run(run())


def concurrent_rows(
    backends: list[Backend], sizes: Sizes, t: dict[str, float], pg_reason: str | None
) -> list[dict[str, Any]]:
    n = sizes.concurrent
    rows = [
        _row(
            f"{n} concurrent runs, s (InMemorySaver vs no checkpointer: the floor)",
            {"ours": t["memory"], "peer": t["none"]},
            None,
        )
    ]
    for b in backends:
        goal = 1.0 if b.name == "SQLite" else None  # PostgreSQL: reported
        rows.append(
            _row(
                f"{n} concurrent runs, {b.name}, s (ours vs {b.apeer_name})",
                {"ours": t[f"{b.name} ours"], "peer": t[f"{b.name} peer"]},
                goal,
            )
        )
        for name in ("ours", b.apeer_name):
            key = f"{b.name} {'ours' if name == 'ours' else 'peer'}"
            rows.append(
                _row(
                    f"{n} concurrent runs, {b.name}, s ({name} vs no checkpointer)",
                    {"ours": t[key], "peer": t["none"]},
                    None,
                )
            )
    if pg_reason is not None:
        rows.append(_skipped(f"{n} concurrent runs, PostgreSQL", None, pg_reason))
    return rows


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
    os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "false")
    with (
        tempfile.TemporaryDirectory(prefix="bench-ckpt-") as d,
        _postgres_peer.server() as pg,
    ):
        sqlite = sqlite_backend(Path(d))
        pg_reason = pg if isinstance(pg, str) else None
        backends = [sqlite] if isinstance(pg, str) else [sqlite, postgres_backend(pg)]
        rows = []
        for b in backends:
            rows += bench_size(b, sizes, ChatState, "add_messages")
            rows += bench_size(b, sizes, DictChatState, "operator.add dicts")
            rows += bench_size(b, sizes, ChatState, "add_messages, varied text", True)
        if pg_reason is not None:
            rows.append(_skipped("stored bytes, PostgreSQL", 0.1, pg_reason))
        for b in backends:
            rows += bench_chain(b, sizes)
        if pg_reason is not None:
            rows += chain_skipped(pg_reason)
        rows += bench_history(sqlite, sizes)
        rows.append(bench_latest(sqlite, sizes))
        rows += bench_history(sqlite, sizes, grow=True)
        rows += concurrent_rows(backends, sizes, bench_concurrent(backends, sizes), pg_reason)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, runs in seconds")
    args = parser.parse_args()
    rows = run(quick=args.quick)
    width = max(len(r["name"]) for r in rows)
    print(f"{'benchmark':<{width}}  {'ours':>12}  {'peer':>12}  {'ratio':>7}  {'goal':>6}  ok")
    for r in rows:
        goal = r["goal"]
        goal_text = "-" if goal is None else f"<={goal}"
        if r.get("note"):
            print(f"{r['name']:<{width}}  {'-':>12}  {'-':>12}  {'-':>7}  {goal_text:>6}  ")
            print(f"    skipped: {r['note']}")
            continue
        ok = "" if goal is None or r["ratio"] is None else ("yes" if r["ratio"] <= goal else "NO")
        print(
            f"{r['name']:<{width}}  {r['ours']:>12}  {r['peer']:>12}  {r['ratio']!s:>7}  "
            f"{goal_text:>6}  {ok}"
        )


if __name__ == "__main__":
    main()
