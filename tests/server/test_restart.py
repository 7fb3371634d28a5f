"""The server killed with SIGKILL mid-run: after a restart the run reads as interrupted and
continues through the API from its last checkpoint; the CLI sees the same thread."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from tests.server.app_server import CLI, ROOT, ServeProcess, free_port

pytestmark = pytest.mark.slow


_port = free_port


class Served(ServeProcess):
    """``aworld-graph serve`` of ``tests.server.apps``' workflows named ``served`` (default:
    ``slow``) on ``port`` over store ``db``, with ``env`` set."""

    def __init__(self, db: Path, port: int, *served: str, **env: str) -> None:
        targets = [f"tests.server.apps:{name}" for name in served or ("slow",)]
        super().__init__(targets, db=db, port=port, env=env)


@pytest.fixture
def processes() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for served in started:
        if served.proc.poll() is None:
            served.stop(signal.SIGKILL)


async def test_killed_mid_run_then_continued_after_restart(
    tmp_path: Path, processes: list[Served]
) -> None:
    db, port = tmp_path / "served.db", _port()
    first = Served(db, port, AWORLD_TEST_SLOW="hang")
    processes.append(first)
    sdk = get_client(url=first.url, api_key=None)
    thread = (await sdk.threads.create())["thread_id"]
    parts = sdk.runs.stream(
        thread, "slow", input={"input": "five words in this input"}, stream_mode="values"
    )
    run_id = None
    async for part in parts:
        if part.event == "metadata":
            run_id = part.data["run_id"]
        if part.event == "values" and part.data["steps"] >= 2:
            break  # the tool's step is saved; the next model call hangs
    first.stop(signal.SIGKILL)
    await parts.aclose()
    await sdk.aclose()

    second = Served(db, port)
    processes.append(second)
    sdk = get_client(url=second.url, api_key=None)
    got = await sdk.threads.get(thread)
    assert got["status"] == "interrupted" and got["metadata"]["assistant_id"] == "slow"
    runs = await sdk.runs.list(thread)
    assert [(r["run_id"], r["status"]) for r in runs] == [(run_id, "interrupted")]
    assert (await sdk.runs.get(thread, run_id))["status"] == "interrupted"
    done = await sdk.runs.wait(thread, "slow", input=None)
    assert done["answer"] == "5 words"
    assert [r["kind"] for r in done["trace"]] == ["llm", "tools", "llm"]  # no step redone
    assert (await sdk.threads.get(thread))["status"] == "idle"
    await sdk.aclose()
    second.stop()

    # an ordinary thread of the store: the CLI finds what it ran (its recorded target)
    shown = await asyncio.to_thread(
        subprocess.run,
        [*CLI, "resume", thread, "--db", str(db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert shown.returncode == 0, shown.stderr
    assert "answer: 5 words" in shown.stdout and f"task {thread}: finished" in shown.stdout
