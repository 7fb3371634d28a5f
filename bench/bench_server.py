"""A run streamed over ``aworld-graph serve`` against the same run in-process.

    python bench/bench_server.py            # full sizes
    python bench/bench_server.py --quick    # seconds

Both sides run the same agent (a fake model: one tool call, then the answer; no network
besides the server's loopback) on their own fresh SQLite ``TrajectorySaver``. The server is
``aworld-graph serve bench_server:AGENT`` in a process of its own on 127.0.0.1, as deployed
(``--in-thread``: uvicorn in a thread of this process instead, sharing its GIL with the
client), driven by the real ``langgraph-sdk`` client from this process. Rows (``ratio`` =
ours / peer):

* one streamed run (ms): ``client.runs.stream(..., stream_mode=["values", "updates",
  "custom"])`` read to the end, against ``await Runners.run(...)``;
* ``concurrent`` streamed runs at once (seconds for the batch) against ``Runners.run_task``
  of as many tasks with the same concurrency. Every run's last ``values`` event must hold
  the answer and the store must hold every thread finished, or the row says what was lost.

The sides alternate sample by sample; each number is the median over samples.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from langgraph_sdk import get_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aworld_graph import Agent, Runners, Task, tool  # noqa: E402
from aworld_graph.checkpoint import TrajectorySaver  # noqa: E402
from aworld_graph.server import Assistant, create_app  # noqa: E402
from aworld_graph.testing import FunctionModel, tool_call  # noqa: E402

MODES = ["values", "updates", "custom"]


@tool
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


def _reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] != "tool":
        return tool_call("word_count", {"text": str(messages[-1]["content"])})
    return f"{messages[-1]['content']} words"


AGENT = Agent(name="counter", model=FunctionModel(_reply), tools=[word_count])


class _Server:
    """uvicorn serving ``app`` in a thread of this process."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", access_log=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the bench server did not start")
            time.sleep(0.01)
        return f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


class _ServerProcess:
    """``aworld-graph serve bench_server:AGENT --db DB`` in a process of its own."""

    def __init__(self, db: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.db = db
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> str:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT)])}
        command = [sys.executable, "-c", "from aworld_graph.cli import main; main()"]
        command += ["serve", "bench_server:AGENT"]
        command += ["--port", str(self.port), "--db", str(self.db)]
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError("the bench server did not start")
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def _stream(client: Any) -> str | None:
    answer = None
    async for part in client.runs.stream(
        None, "counter", input={"input": "three words here"}, stream_mode=MODES
    ):
        if part.event == "values":
            answer = part.data.get("answer")
        elif part.event == "error":
            return f"error: {part.data}"
    return answer


async def _local(saver: TrajectorySaver) -> str | None:
    return (await Runners.run("three words here", agent=AGENT, checkpointer=saver)).answer


async def _batch_streams(client: Any, n: int) -> tuple[float, int]:
    started = time.perf_counter()
    answers = await asyncio.gather(*(_stream(client) for _ in range(n)))
    return time.perf_counter() - started, sum(a != "3 words" for a in answers)


async def _batch_local(saver: TrajectorySaver, n: int) -> float:
    tasks = [Task(input="three words here", agent=AGENT, id=uuid.uuid4().hex) for _ in range(n)]
    started = time.perf_counter()
    done = await Runners.run_task(tasks, concurrency=n, checkpointer=saver)
    assert all(r.answer == "3 words" for r in done.values())
    return time.perf_counter() - started


def _finished(saver: TrajectorySaver) -> int:
    count = 0
    for summary in saver.threads():
        tup = saver.get_tuple({"configurable": {"thread_id": summary.thread_id}})
        count += tup is not None and tup.checkpoint["channel_values"].get("answer") == "3 words"
    return count


async def _measure(quick: bool, in_thread: bool = False) -> list[dict[str, Any]]:
    runs, rounds, concurrent = (10, 2, 50) if quick else (40, 3, 200)
    with tempfile.TemporaryDirectory() as tmp:
        served = TrajectorySaver(Path(tmp) / "served.db")
        local = TrajectorySaver(Path(tmp) / "local.db")
        if in_thread:
            app = create_app([Assistant.of(AGENT)], store=served, api_key="")
            server: Any = _Server(app)
        else:
            server = _ServerProcess(Path(tmp) / "served.db")
        with server as url:
            client = get_client(url=url, api_key=None, timeout=300)
            for _ in range(3):  # warm up both sides
                assert await _stream(client) == "3 words" and await _local(local) == "3 words"
            ours, peer = [], []
            for i in range(runs):
                for side in ("o", "p") if i % 2 else ("p", "o"):
                    started = time.perf_counter()
                    if side == "o":
                        assert await _stream(client) == "3 words"
                        ours.append(time.perf_counter() - started)
                    else:
                        assert await _local(local) == "3 words"
                        peer.append(time.perf_counter() - started)
            batch_ours, batch_peer, lost = [], [], 0
            for _ in range(rounds):
                seconds, missing = await _batch_streams(client, concurrent)
                batch_ours.append(seconds)
                lost += missing
                batch_peer.append(await _batch_local(local, concurrent))
            await client.aclose()
        stored = _finished(served)  # (the server process has stopped)
        expected = 3 + runs + rounds * concurrent
        served.close()
        local.close()
    one_o, one_p = statistics.median(ours) * 1000, statistics.median(peer) * 1000
    many_o, many_p = statistics.median(batch_ours), statistics.median(batch_peer)
    where = "uvicorn in a thread of the bench" if in_thread else "aworld-graph serve, own process"
    note = f"server: {where}; {concurrent} streams x {rounds}: {lost} answers missing, {stored}/{expected} threads finished in the store"
    return [
        {
            "name": "server: one streamed run vs in-process Runners.run",
            "ours": round(one_o, 2),
            "peer": round(one_p, 2),
            "ratio": round(one_o / one_p, 2),
            "goal": "<= 1.5x",
            "unit": "ms",
            "note": f"server: {where}",
        },
        {
            "name": f"server: {concurrent} concurrent streamed runs vs Runners.run_task",
            "ours": round(many_o, 3),
            "peer": round(many_p, 3),
            "ratio": round(many_o / many_p, 2),
            "goal": "<= 2x",
            "unit": "s",
            "note": note + f"; {concurrent / many_o:.0f} runs/s",
        },
    ]


def run(quick: bool = False, in_thread: bool = False) -> list[dict[str, Any]]:
    return asyncio.run(_measure(quick, in_thread))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--in-thread", action="store_true", help="uvicorn in a thread of the bench")
    args = parser.parse_args()
    for row in run(args.quick, args.in_thread):
        print(row)
