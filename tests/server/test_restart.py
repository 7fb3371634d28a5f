"""The server killed with SIGKILL mid-run: after a restart the run reads as interrupted and
continues through the API from its last checkpoint; the CLI sees the same thread."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from aworld_graph.cli import main; main()"]

pytestmark = pytest.mark.slow


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """``aworld-graph serve`` in a child process on 127.0.0.1."""

    def __init__(self, db: Path, port: int, *served: str, **env: str) -> None:
        """Serve ``tests.server.apps``' workflows named ``served`` (default: ``slow``)."""
        self.url = f"http://127.0.0.1:{port}"
        targets = [f"tests.server.apps:{name}" for name in served or ("slow",)]
        args = ["serve", *targets, "--port", str(port), "--db", str(db)]
        environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
        environ.pop("AWORLD_GRAPH_API_KEY", None)
        self.log_path = db.parent / f"serve-{port}-{time.monotonic_ns()}.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [*CLI, *args], cwd=ROOT, env=environ, stdout=subprocess.DEVNULL, stderr=log
            )
        deadline = time.monotonic() + 60
        while True:  # bounded wait for the port to answer
            try:
                if httpx.get(f"{self.url}/ok", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start: {self.log()!r}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(30)

    def log(self) -> str:
        """What the server wrote to stderr."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")


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
