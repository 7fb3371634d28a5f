"""Export speed: 10,000 stored trajectory steps to training files.

The database is made by real runs: an agent on a ``FunctionModel`` that calls a tool 49 times
and then answers (about 100 checkpointed steps a run); 20 such runs, copied to 100 threads
(``TrajectorySaver.copy_thread``) – 10,000 steps in all (2,000 with ``quick``), each run
scored with ``numeric``. Each export
reads every run back from SQLite, rebuilds its samples, checks secrets and writes the file;
duplicates are kept so every run yields rows.

Peer: a plain dump of the same database's ``trajectory`` table (``SELECT *`` and
``json.dumps`` of each row to JSONL) – the floor for reading those steps and writing JSON.
AWorld items carry each step's whole context, so that export writes O(steps²) data and is
the slowest. The goal for the export itself is "in seconds": the last row reports the
slowest export's wall time against ``< 10`` seconds.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from aworld_graph import Agent, Runners, Task, TaskConfig  # noqa: E402
from aworld_graph.checkpoint import TrajectorySaver  # noqa: E402
from aworld_graph.export import export  # noqa: E402
from aworld_graph.rewards import numeric, score_response, store_score  # noqa: E402
from aworld_graph.testing import FunctionModel, tool_call  # noqa: E402

CALLS = 49
"""Tool calls per run: 2 steps each plus the answer, ~100 steps a run."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent() -> Agent:
    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(1 for m in messages if m["role"] == "tool")
        if done >= CALLS:
            return f"The total is {done}."
        return tool_call("add", {"a": done, "b": len(messages)})

    return Agent(
        name="adder",
        system_prompt="You add numbers with the add tool.",
        tools=[add],
        model=FunctionModel(reply),
        max_steps=CALLS + 2,
    )


async def _fill(saver: TrajectorySaver, real: int, copies: int) -> None:
    agent = _agent()
    tasks = [
        Task(
            input=f"Add up series {i}.",
            agent=agent,
            id=f"run{i}",
            conf=TaskConfig(max_steps=4 * CALLS),
        )
        for i in range(real)
    ]
    responses = await Runners.run_task(tasks, concurrency=4, checkpointer=saver)
    for task in tasks:  # an episode reward on each run, for the reward rows
        score = score_response(responses[task.id], CALLS, numeric)
        await store_score(task, score, checkpointer=saver)
    for i in range(real, real + copies):
        saver.copy_thread(f"run{i % real}", f"run{i}")


def _peer(db: Path, out: Path) -> float:
    started = time.perf_counter()
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        conn.row_factory = sqlite3.Row
        with open(out, "w", encoding="utf-8") as fh:
            for row in conn.execute("SELECT * FROM trajectory"):
                fh.write(json.dumps(dict(row), ensure_ascii=False) + "\n")
    return time.perf_counter() - started


def _steps(db: Path) -> int:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM trajectory").fetchone()[0])


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows ``{"name", "ours", "peer", "ratio", "goal", "unit", "note"}``."""
    real, copies = (10, 10) if quick else (20, 80)
    exports = [
        ("openai", "turn", ".jsonl"),
        ("trl-sft", "episode", ".jsonl"),
        ("aworld", "episode", ".jsonl"),
        ("verl", "episode", ".parquet"),
        ("trl-reward", "episode", ".jsonl"),
    ]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "runs.db"
        saver = TrajectorySaver(db)
        asyncio.run(_fill(saver, real, copies))
        saver.close()
        steps = _steps(db)
        peer = min(_peer(db, folder / "peer.jsonl") for _ in range(3))
        slowest = 0.0
        for fmt, per, suffix in exports:
            if suffix == ".parquet":
                try:
                    import pyarrow  # noqa: F401
                except ImportError:
                    continue
            times, report = [], None
            for _ in range(2):
                started = time.perf_counter()
                report = export(
                    fmt, folder / f"out{suffix}", db=db, per=per, dedup=False, progress=False
                )
                times.append(time.perf_counter() - started)
            ours = min(times)
            slowest = max(slowest, ours)
            assert report is not None
            rows.append(
                {
                    "name": f"export {fmt} ({per}), {steps:,} steps",
                    "ours": ours,
                    "peer": peer,
                    "ratio": ours / peer,
                    "goal": "<= 30x",
                    "unit": "s",
                    "note": f"{report.rows:,} rows from {report.runs} runs; peer: SELECT * FROM trajectory → JSONL",
                }
            )
        rows.append(
            {
                "name": f"slowest export of {steps:,} steps (wall seconds)",
                "ours": slowest,
                "peer": None,
                "ratio": slowest,
                "goal": "< 10",
                "unit": "s",
                "note": "ratio column holds seconds here",
            }
        )
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(json.dumps(row))
