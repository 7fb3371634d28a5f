"""How a task's swarm travels to a Ray worker (``engine/_specs.py``), checked without a cluster:
a workflow loaded at the top of the driver script (``__main__``) goes as its file, and a
worker (``Worker.stream``, run in this process) rebuilds it from that file and runs it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aworld_graph import Task, TrajectorySaver, load_workflow
from aworld_graph.engine import _worker
from aworld_graph.engine._ray import _store
from aworld_graph.engine._specs import source_spec, task_spec
from aworld_graph.errors import DefinitionError
from aworld_graph.testing import FunctionModel
from tests.fake_openai import FakeOpenAI, calls, text

ROOT = Path(__file__).resolve().parents[1]
DRIVER = """
import json
from aworld_graph import load_workflow
from aworld_graph.engine._specs import source_spec

sw = load_workflow("workflows/math.yaml")  # at module level of __main__, as a driver script does
print(json.dumps(source_spec(sw)))
"""


def _driver_spec() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", DRIVER], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    spec: dict[str, Any] = json.loads(done.stdout)
    return spec


async def _drain(stream: Any) -> list[dict[str, Any]]:
    return [summary async for batch in stream for summary in batch]


def test_a_workflow_loaded_in_the_driver_script_goes_as_its_file(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _driver_spec()
    assert spec == {
        "kind": "file",
        "path": str((ROOT / "workflows" / "math.yaml").resolve()),
        "versions": {
            "workflow": 1,
            "cards": {"answer_checker": 1, "solver": 1},
        },
    }
    # a worker rebuilds it from the file and runs it; its model is the endpoint the
    # environment names, as on a Ray worker
    monkeypatch.setenv("LLM_BASE_URL", fake_openai.url)
    monkeypatch.setenv("LLM_MODEL_NAME", "fake-model")
    fake_openai.add(calls(("calculator", {"expression": "17*23"})), text("17*23 is 391."))
    saver = TrajectorySaver(tmp_path / "w.db")
    store = _store(saver)
    task = Task(input="What is 17*23?", swarm=load_workflow(ROOT / "workflows" / "math.yaml"))
    worker = _worker.Worker([], max_concurrency=1)
    try:
        (summary,) = asyncio.run(
            asyncio.wait_for(_drain(worker.stream([task_spec(task, spec)], store)), timeout=60)
        )
    finally:
        saver.close()
        for own in worker.savers.values():
            own.close()
    assert summary["status"] == "finished"
    assert summary["response"].answer == "17*23 is 391."


def test_a_workflow_given_model_objects_is_still_refused_in_the_driver_script(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model object set in the script is nothing a worker can rebuild, file or not."""
    swarm = load_workflow(
        ROOT / "workflows" / "math.yaml", models={"solver": FunctionModel(lambda m, t: "1")}
    )
    monkeypatch.setattr(sys.modules["__main__"], "adhoc_swarm", swarm, raising=False)
    with pytest.raises(DefinitionError, match=r"given model objects \(nodes 'solver'\)"):
        source_spec(swarm)
