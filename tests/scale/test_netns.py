"""Runs the Ray tests of this directory inside a network namespace holding only loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import INSIDE

ROOT = Path(__file__).resolve().parents[2]


def _unavailable() -> str | None:
    if os.environ.get(INSIDE) == "1":
        return "this is the run inside the namespace"
    for program in ("unshare", "ip"):
        if shutil.which(program) is None:
            return f"`{program}` is not installed, so no loopback-only network namespace"
    try:
        import ray  # noqa: F401
    except ImportError:
        return "the ray extra is not installed (pip install -e '.[ray]')"
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"unshare -n is not permitted here ({probe.stderr.strip() or probe.returncode})"
    return None


@pytest.mark.timeout(900)
def test_ray_suite_in_a_loopback_only_namespace() -> None:
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    outer = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env = {**outer, INSIDE: "1", "RAY_USAGE_STATS_ENABLED": "0"}
    # serially (-n 0): the Ray tests share one local cluster per process
    command = (
        f"ip link set lo up && exec {sys.executable} -m pytest tests/scale -q -n 0 "
        "-p no:cacheprovider"
    )
    run = subprocess.run(
        ["unshare", "-n", "sh", "-c", command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=850,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
