"""Fixtures for the environment tests: real MCP servers, started as child processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BAD_SERVER = Path(__file__).with_name("bad_server.py")
SECRET_ENV = "fake-env-secret-7d1f"
SECRET_TOKEN = "fake-bearer-token-93ac"
os.environ["AWORLD_GRAPH_TEST_TOKEN"] = (
    SECRET_TOKEN  # configs write "Bearer ${AWORLD_GRAPH_TEST_TOKEN}"
)


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def bundled(root: Path, **extra: Any) -> dict[str, Any]:
    """A stdio server entry for the bundled environment server confined to ``root``."""
    return {
        "command": sys.executable,
        "args": ["-m", "aworld_graph.environment.server", "--root", str(root)],
        "cwd": str(REPO),
        **extra,
    }


def bad(*flags: str, **extra: Any) -> dict[str, Any]:
    """A stdio server entry for the misbehaving test server."""
    return {
        "command": sys.executable,
        "args": [str(BAD_SERVER), *flags],
        "env": {"API_TOKEN": SECRET_ENV},
        **extra,
    }


def make_root(base: Path) -> Path:
    """An environment root with a few files, and a secret file and links outside it."""
    root = base / "root"
    (root / "docs").mkdir(parents=True)
    (root / "hello.txt").write_text("hello world\nsecond line\n")
    (root / "docs" / "notes.md").write_text("# Notes\nThe answer is 42.\n")
    (root / "big.txt").write_text("y" * 20_000)
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (root / "link_out").symlink_to(outside / "secret.txt")
    (root / "dir_out").symlink_to(outside, target_is_directory=True)
    (root / "link_in").symlink_to(root / "hello.txt")
    return root


@pytest.fixture(scope="module")
def env_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_root(tmp_path_factory.mktemp("env"))


def _serve_http(root: Path, transport: str) -> Iterator[str]:
    """The bundled server over HTTP on 127.0.0.1 (a free port) in a subprocess; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "aworld_graph.environment.server",
         "--transport", transport, "--port", "0", "--root", str(root)],
        cwd=REPO, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()  # printed once the socket listens; "" if the server died
        match = re.search(rf"serving {transport} on (http://\S+)", line)
        assert match, f"server did not announce its URL: {line!r}"
        drain = threading.Thread(target=proc.stderr.read, daemon=True)  # keep the pipe from filling
        drain.start()
        yield match.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()


@pytest.fixture(scope="module")
def http_url(env_root: Path) -> Iterator[str]:
    """The bundled server over streamable HTTP."""
    yield from _serve_http(env_root, "streamable-http")


@pytest.fixture(scope="module")
def sse_url(env_root: Path) -> Iterator[str]:
    """The bundled server over the legacy SSE transport."""
    yield from _serve_http(env_root, "sse")


def no_secret(*values: object) -> None:
    """Assert that no secret appears in the text of any of ``values``."""
    for value in values:
        text = repr(value) + str(value)
        assert SECRET_ENV not in text and SECRET_TOKEN not in text, text


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
