"""A streamable-HTTP MCP server that goes away and comes back: the call in between is a clear
error for the model, and the next call after the restart reconnects by itself."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

from aworld_graph.environment import Sandbox

from .conftest import REPO, make_root, no_secret

_DRAINS: dict[int, threading.Thread] = {}


def _start(root: Path, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aworld_graph.environment.server",
         "--transport", "streamable-http", "--port", str(port), "--root", str(root)],
        cwd=REPO, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert re.search(r"serving streamable-http on http://", line), line
    drain = _DRAINS[proc.pid] = threading.Thread(target=proc.stderr.read, daemon=True)
    drain.start()
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(timeout=30)
    _DRAINS.pop(proc.pid).join(timeout=30)  # the pipe ends with the process
    assert proc.stderr is not None
    proc.stderr.close()


async def test_http_server_restart_is_reconnected(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    config = {
        "mcpServers": {
            "env": {
                "url": url,
                "timeout": 30,
                "headers": {"Authorization": "Bearer ${AWORLD_GRAPH_TEST_TOKEN}"},
            }
        }
    }
    proc = _start(root, port)
    try:
        async with Sandbox(mcp_config=config, call_timeout=10) as box:
            connection = box.mcpservers.connection("env")
            first = await box.call_tool("env__calculator", {"expression": "6 * 7"})
            assert not first.is_error and first.content == "42"
            connects = connection.connects
            _stop(proc)
            down = await box.call_tool("env__calculator", {"expression": "1 + 1"})
            assert down.is_error
            assert down.result["error_type"] in ("server_unavailable", "server_died")
            assert "MCP server 'env'" in down.content
            no_secret(down, down.result)
            proc = _start(root, port)
            back = await box.call_tool("env__calculator", {"expression": "2 + 3"})
            assert not back.is_error and back.content == "5"
            assert connection.connects > connects
    finally:
        if proc.poll() is None:
            _stop(proc)
