"""``aworld-graph serve`` against LangGraph's own server, ``langgraph dev``, on the same graph.

    python bench/bench_vs_langgraph_dev.py            # full sizes
    python bench/bench_vs_langgraph_dev.py --quick    # fewer samples, 50 streams

Both servers serve the same ``langgraph.json`` (``tests/server/langgraph_dev.py``: a
``StateGraph`` whose one node answers through LangChain's fake chat model, no network), each
in a process of its own on 127.0.0.1, as they come: ours with ``--config`` over a fresh SQLite
store, ``langgraph dev`` (``langgraph-cli[inmem]``, in ``.cache/langgraph-dev-venv``, made on
first use) with its in-memory runtime and its default workers. The real ``langgraph-sdk``
client drives both from this process. Rows (``ratio`` = ours / peer, goal ``<= 1x``):

* one streamed run (ms): ``client.runs.stream(thread, "chat", stream_mode=["values",
  "messages-tuple"])`` on a new thread, read to the end; median over samples, the sides
  alternated sample by sample;
* ``concurrent`` streamed runs at once, each on a thread of its own (seconds for the batch;
  median over rounds, sides alternated). Every run's last ``values`` event must hold its own
  answer, or the row says how many were wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from langgraph_sdk import get_client  # noqa: E402

from tests.server.langgraph_dev import (  # noqa: E402
    PINS,
    Unavailable,
    aworld_serve,
    langgraph_dev,
    write_project,
)

MODES = ["values", "messages-tuple"]


async def _stream(client: Any, text: str) -> bool:
    """One streamed run on a new thread; whether its last values hold the answer to ``text``."""
    thread = await client.threads.create()
    last: Any = None
    async for part in client.runs.stream(
        thread["thread_id"],
        "chat",
        input={"messages": [{"role": "user", "content": text}]},
        stream_mode=MODES,
    ):
        if part.event == "values":
            last = part.data
        elif part.event == "error":
            return False
    return bool(last) and last["messages"][-1]["content"] == f"you said: {text}"


async def _batch(client: Any, n: int, round_: int) -> tuple[float, int]:
    started = time.perf_counter()
    done = await asyncio.gather(*(_stream(client, f"run {round_}-{i}") for i in range(n)))
    return time.perf_counter() - started, sum(not ok for ok in done)


async def _measure(quick: bool) -> list[dict[str, Any]]:
    samples, rounds, concurrent = (10, 1, 50) if quick else (40, 3, 200)
    with tempfile.TemporaryDirectory() as tmp:
        config = write_project(Path(tmp) / "project")
        with (
            langgraph_dev(config) as peer_server,
            aworld_serve(config, Path(tmp) / "ours.db") as ours_server,
        ):
            clients = {
                "ours": get_client(url=ours_server.url, api_key=None, timeout=600),
                "peer": get_client(url=peer_server.url, api_key=None, timeout=600),
            }
            try:
                for client in clients.values():  # warm up both sides
                    for i in range(3):
                        assert await _stream(client, f"warm {i}")
                one: dict[str, list[float]] = {"ours": [], "peer": []}
                for i in range(samples):
                    for side in ("ours", "peer") if i % 2 else ("peer", "ours"):
                        started = time.perf_counter()
                        assert await _stream(clients[side], f"sample {i}"), side
                        one[side].append(time.perf_counter() - started)
                many: dict[str, list[float]] = {"ours": [], "peer": []}
                wrong = {"ours": 0, "peer": 0}
                for r in range(rounds):
                    for side in ("ours", "peer") if r % 2 else ("peer", "ours"):
                        seconds, bad = await _batch(clients[side], concurrent, r)
                        many[side].append(seconds)
                        wrong[side] += bad
            finally:
                for client in clients.values():
                    await client.aclose()
    one_o, one_p = (statistics.median(one[s]) * 1000 for s in ("ours", "peer"))
    many_o, many_p = (statistics.median(many[s]) for s in ("ours", "peer"))
    peer_version = next(p for p in PINS if p.startswith("langgraph-api"))
    where = f"langgraph dev ({peer_version}, inmem) vs aworld-graph serve --config (SQLite)"
    return [
        {
            "name": "vs langgraph dev: one streamed run",
            "ours": round(one_o, 2),
            "peer": round(one_p, 2),
            "ratio": round(one_o / one_p, 2),
            "goal": "<= 1x",
            "unit": "ms",
            "note": f"{where}; median of {samples} each",
        },
        {
            "name": f"vs langgraph dev: {concurrent} concurrent streamed runs",
            "ours": round(many_o, 3),
            "peer": round(many_p, 3),
            "ratio": round(many_o / many_p, 2),
            "goal": "<= 1x",
            "unit": "s",
            "note": f"{where}; median of {rounds} batches; wrong or missing answers: "
            f"ours {wrong['ours']}, peer {wrong['peer']}",
        },
    ]


def run(quick: bool = False) -> list[dict[str, Any]]:
    try:
        return asyncio.run(_measure(quick))
    except Unavailable as exc:
        return [{"name": "vs langgraph dev", "note": f"skipped: {exc}"}]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d')} {platform.machine()} {platform.processor() or ''}")
    for row in run(args.quick):
        print(row)
