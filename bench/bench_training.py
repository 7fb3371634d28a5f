"""The loop on one machine: rollouts → GRPO with TRL → GGUF → served → held-out reward.

    python bench/bench_training.py            # 20 held-out tasks, 3 GRPO steps (10-40 min on 2 cores)
    python bench/bench_training.py --quick    # 3 held-out tasks, 1 step of 2 episodes (~3 min)

1. The embedded llama.cpp server serves the packaged SmolLM2-135M GGUF; ``workflows/math.yaml``
   (solver with the calculator, then the answer checker) runs the held-out tasks of the
   ``expressions`` task set greedily: the reward before.
2. transformers loads the same GGUF (``gguf_file=``, de-quantized to float32) and TRL's
   ``GRPOTrainer`` takes a few steps on CPU. Its rollouts are the same workflow on the same
   server at temperature 1 with ``record_tokens`` on (:func:`aworld_graph.train.trl.rollout_func`):
   the trainer learns from the ids the served model sampled.
3. :func:`aworld_graph.train.gguf.write_gguf` writes the trained tensors as float32 (``--tensor-type``:
   F16, or the original's Q4_1 / Q8_0, which round away a small step), a second embedded server
   serves the file, and the held-out tasks run again:
   the reward after, the paired difference and its 95 % bootstrap interval (tasks resampled).

Rows for ``bench/run.py``: the held-out reward after (ours) against before (peer); the goal is
only that training does not make it worse (``>= 1x``), which a few CPU steps rarely move.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "workflows" / "math.yaml"
TASKSET = ROOT / "aworld_graph" / "meta" / "tasksets" / "expressions.jsonl"
MAX_TOKENS = 64
"""Per LLM call, in rollouts and in evaluation (a tool call or a one-line answer)."""


@dataclasses.dataclass(kw_only=True)
class Sizes:
    held_out: int
    steps: int
    prompts_per_step: int
    generations: int
    learning_rate: float = 1e-5


FULL = Sizes(held_out=20, steps=3, prompts_per_step=2, generations=8)
QUICK = Sizes(held_out=3, steps=1, prompts_per_step=1, generations=2)


def _workflow(base_url: str, *, temperature: float, record_tokens: bool) -> Any:
    """``workflows/math.yaml`` with every model call going to the server at ``base_url``."""
    from aworld_graph import AgentConfig
    from aworld_graph.local import MODEL_ALIAS
    from aworld_graph.local.model import LOCAL_PROFILE
    from aworld_graph.model import OpenAIModel
    from aworld_graph.spec.loader import load_workflow

    model = OpenAIModel(
        model=MODEL_ALIAS,
        base_url=base_url,
        temperature=temperature,
        params={"max_tokens": MAX_TOKENS},
        profile=LOCAL_PROFILE,
        max_retries=2,
    )
    swarm = load_workflow(WORKFLOW, model=model)
    solver = swarm.nodes["solver"]
    solver.conf = dataclasses.replace(solver.conf or AgentConfig(), record_tokens=record_tokens)
    return swarm


def evaluate(base_url: str, tasks: list[Any]) -> list[float]:
    """Each task's reward (``numeric`` on the workflow's answer), greedy, in task order."""
    from aworld_graph.rewards import numeric
    from aworld_graph.train.episodes import run_episode

    async def run_all() -> list[float]:
        swarm = _workflow(base_url, temperature=0.0, record_tokens=False)
        out = []
        for i, task in enumerate(tasks):
            row = {"prompt": task.input, "expected": task.expected}
            episode = await run_episode(
                row, i, swarm=swarm, reward_func=numeric, thread_prefix="eval"
            )
            out.append(episode.reward if episode.response is not None else 0.0)
        return out

    return asyncio.run(run_all())


def paired_bootstrap(
    before: list[float], after: list[float], *, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of ``after - before`` and its 95 % percentile interval over resampled tasks."""
    import numpy as np

    diff = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(resamples, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(low), float(high)


def grpo(base_url: str, tasks: list[Any], sizes: Sizes, out_dir: Path) -> dict[str, Any]:
    """A few GRPO steps on the embedded model's weights, rollouts from the server."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from aworld_graph.local import model_path
    from aworld_graph.rewards import numeric
    from aworld_graph.train.trl import rollout_func, trl_reward
    from tests.train import gguf as loaded

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model = loaded.causal_lm()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    tag = "gguf:" + model_path().name
    rollouts = {"episodes": 0, "seconds": 0.0, "rewards": [], "failed": 0}

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        # a fresh workflow (and HTTP client) for the event loop each call runs in
        swarm = _workflow(base_url, temperature=1.0, record_tokens=True)
        started = time.perf_counter()
        out = rollout_func(swarm=swarm, tokenizer=tag)(prompts, trainer)
        rollouts["seconds"] += time.perf_counter() - started
        rollouts["episodes"] += len(prompts)
        rollouts["failed"] += sum(e is not None for e in out["aworld_error"])
        return out

    rows = [{"prompt": t.input, "expected": t.expected} for t in tasks]
    args = GRPOConfig(
        output_dir=str(out_dir),
        use_cpu=True,
        per_device_train_batch_size=sizes.prompts_per_step * sizes.generations,
        num_generations=sizes.generations,
        max_completion_length=MAX_TOKENS,
        max_steps=sizes.steps,
        learning_rate=sizes.learning_rate,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        bf16=False,
        activation_checkpointing=False,
        seed=1,
    )
    reward = trl_reward(numeric)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=loaded.tokenizer(),
        rollout_func=rollout,
    )
    started = time.perf_counter()
    result = trainer.train()
    seconds = time.perf_counter() - started
    logs = trainer.state.log_history
    moved = max(float((p.detach() - before[n]).abs().max()) for n, p in model.named_parameters())
    return {
        "model": model,
        "steps": int(result.global_step),
        "seconds": seconds,
        "rollout_seconds": rollouts["seconds"],
        "episodes": rollouts["episodes"],
        "failed": rollouts["failed"],
        "loss": [round(float(h["loss"]), 4) for h in logs if "loss" in h],
        "train_reward": [round(float(h["reward"]), 3) for h in logs if "reward" in h],
        "max_weight_change": moved,
        "finite": all(torch.isfinite(p).all() for p in model.parameters()),
    }


def changed_values(original: Path, new: Path, names: list[str]) -> tuple[int, int]:
    """How many de-quantized values of the ``names`` tensors differ between the files, of all."""
    import numpy as np
    from gguf import GGUFReader, quants

    old = {t.name: t for t in GGUFReader(original).tensors}
    changed = total = 0
    for t in GGUFReader(new).tensors:
        total += int(np.prod(t.shape))
        if t.name in names:
            a = quants.dequantize(old[t.name].data, old[t.name].tensor_type)
            b = quants.dequantize(t.data, t.tensor_type)
            changed += int(np.count_nonzero(a != b))
    return changed, total


def closed_loop(quick: bool, tensor_type: str | None = "F32") -> dict[str, Any]:
    """Run the loop; the report holds each task's reward before and after, the GRPO and
    GGUF figures and the wall times."""
    from aworld_graph.meta.tasks import load_tasks

    sizes = QUICK if quick else FULL
    tasks = load_tasks(TASKSET)
    held_out = tasks.test[: sizes.held_out]
    train = tasks.train[: sizes.steps * sizes.prompts_per_step]
    report: dict[str, Any] = {"sizes": dataclasses.asdict(sizes)}
    wall = time.perf_counter()
    saved_db = os.environ.get("AWORLD_GRAPH_DB")
    with tempfile.TemporaryDirectory(prefix="bench-training-") as tmp:
        os.environ["AWORLD_GRAPH_DB"] = str(Path(tmp) / "runs.db")  # the runs are scratch
        try:
            _loop(report, sizes, held_out, train, Path(tmp), tensor_type)
        finally:
            if saved_db is None:
                os.environ.pop("AWORLD_GRAPH_DB", None)
            else:
                os.environ["AWORLD_GRAPH_DB"] = saved_db
    report["wall_seconds"] = time.perf_counter() - wall
    mean, low, high = paired_bootstrap(report["before"], report["after"])
    report["difference"] = {"mean": mean, "ci95": [low, high]}
    return report


def _loop(
    report: dict[str, Any],
    sizes: Sizes,
    held_out: list[Any],
    train: list[Any],
    tmp: Path,
    tensor_type: str | None,
) -> None:
    from aworld_graph.local import LocalServer, model_path
    from aworld_graph.train.gguf import write_gguf

    original = model_path()
    server = LocalServer.start()
    try:
        started = time.perf_counter()
        report["before"] = evaluate(server.base_url, held_out)
        report["eval_seconds_before"] = time.perf_counter() - started
        trained = grpo(server.base_url, train, sizes, tmp / "trl")
    finally:
        server.stop()
    model = trained.pop("model")
    report["grpo"] = trained
    started = time.perf_counter()
    out = tmp / "trained" / original.name  # the same name: the same tokenizer tag
    out.parent.mkdir()
    written = write_gguf(model, original=original, out=out, tensor_type=tensor_type)
    report["write_seconds"] = time.perf_counter() - started
    changed, total = changed_values(original, out, written.updated)
    report["gguf"] = {
        "updated_tensors": len(written.updated),
        "tensors": written.tensors,
        "retyped": written.retyped,
        "changed_values": changed,
        "values": total,
        "tensor_type": tensor_type or "the original's",
    }
    server = LocalServer.start(model=out)
    try:
        started = time.perf_counter()
        report["after"] = evaluate(server.base_url, held_out)
        report["eval_seconds_after"] = time.perf_counter() - started
    finally:
        server.stop()


def describe(r: dict[str, Any]) -> str:
    g, f, d = r["grpo"], r["gguf"], r["difference"]
    n = len(r["before"])
    mean_before, mean_after = sum(r["before"]) / n, sum(r["after"]) / n
    return "\n".join(
        [
            f"held-out tasks:        {n} (expressions, test split; workflows/math.yaml, greedy)",
            f"reward before:         {mean_before:.3f}  {r['before']}",
            f"reward after:          {mean_after:.3f}  {r['after']}",
            f"after - before:        {d['mean']:+.3f}  95% paired bootstrap [{d['ci95'][0]:+.3f}, "
            f"{d['ci95'][1]:+.3f}]",
            f"GRPO:                  {g['steps']} steps, {g['episodes']} episodes "
            f"({g['failed']} failed), loss {g['loss']}, batch reward {g['train_reward']}",
            f"largest weight change: {g['max_weight_change']:.2e} (float32, before quantizing)",
            f"GGUF written:          {f['updated_tensors']}/{f['tensors']} tensors as "
            f"{f['tensor_type']}, "
            f"{f['changed_values']:,} of {f['values']:,} values changed, {len(f['retyped'])} retyped",
            f"wall time:             {r['wall_seconds']:.0f} s = eval before "
            f"{r['eval_seconds_before']:.0f} s + GRPO {g['seconds']:.0f} s (rollouts "
            f"{g['rollout_seconds']:.0f} s) + write {r['write_seconds']:.0f} s + eval after "
            f"{r['eval_seconds_after']:.0f} s (+ loading)",
        ]
    )


def run(quick: bool = False) -> list[dict[str, Any]]:
    r = closed_loop(quick)
    n = len(r["before"])
    before, after = sum(r["before"]) / n, sum(r["after"]) / n
    d = r["difference"]
    return [
        {
            "name": "held-out reward after GRPO vs before",
            "ours": round(after, 3),
            "peer": round(before, 3),
            "ratio": after / before if before else float("nan"),
            "goal": ">= 1x",
            "unit": "mean reward",
            "note": f"{n} tasks, {r['grpo']['steps']} steps; diff {d['mean']:+.3f} 95% CI "
            f"[{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]; {r['wall_seconds']:.0f} s",
        }
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="3 held-out tasks, 1 short step")
    parser.add_argument(
        "--tensor-type",
        choices=["F32", "F16", "original"],
        default="F32",
        help="how the trained tensors are written back (original: re-quantized to the "
        "file's own types, which loses steps smaller than their rounding; default F32)",
    )
    args = parser.parse_args()
    tensor_type = None if args.tensor_type == "original" else args.tensor_type
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    print(describe(closed_loop(args.quick, tensor_type)), flush=True)


if __name__ == "__main__":
    main()
