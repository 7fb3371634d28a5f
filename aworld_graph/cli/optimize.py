"""``aworld-graph optimize``: rewrite a workflow's nodes and keep what wins on a task set (a thin
layer over :func:`aworld_graph.meta.optimize`)."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Any, Literal

import click

from ._app import db_option, main
from .run import again_command, engine_options, run_conf_of

__all__ = ["optimize_command"]


def _default_out(workflow: Path) -> Path:
    """Alongside the workflow: the project root when it lies in ``workflows/``."""
    parent = workflow.resolve().parent
    return parent.parent if parent.name == "workflows" else parent


def _num(value: Any) -> str:
    return (
        "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"
    )


class _Progress:
    """Prints optimizer events as they come (rich markup; plain text when not a terminal)."""

    def __init__(self, quiet: bool) -> None:
        from rich.console import Console

        self.console = Console(highlight=False, soft_wrap=True)
        self.quiet = quiet

    def __call__(self, e: dict[str, Any]) -> None:
        if self.quiet:
            return
        kind, c = e["event"], self.console
        if kind == "start":
            word = "resuming" if e["resumed"] else "starting"
            c.print(
                f"[bold]{word}[/] run {e['run_id']}: {e['train']} train / {e['dev']} dev / {e['test']} "
                f"test tasks, budget {e['budget']}"
                + (
                    f" ({e['candidates']} candidates, {e['iterations']} iterations done)"
                    if e["resumed"]
                    else ""
                )
            )
        elif kind == "eval":
            c.print(
                f"  eval {e['candidate']} on {e['split']}: {_num(e['mean'])} "
                f"[{_num(e['ci'][0])}, {_num(e['ci'][1])}] ({e['llm_calls']} calls, {e['seconds']:.1f}s)"
            )
        elif kind == "candidate":
            c.print(
                f"[cyan]iter {e['iteration']}[/] {e['operator']} on {e['parent']} -> {e['candidate']}: {e['change']}"
            )
        elif kind == "decision":
            color = {"accepted": "green", "rejected": "yellow"}.get(e["status"], "red")
            s = e["spent"]
            c.print(
                f"  [{color}]{e['status']}[/] {e['candidate']}: train {_num(e['train'])} vs parent "
                f"{_num(e['parent_train'])}"
                + (f", dev {_num(e['dev'])}" if e.get("dev") is not None else "")
                + f"; best {e['best']}; spent {s.llm_calls} calls, {s.tokens} tokens, {s.seconds:.0f}s"
            )
        elif kind == "skip":
            c.print(f"[cyan]iter {e['iteration']}[/] {e['operator']}: {e['note']}")
        elif kind == "stop":
            c.print(f"[bold]stopped[/]: {e['reason']}")


def _sizes(text: str) -> dict[str, int]:
    """``train=30,dev=20`` as split sizes (a usage error names what is wrong)."""
    sizes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        split, _, value = part.partition("=")
        if split.strip() not in ("train", "dev", "test") or not value.strip().isdigit():
            raise click.BadParameter(
                f"{part!r}: write split=N for train, dev or test, e.g. train=30,dev=20",
                param_hint="--subset",
            )
        sizes[split.strip()] = int(value)
    return sizes


@main.command("optimize")
@click.argument("workflow", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--tasks",
    "tasks_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Task set: JSONL lines {input, expected[, split, id, metadata]}.",
)
@click.option(
    "--budget",
    default="iterations=12",
    show_default=True,
    help="Limits: calls=N, tokens=N, time=20m, iterations=N (comma-separated).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Where nodes/, workflows/ and reports/ go (default: alongside the workflow).",
)
@db_option()
@click.option(
    "--operators",
    default=None,
    help="Operators taking turns, comma-separated, of instructions, rewrite_prompt, demos, "
    "topology (default: instructions,demos,topology, with rewrite_prompt first when "
    "--optimizer-model or an LLM_* endpoint is set).",
)
@click.option(
    "--search",
    type=click.Choice(["guided", "random"]),
    default="guided",
    show_default=True,
    help="guided, or random search over the same operators (a baseline).",
)
@click.option(
    "--subset",
    default=None,
    help="Search on the first N tasks of splits, e.g. train=30,dev=20 (test stays whole).",
)
@click.option(
    "--retry-errors",
    is_flag=True,
    help="On a resume, run again the stored runs that ended in an error (default: read back).",
)
@click.option(
    "--selection",
    type=click.Choice(["best", "pareto"]),
    default="best",
    show_default=True,
    help="Parent choice: the best on train, or sampled from the per-task Pareto front.",
)
@click.option("--reward", default=None, help="Reward function (overrides the task set's header).")
@click.option(
    "--optimizer-model",
    default=None,
    help="Model name for the optimizer agent (at the LLM_* endpoint; default: as the agents).",
)
@click.option(
    "--swap-model",
    "swap_models",
    multiple=True,
    help="A model name an agent may be switched to (repeatable).",
)
@click.option(
    "--tool",
    "tools",
    multiple=True,
    help="A tool agents may be given or lose (repeatable; default: calculator).",
)
@click.option(
    "--concurrency", type=int, default=4, show_default=True, help="Runs in flight at once."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the search.")
@click.option(
    "--run-id", default=None, help="Optimization id (default: derived; the same command resumes)."
)
@click.option("--json", "as_json", is_flag=True, help="Print only a JSON summary at the end.")
@engine_options
def optimize_command(
    workflow: str,
    tasks_file: str,
    budget: str,
    out: str | None,
    db: str | None,
    operators: str | None,
    search: Literal["guided", "random"],  # click.Choice
    subset: str | None,
    retry_errors: bool,
    selection: str,
    reward: str | None,
    optimizer_model: str | None,
    swap_models: tuple[str, ...],
    tools: tuple[str, ...],
    concurrency: int,
    seed: int,
    run_id: str | None,
    as_json: bool,
    engine: Literal["local", "ray"],  # click.Choice
    workers: int,
    progress: bool | None,
) -> None:
    """Optimize WORKFLOW on a task set: rewrite prompts, mine demonstrations, edit the topology;
    select on train, confirm on dev, report on test. Interrupted? Run the same command again.

    \b
    Examples:
      aworld-graph optimize workflows/math.yaml --tasks aworld_graph/meta/tasksets/arithmetic.jsonl \\
          --budget calls=400,time=30m
      aworld-graph optimize workflows/math.yaml --tasks tasks.jsonl --budget iterations=6 --out /tmp/opt
      aworld-graph optimize workflows/math.yaml --tasks tasks.jsonl --engine ray --workers 4
    """
    from ..agent import resolve_model
    from ..config import AgentConfig
    from ..meta import Budget, default_operators, load_tasks, optimize

    path = Path(workflow)
    task_set = load_tasks(tasks_file, reward=reward)
    if subset:
        task_set = task_set.subset(**_sizes(subset))
    chosen = [n.strip() for n in operators.split(",") if n.strip()] if operators else None
    ops = default_operators(
        resolve_model(AgentConfig(llm_model_name=optimizer_model)) if optimizer_model else None,
        names=chosen,
        models=swap_models,
        tools=tools or ("calculator",),
    )
    events = _Progress(quiet=as_json)
    # a bar per evaluation batch only when asked for: the events say how the search goes
    run_conf = run_conf_of(engine, workers, concurrency, bool(progress))
    try:
        result = asyncio.run(
            optimize(
                path,
                task_set,
                out=Path(out) if out else _default_out(path),
                budget=Budget.parse(budget),
                operators=ops,
                db=db,
                selection=selection,
                search=search,
                retry_errors=retry_errors,
                concurrency=concurrency,
                run_conf=run_conf if engine == "ray" or progress else None,
                seed=seed,
                run_id=run_id,
                on_event=events,
            )
        )
    except KeyboardInterrupt:
        if engine == "ray":
            from ..engine import shutdown

            shutdown()
        again = again_command(click.get_current_context())
        click.echo(
            f"interrupted; to resume the optimization (finished evaluations are kept), run\n"
            f"  {again}",
            err=True,
        )
        sys.exit(130)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "run_id": result.run_id,
                    "best": result.best.id,
                    "seed_scores": {s: result.seed.score(s) for s in ("train", "dev", "test")},
                    "best_scores": {s: result.best.score(s) for s in ("train", "dev", "test")},
                    "comparison": vars(result.comparison) if result.comparison else None,
                    "spent": vars(result.spent),
                    "stop_reason": result.stop_reason,
                    "outputs": [str(p) for p in result.outputs],
                },
                indent=2,
            )
        )
        return
    from rich.table import Table

    table = Table(title=f"seed {result.seed.id} vs best {result.best.id}")
    table.add_column("split")
    table.add_column("seed", justify="right")
    table.add_column("best", justify="right")
    for split in ("train", "dev", "test"):
        table.add_row(split, _num(result.seed.score(split)), _num(result.best.score(split)))
    events.console.print(table)
    if result.comparison is not None:
        events.console.print(f"test, best - seed: {result.comparison}")
    for p in result.outputs:
        events.console.print(f"wrote {p}")
