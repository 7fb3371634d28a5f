"""Ray tests: a local 2-CPU Ray cluster inside a network namespace that holds only loopback.

Outside that namespace every test here but ``test_netns.py`` is skipped, and
``test_netns.py`` runs this directory again under ``unshare -n`` (with ``ip link set lo up``),
so nothing Ray sends can reach any address but 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

INSIDE = "AWORLD_GRAPH_NETNS"
"""Set (to ``1``) in the test run that ``test_netns.py`` starts inside the namespace."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(INSIDE) == "1":
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(
        reason="Ray tests run inside a loopback-only network namespace: see tests/scale/test_netns.py"
    )
    for item in items:
        path = Path(str(item.path))
        if here in path.parents and path.name != "test_netns.py":
            item.add_marker(skip)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    """A local Ray cluster with 2 CPUs, no dashboard, no usage stats, on 127.0.0.1; its
    processes are stopped and its temp dir removed afterwards."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths must fit
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=temp,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        yield ray
    finally:
        from aworld_graph import engine

        engine.shutdown()
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
