"""Run every benchmark in ``bench/`` and print one table of ratios.

    python bench/run.py [--quick] [--only core] [--json results.json]

Each ``bench/bench_*.py`` module exposes ``run(quick: bool) -> list[dict]`` (or ``run()``);
a row is ``{"name", "ours", "peer", "ratio", "goal"}`` plus optional ``"unit"`` and
``"note"``. ``goal`` is a bound on ``ratio`` such as ``"<= 3x"``. A module that fails is
shown as an error row; the others still run. Benchmarks report, they do not gate: the exit
status is always 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import math
import operator
import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "≤": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    "≥": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
    "=": operator.eq,
}
_GOAL = re.compile(r"^\s*(<=|>=|==|≤|≥|<|>|=)?\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*[x×]?\s*$", re.I)


def parse_goal(goal: Any) -> tuple[Callable[[float, float], bool], float] | None:
    """``"<= 3x"`` → ``(operator.le, 3.0)``; a bare number means ``<=``; else ``None``."""
    if isinstance(goal, (int, float)) and not isinstance(goal, bool):
        return operator.le, float(goal)
    if not isinstance(goal, str):
        return None
    m = _GOAL.match(goal)
    if not m:
        return None
    return _OPS[m.group(1) or "<="], float(m.group(2))


def goal_met(ratio: Any, goal: Any) -> str:
    """``"yes"``, ``"no"``, or ``"?"`` when the ratio or the goal cannot be read."""
    parsed = parse_goal(goal)
    try:
        value = float(ratio)
    except (TypeError, ValueError):
        return "?"
    if parsed is None or math.isnan(value):
        return "?"
    op, bound = parsed
    return "yes" if op(value, bound) else "no"


def discover(only: list[str] | None = None) -> list[Path]:
    """``bench/bench_*.py``, sorted; ``only`` filters by the part after ``bench_``."""
    paths = sorted(BENCH_DIR.glob("bench_*.py"))
    if only:
        paths = [p for p in paths if p.stem.removeprefix("bench_") in only or p.stem in only]
    return paths


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench.{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _call_run(fn: Callable[..., Any], quick: bool) -> Any:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    takes_arg = any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        for p in params.values()
    )
    return fn(quick) if takes_arg else fn()


def run_module(path: Path, quick: bool) -> list[dict[str, Any]]:
    """The rows of one bench module, or one error row; never raises (except Ctrl-C)."""
    bench = path.stem.removeprefix("bench_")
    started = time.perf_counter()
    try:
        module = _load(path)
        run = getattr(module, "run", None)
        if not callable(run):
            raise TypeError(f"{path.name} has no run() function")
        result = _call_run(run, quick)
        if isinstance(result, dict):
            result = [result]
        rows = []
        for item in result or []:
            row = (
                dict(item)
                if isinstance(item, dict)
                else {"name": repr(item), "error": "not a dict"}
            )
            row.setdefault("name", "?")
            row["bench"] = bench
            rows.append(row)
        if not rows:
            rows = [{"bench": bench, "name": "-", "error": "run() returned no rows"}]
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a failing bench must not stop the others
        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" at {Path(last[0].filename).name}:{last[0].lineno}" if last else ""
        rows = [{"bench": bench, "name": "-", "error": f"{type(exc).__name__}: {exc}{where}"}]
        traceback.print_exc(file=sys.stderr)
    elapsed = time.perf_counter() - started
    for row in rows:
        row.setdefault("elapsed_s", round(elapsed, 2))
    return rows


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if math.isnan(value):
        return "n/a"
    if value == 0 or 0.01 <= abs(value) < 100:
        return f"{value:.3g}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2e}"


def _cells(row: dict[str, Any]) -> list[str]:
    unit = row.get("unit") or ""
    if row.get("error"):
        return [
            row["bench"],
            str(row.get("name", "-")),
            "-",
            "-",
            "-",
            str(row.get("goal") or "-"),
            "ERROR",
            str(row["error"]),
        ]
    ours, peer = _num(row.get("ours")), _num(row.get("peer"))
    if unit:
        ours = f"{ours} {unit}" if ours not in ("-", "n/a") else ours
        peer = f"{peer} {unit}" if peer not in ("-", "n/a") else peer
    ratio = row.get("ratio")
    ratio_s = (
        f"{_num(ratio)}x"
        if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and not math.isnan(ratio)
        else _num(ratio)
    )
    return [
        row["bench"],
        str(row["name"]),
        ours,
        peer,
        ratio_s,
        str(row.get("goal") or "-"),
        goal_met(ratio, row.get("goal")),
        str(row.get("note") or ""),
    ]


HEADERS = ["bench", "name", "ours", "peer", "ratio", "goal", "met", "note"]


def render(rows: list[dict[str, Any]], *, plain: bool = False) -> None:
    """Print the table (``rich`` when installed and not ``plain``)."""
    cells = [_cells(r) for r in rows]
    if not plain:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            plain = True
    if not plain:
        table = Table(title="aworld-graph benchmarks (ratio = ours / peer)", show_lines=True)
        for h in HEADERS:
            table.add_column(
                h, justify="right" if h in ("ours", "peer", "ratio") else "left", overflow="fold"
            )
        colour = {"yes": "green", "no": "red", "ERROR": "bold red", "?": "yellow"}
        for c in cells:
            c = list(c)
            c[6] = f"[{colour.get(c[6], 'white')}]{c[6]}[/]"
            table.add_row(*c)
        Console(width=max(150, Console().width)).print(table)
        return
    widths = [
        max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(HEADERS)
    ]
    widths[-1] = len(HEADERS[-1])  # the note column is not padded
    line = "  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True))
    print(line)
    print("-" * len(line))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="run only bench_NAME.py (repeatable)"
    )
    parser.add_argument("--plain", action="store_true", help="plain text table, no rich")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    args = parser.parse_args(argv)

    for p in (str(ROOT), str(BENCH_DIR)):
        if p not in sys.path:
            sys.path.insert(0, p)
    paths = discover(args.only)
    rows: list[dict[str, Any]] = []
    for path in paths:
        print(
            f"running {path.name}{' (quick)' if args.quick else ''} ...",
            file=sys.stderr,
            flush=True,
        )
        rows.extend(run_module(path, args.quick))
    if not paths:
        print("no bench/bench_*.py modules found", file=sys.stderr)
    render(rows, plain=args.plain)
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
    sys.exit(0)
