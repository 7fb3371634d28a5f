"""A tool call through the Sandbox against the same call on a bare ``mcp`` ClientSession.

    python bench/bench_mcp.py            # full sizes
    python bench/bench_mcp.py --quick    # seconds

Both sides talk over stdio to their own copy of the bundled environment server
(``python -m aworld_graph.environment.server``) and call ``calculator``. Rows: ``name``,
``ours``, ``peer``, ``ratio`` (ours / peer) and ``goal`` (the ratio to beat):

* warm sequential calls (ms per call) – the Sandbox adds argument validation against the input
  schema and result conversion to a ``ToolOutcome``;
* warm concurrent calls (ms per batch of ``batch`` calls through one connection);
* cold start: connect (spawn + handshake + tool listing) and one call, ms.

The sides alternate sample by sample (and which goes first); each number is the median over
samples, so load from other processes hits both sides alike.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

from aworld_graph.environment import Sandbox

ROOT = Path(__file__).resolve().parents[1]
ARGUMENTS = {"expression": "2 * (3 + 4) ** 2"}


@dataclass(frozen=True)
class Sizes:
    """Workload sizes."""

    calls: int = 40
    """Sequential calls per sample."""
    batch: int = 20
    """Concurrent calls per batch."""
    batches: int = 4
    """Batches per sample."""
    rounds: int = 25
    """Samples per side (the sides alternate, sample by sample)."""
    cold: int = 5
    """Cold starts per side."""


QUICK = Sizes(rounds=7, cold=2)


def _server(root: str) -> tuple[str, list[str]]:
    return sys.executable, ["-m", "aworld_graph.environment.server", "--root", root]


async def _timed(fn: Callable[[], Awaitable[Any]], repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        await fn()
    return (time.perf_counter() - started) * 1000


async def _measure(sizes: Sizes, root: str) -> dict[str, tuple[float, float]]:
    command, args = _server(root)
    config = {"mcpServers": {"env": {"command": command, "args": args, "cwd": str(ROOT)}}}
    params = StdioServerParameters(command=command, args=args, cwd=str(ROOT))
    async with AsyncExitStack() as stack:
        sandbox = await stack.enter_async_context(Sandbox(mcp_config=config))
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        await session.list_tools()
        await sandbox.tool_specs()

        async def ours() -> None:
            outcome = await sandbox.mcpservers.call_tool("env", "calculator", ARGUMENTS)
            assert outcome.content == "98", outcome.content

        async def peer() -> None:
            result = await session.call_tool("calculator", ARGUMENTS)
            assert result.structured_content == {"result": 98}

        async def ours_batch() -> None:
            await asyncio.gather(*(ours() for _ in range(sizes.batch)))

        async def peer_batch() -> None:
            await asyncio.gather(*(peer() for _ in range(sizes.batch)))

        for fn in (ours, peer):  # warm both pipes and code paths
            await _timed(fn, 20)
        samples: dict[str, tuple[list[float], list[float]]] = {"seq": ([], []), "batch": ([], [])}
        for round_ in range(sizes.rounds):
            pairs = [
                ("seq", ours, peer, sizes.calls),
                ("batch", ours_batch, peer_batch, sizes.batches),
            ]
            for key, mine, theirs, repeat in pairs:
                order = [(0, mine), (1, theirs)] if round_ % 2 == 0 else [(1, theirs), (0, mine)]
                for side, fn in order:
                    samples[key][side].append(await _timed(fn, repeat) / repeat)
    measured = {
        key: (statistics.median(a), statistics.median(b)) for key, (a, b) in samples.items()
    }

    async def ours_cold() -> None:
        async with Sandbox(mcp_config=config) as box:
            await box.tool_specs()
            await box.mcpservers.call_tool("env", "calculator", ARGUMENTS)

    async def peer_cold() -> None:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.list_tools()
            await s.call_tool("calculator", ARGUMENTS)

    cold: tuple[list[float], list[float]] = ([], [])
    for i in range(sizes.cold):
        order = [(0, ours_cold), (1, peer_cold)] if i % 2 == 0 else [(1, peer_cold), (0, ours_cold)]
        for side, fn in order:
            cold[side].append(await _timed(fn, 1))
    measured["cold"] = (statistics.median(cold[0]), statistics.median(cold[1]))
    return measured


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Measure and return the rows."""
    sizes = QUICK if quick else Sizes()
    with tempfile.TemporaryDirectory() as root:
        measured = asyncio.run(_measure(sizes, root))
    labels = {
        "seq": ("tool call, warm stdio, sequential", "ms/call"),
        "batch": (f"{sizes.batch} concurrent tool calls, one warm connection", "ms/batch"),
        "cold": ("connect + list tools + one call (server start)", "ms"),
    }
    rows = []
    for key, (label, unit) in labels.items():
        ours, peer = measured[key]
        rows.append(
            {
                "name": label,
                "ours": round(ours, 3),
                "peer": round(peer, 3),
                "ratio": round(ours / peer, 3),
                "goal": "<= 1.2x",
                "unit": unit,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    rows = run(parser.parse_args().quick)
    width = max(len(row["name"]) for row in rows)
    print(f"{'benchmark'.ljust(width)}  {'ours':>10}  {'peer':>10}  {'ratio':>6}  goal     unit")
    for row in rows:
        print(
            f"{row['name'].ljust(width)}  {row['ours']:>10.3f}  {row['peer']:>10.3f}  "
            f"{row['ratio']:>5.2f}x  {row['goal']:<7}  {row['unit']}"
        )


if __name__ == "__main__":
    main()
