"""What an optimization leaves behind, under one output directory (usually the project root):

* ``nodes/<node>.v<version>.yaml`` – every node-card version on the best candidate's lineage,
  with ``version``, ``parent`` (``node@version``), ``score`` (mean training reward of the
  candidate that introduced it) and ``operator``;
* ``workflows/<stem>.v<N>.yaml`` – the best workflow: unchanged nodes refer to their original
  cards, changed and new ones to the versions above;
* ``reports/<run id>.md`` / ``.svg`` / ``.json`` – a table of every iteration (operator,
  change, scores with intervals, cost), the score-per-iteration plot with cumulative cost,
  and the same data as JSON.

When no candidate beat the seed, only the report is written.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ._plot import Point, curves_plot, score_plot
from .candidates import Candidate, node_of, nodes_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .result import OptimizeResult

__all__ = [
    "iteration_rows",
    "render_markdown",
    "rollout_curve",
    "write_comparison",
    "write_outputs",
]

_CARD_HEAD = ("kind", "name", "version", "parent", "score", "operator")
SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    )


_Dumper.add_representer(str, _str)


def _yaml(data: Any, schema: str, directory: Path) -> str:
    target = SCHEMAS / f"{schema}.schema.json"
    hint = os.path.relpath(target, directory.resolve())
    if hint.count("..") > 2:
        hint = target.as_uri()
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    return f"# yaml-language-server: $schema={hint}\n{body}"


def _fmt(value: float | None, digits: int = 3) -> str:
    return (
        "–"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def _ci(c: Candidate, split: str) -> str:
    ev = c.evals.get(split)
    if ev is None:
        return "–"
    return f"{ev.mean:.3f} [{ev.ci_low:.2f}, {ev.ci_high:.2f}]"


def iteration_rows(result: OptimizeResult) -> list[dict[str, Any]]:
    """One row per iteration (0 = the seed's evaluation) with the cumulative cost."""
    rows = []
    calls = tokens = 0
    seconds = 0.0
    seed = result.seed
    for step in [None, *result.steps]:
        c = seed if step is None else (result.candidate(step.candidate) if step.candidate else None)
        cost = step.cost if step is not None else {}
        calls += int(cost.get("llm_calls", 0))
        tokens += int(cost.get("tokens", 0))
        seconds += float(cost.get("seconds", 0.0))
        if c is not None:
            for split in ("train", "dev"):
                ev = c.evals.get(split)
                if ev is not None:
                    calls, tokens, seconds = (
                        calls + ev.llm_calls,
                        tokens + ev.tokens,
                        seconds + ev.seconds,
                    )
        rows.append(
            {
                "iteration": 0 if step is None else step.iteration,
                "operator": "seed"
                if step is None
                else (c.operator if c is not None else step.operator),
                "candidate": c.id if c is not None else None,
                "parent": None if step is None else step.parent,
                "change": c.change if c is not None else (step.note if step is not None else ""),
                "train": c.score("train") if c is not None else None,
                "train_ci": list(c.evals["train"].ci)
                if c is not None and "train" in c.evals
                else None,
                "dev": c.score("dev") if c is not None else None,
                "outcome": "seed" if step is None else step.outcome,
                "llm_calls": calls,
                "tokens": tokens,
                "seconds": round(seconds, 2),
            }
        )
    return rows


def render_markdown(result: OptimizeResult, plot_name: str | None = None) -> str:
    """The report as Markdown."""
    seed, best, t = result.seed, result.best, result.tasks
    s = result.spent
    lines = [
        f"# Optimization of `{result.workflow}` (run `{result.run_id}`)",
        "",
        f"Task set `{t.name}`: {len(t.train)} train / {len(t.dev)} dev / {len(t.test)} test tasks, "
        f"reward `{t.reward_name}`. Budget {result.budget}; spent {s.llm_calls} LLM calls, "
        f"{s.tokens} tokens, {s.seconds:.1f} s in {s.iterations} iterations. "
        f"Stopped: {result.stop_reason}.",
        "",
        f"| split | seed `{seed.id}` | best `{best.id}` |",
        "|---|---|---|",
    ]
    for split in ("train", "dev", "test"):
        lines.append(f"| {split} | {_ci(seed, split)} | {_ci(best, split)} |")
    lines.append("")
    if result.comparison is not None:
        lines += [f"Held-out test, best − seed: **{result.comparison}**.", ""]
    chain = result.lineage()
    lines.append(
        "Lineage of the best: "
        + " → ".join(
            f"`{c.id}`" + (f" ({c.operator}: {c.change})" if c.parent else "") for c in chain
        )
    )
    lines.append("")
    if plot_name:
        lines += [f"![score per iteration]({plot_name})", ""]
    lines += [
        "| iter | operator | candidate | parent | change | train (95% CI) | dev | outcome | LLM calls | tokens | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in iteration_rows(result):
        change = str(r["change"]).replace("|", "\\|").replace("\n", " ")
        if len(change) > 90:
            change = change[:89] + "…"
        train = _fmt(r["train"])
        if r["train_ci"]:
            train += f" [{r['train_ci'][0]:.2f}, {r['train_ci'][1]:.2f}]"
        lines.append(
            f"| {r['iteration']} | {r['operator']} | {r['candidate'] or '–'} | {r['parent'] or '–'} | "
            f"{change} | {train} | {_fmt(r['dev'])} | {r['outcome']} | {r['llm_calls']} | "
            f"{r['tokens']} | {r['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def _free(directory: Path, stem: str, version: int, text: str, suffix: str = ".yaml") -> Path:
    """``<stem>.v<version><suffix>``, or a later version when that name holds other content."""
    while True:
        path = directory / f"{stem}.v{version}{suffix}"
        if not path.exists() or path.read_text(encoding="utf-8") == text:
            return path
        version += 1


def _card_versions(result: OptimizeResult) -> dict[str, list[dict[str, Any]]]:
    """Node → the card versions introduced along the best candidate's lineage, oldest first."""
    found: dict[str, list[dict[str, Any]]] = {}
    chain = result.lineage()
    for parent, child in zip(chain, chain[1:], strict=False):
        for node in nodes_of(child.spec):
            before = node_of(parent.spec, node["name"])
            if before is None or before.get("version") != node.get("version"):
                head = {k: node[k] for k in _CARD_HEAD if k in node}
                found.setdefault(node["name"], []).append({**head, **node})
    return found


def _write_workflow(
    result: OptimizeResult, wf_dir: Path, nodes_dir: Path, card_files: dict[str, Path]
) -> Path:
    """The best workflow, its changed nodes referring to their new card versions."""
    from ..spec import load_workflow

    best = result.best
    data = json.loads(json.dumps(best.spec))
    seed_version = int(result.seed.spec.get("version") or 1)
    stem = result.workflow.stem.split(".v")[0]
    entries: list[Any] = []
    for node in data["nodes"]:
        name = node.get("name") if isinstance(node, dict) else None
        origin = result.origins.get(str(name))
        if name in card_files:
            entries.append({"card": os.path.relpath(card_files[name], wf_dir)})
        elif origin and node == node_of(result.seed.spec, str(name)):
            origin_path = Path(origin) if Path(origin).is_absolute() else Path.cwd() / origin
            if origin_path.resolve().parent == nodes_dir.resolve() and origin_path.stem == name:
                entries.append(name)
            else:
                entries.append({"card": os.path.relpath(origin_path.resolve(), wf_dir.resolve())})
        else:
            entries.append(node)
    data["nodes"] = entries
    header = (
        f"# Written by `aworld-graph optimize` (run {result.run_id}, candidate {best.id}): "
        f"train {_fmt(best.score('train'))}, dev {_fmt(best.score('dev'))}, test {_fmt(best.score('test'))} "
        f"(seed: test {_fmt(result.seed.score('test'))}).\n"
    )
    version = seed_version + 1
    while True:
        data["version"] = version
        text = _yaml(data, "workflow", wf_dir)
        wf_path = wf_dir / f"{stem}.v{version}.yaml"
        if not wf_path.exists() or wf_path.read_text(encoding="utf-8") == header + text:
            break
        version += 1
    wf_path.write_text(header + text, encoding="utf-8")
    load_workflow(wf_path)  # what we wrote must load
    return wf_path


def write_outputs(result: OptimizeResult, out: str | Path) -> list[Path]:
    """Write cards, the best workflow (unless the seed stayed best) and the report under
    ``out``; return the files (the workflow first)."""
    out = Path(out)
    nodes_dir, wf_dir, rep_dir = out / "nodes", out / "workflows", out / "reports"
    for d in (nodes_dir, wf_dir, rep_dir):
        d.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    card_files: dict[str, Path] = {}
    for name, versions in _card_versions(result).items():
        for card in versions:
            text = _yaml(card, "node", nodes_dir)
            path = nodes_dir / f"{name}.v{card.get('version', 1)}.yaml"
            if path.exists() and path.read_text(encoding="utf-8") != text:
                path = _free(
                    nodes_dir, f"{name}.r{result.run_id[-6:]}", int(card.get("version", 1)), text
                )
            path.write_text(text, encoding="utf-8")
            written.append(path)
            card_files[name] = path
    wf_path = None
    if result.best.id != result.seed.id:
        wf_path = _write_workflow(result, wf_dir, nodes_dir, card_files)
        written.insert(0, wf_path)
    base = result.run_id
    plot_path = rep_dir / f"{base}.svg"
    points = [
        Point(
            iteration=c.iteration,
            train=c.score("train"),
            dev=c.score("dev") if c.status in ("seed", "accepted") else None,
            accepted=c.status in ("seed", "accepted"),
            label=f"{c.id} {c.operator}: {c.change}",
        )
        for c in result.candidates
        if c.score("train") is not None
    ]
    rows = iteration_rows(result)
    plot_path.write_text(
        score_plot(
            points,
            [(r["iteration"], float(r["llm_calls"])) for r in rows],
            title=f"{result.workflow.stem}: score per iteration ({result.tasks.name})",
        ),
        encoding="utf-8",
    )
    md_path = rep_dir / f"{base}.md"
    md_path.write_text(render_markdown(result, plot_path.name), encoding="utf-8")
    json_path = rep_dir / f"{base}.json"
    json_path.write_text(
        json.dumps(
            {
                "run_id": result.run_id,
                "workflow": str(result.workflow),
                "best_workflow": str(wf_path) if wf_path else None,
                "tasks": result.tasks.name,
                "budget": str(result.budget),
                "spent": vars(result.spent),
                "stop_reason": result.stop_reason,
                "seed": {s: result.seed.score(s) for s in ("train", "dev", "test")},
                "best": {
                    "id": result.best.id,
                    **{s: result.best.score(s) for s in ("train", "dev", "test")},
                },
                "comparison": vars(result.comparison) if result.comparison else None,
                "iterations": rows,
                "rollout_curve": rollout_curve(result),
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    return [*written, md_path, plot_path, json_path]


def rollout_curve(result: OptimizeResult) -> list[dict[str, Any]]:
    """After each training or dev evaluation, in the order the search made them: the rollouts
    (task runs) so far and the best scores so far – the best dev score among the pool (what the
    search would return if it stopped there) and the best training score."""
    points: list[dict[str, Any]] = []
    rollouts = 0
    best_dev: float | None = None
    best_train: float | None = None
    for c in sorted(result.candidates, key=lambda c: c.id):
        for split in ("train", "dev"):
            ev = c.evals.get(split)
            if ev is None:
                continue
            rollouts += ev.n
            if c.status in ("seed", "accepted"):
                if split == "train":
                    best_train = ev.mean if best_train is None else max(best_train, ev.mean)
                else:
                    best_dev = ev.mean if best_dev is None else max(best_dev, ev.mean)
            points.append(
                {
                    "rollouts": rollouts,
                    "candidate": c.id,
                    "split": split,
                    "best_dev": best_dev,
                    "best_train": best_train,
                }
            )
    return points


def write_comparison(
    results: Mapping[str, OptimizeResult], out: str | Path, name: str = "search-vs-random"
) -> list[Path]:
    """Compare searches of the same workflow and task set (e.g. ``{"search": a, "random
    search": b}``): ``reports/<name>.svg`` plots each one's best dev score against the rollouts
    it took (its best's held-out test score as a diamond at the end), ``.md`` has the table,
    ``.json`` the curves."""
    rep_dir = Path(out) / "reports"
    rep_dir.mkdir(parents=True, exist_ok=True)
    curves = {label: rollout_curve(r) for label, r in results.items()}
    series = [
        (label, [(p["rollouts"], p["best_dev"]) for p in pts if p["best_dev"] is not None])
        for label, pts in curves.items()
    ]
    marks = [
        (f"{label} (test of its best)", float(pts[-1]["rollouts"]), r.best.score("test") or 0.0)
        for (label, pts), r in zip(curves.items(), results.values(), strict=True)
        if pts and r.best.score("test") is not None
    ]
    first = next(iter(results.values()))
    svg = rep_dir / f"{name}.svg"
    svg.write_text(
        curves_plot(
            series,
            title=f"{first.workflow.stem} on {first.tasks.name}: best dev score vs rollouts",
            x_label="rollouts (training and dev task runs)",
            y_label="mean reward of the best so far (dev)",
            marks=marks,
        ),
        encoding="utf-8",
    )
    lines = [
        f"# {first.workflow.stem} on `{first.tasks.name}`: " + " vs ".join(results),
        "",
        f"![best dev score vs rollouts]({svg.name})",
        "",
        "| search | iterations | rollouts | LLM calls | tokens | seconds | best | train | dev "
        "| test | test, best − seed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, r in results.items():
        pts = curves[label]
        lines.append(
            f"| {label} | {r.spent.iterations} | {pts[-1]['rollouts'] if pts else 0} | "
            f"{r.spent.llm_calls} | {r.spent.tokens} | {r.spent.seconds:.0f} | `{r.best.id}` | "
            f"{_fmt(r.best.score('train'))} | {_fmt(r.best.score('dev'))} | "
            f"{_fmt(r.best.score('test'))} | {r.comparison if r.comparison else '–'} |"
        )
    md = rep_dir / f"{name}.md"
    md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = rep_dir / f"{name}.json"
    data.write_text(json.dumps({"curves": curves}, indent=2), encoding="utf-8")
    return [md, svg, data]
