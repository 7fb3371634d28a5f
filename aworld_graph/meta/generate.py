"""Generators of the shipped task sets (deterministic for a seed).

``python -m aworld_graph.meta.generate`` rewrites ``aworld_graph/meta/tasksets/`` from them:

* ``arithmetic.jsonl`` – multi-step arithmetic word problems (reward ``numeric``);
* ``expressions.jsonl`` – multi-step arithmetic written as expressions ("What is 47 * 12 + 35?"),
  the same skill without the reading (reward ``numeric``); small models get some of these right;
* ``tool_use.jsonl`` + ``tool_use_files/`` – questions about small record files that an agent
  answers by reading them through the bundled MCP environment server (``read_file``) and,
  for some, adding with its ``calculator`` (reward ``numeric``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from ..environment.calculator import calculate
from ..rewards import numeric
from .tasks import TASKSET_DIR, TaskItem, TaskSet, save_tasks

__all__ = [
    "SHIPPED_SIZE",
    "arithmetic_tasks",
    "expression_tasks",
    "tool_use_tasks",
    "tool_use_workflow",
    "write_shipped",
]

_NAMES = ["Mia", "Noah", "Ava", "Liam", "Zoe", "Omar", "Lena", "Ravi", "Ines", "Theo"]
_ITEMS = ["marbles", "stickers", "cards", "shells", "stamps", "beads"]

Problem = tuple[str, str, int]
"""(text, expression, answer)."""


def _marbles(r: random.Random) -> Problem:
    name, items = r.choice(_NAMES), r.choice(_ITEMS)
    a, b, c = r.randint(12, 60), r.randint(3, 9), r.randint(6, 15)
    d = r.randint(5, a)
    text = (
        f"{name} has {a} {items}. {name} buys {b} packs with {c} {items} in each pack and then "
        f"gives {d} {items} to a friend. How many {items} does {name} have now?"
    )
    return text, f"{a} + {b} * {c} - {d}", a + b * c - d


def _change(r: random.Random) -> Problem:
    name = r.choice(_NAMES)
    price, count = r.randint(3, 19), r.randint(2, 8)
    note = next(n for n in (20, 50, 100, 200) if n > price * count)
    text = (
        f"A shop sells notebooks at {price} dollars each. {name} buys {count} notebooks and pays "
        f"with a {note}-dollar note. How many dollars of change does {name} get?"
    )
    return text, f"{note} - {price} * {count}", note - price * count


def _train(r: random.Random) -> Problem:
    speed, hours, extra = r.randint(40, 95), r.randint(2, 7), r.randint(10, 80)
    text = (
        f"A train travels at {speed} km per hour for {hours} hours and then {extra} km more. "
        "How many kilometres does it travel in total?"
    )
    return text, f"{speed} * {hours} + {extra}", speed * hours + extra


def _savings(r: random.Random) -> Problem:
    name = r.choice(_NAMES)
    weekly, weeks = r.randint(7, 25), r.randint(4, 12)
    spent = r.randint(10, weekly * weeks - 1)
    text = (
        f"{name} saves {weekly} dollars every week for {weeks} weeks and then spends {spent} "
        "dollars on a bike. How many dollars does " + name + " have left?"
    )
    return text, f"{weekly} * {weeks} - {spent}", weekly * weeks - spent


def _chairs(r: random.Random) -> Problem:
    rows, per = r.randint(6, 24), r.randint(8, 16)
    broken, added = r.randint(2, 15), r.randint(3, 30)
    text = (
        f"A hall has {rows} rows of {per} chairs. {broken} broken chairs are taken away and "
        f"{added} new chairs are brought in. How many chairs are in the hall now?"
    )
    return text, f"{rows} * {per} - {broken} + {added}", rows * per - broken + added


def _muffins(r: random.Random) -> Problem:
    boxes, per_box, per_tray = r.randint(3, 9), r.randint(4, 12), r.choice([6, 8, 10, 12])
    trays = -(-(boxes * per_box + 5) // per_tray) + r.randint(0, 2)
    sold = trays * per_tray - boxes * per_box
    text = (
        f"A baker makes {trays} trays of {per_tray} muffins. She sells {sold} muffins and packs "
        f"the rest equally into {boxes} boxes. How many muffins go into each box?"
    )
    return text, f"({trays} * {per_tray} - {sold}) / {boxes}", per_box


_TEMPLATES: list[Callable[[random.Random], Problem]] = [
    _marbles,
    _change,
    _train,
    _savings,
    _chairs,
    _muffins,
]


def _splits(n: int, train: float, dev: float) -> list[str]:
    n_train, n_dev = round(n * train), round(n * dev)
    return ["train"] * n_train + ["dev"] * n_dev + ["test"] * (n - n_train - n_dev)


def arithmetic_tasks(n: int = 60, *, seed: int = 0) -> TaskSet:
    """``n`` multi-step word problems (2–3 operations each), 40 / 20 / 40 % train/dev/test."""
    r = random.Random(seed)
    items = []
    for i, split in enumerate(_splits(n, 0.4, 0.2)):
        template = _TEMPLATES[i % len(_TEMPLATES)]
        text, expression, answer = template(r)
        items.append(
            TaskItem(
                id=f"arith-{i:03d}",
                input=text,
                expected=answer,
                split=split,
                metadata={"expression": expression, "template": template.__name__.strip("_")},
            )
        )
    r.shuffle(items)  # splits stay as assigned; templates spread over them
    items.sort(key=lambda t: ("train", "dev", "test").index(t.split))
    return TaskSet(name="arithmetic", items=items, reward_name="numeric", reward=numeric)


def expression_tasks(n: int = 60, *, seed: int = 0) -> TaskSet:
    """``n`` questions "What is <expression>?" with 2–3 operations, 40 / 20 / 40 % splits."""
    r = random.Random(seed)
    shapes = ["{a} * {b} + {c}", "{a} * {b} - {c}", "({a} + {c}) * {b}", "{a} * {b} + {c} * {d}"]
    items = []
    for i, split in enumerate(_splits(n, 0.4, 0.2)):
        a, b, c, d = r.randint(12, 99), r.randint(3, 29), r.randint(10, 99), r.randint(2, 9)
        expression = shapes[i % len(shapes)].format(a=a, b=b, c=c, d=d)
        items.append(
            TaskItem(
                id=f"expr-{i:03d}",
                input=f"What is {expression}?",
                expected=int(calculate(expression)),
                split=split,
                metadata={"expression": expression},
            )
        )
    return TaskSet(name="expressions", items=items, reward_name="numeric", reward=numeric)


_SYLLABLES = ["ka", "lo", "ven", "dra", "mi", "sor", "tel", "ba", "ru", "nis", "po", "quel"]


def _town(r: random.Random, taken: set[str]) -> str:
    while True:
        name = "".join(r.choice(_SYLLABLES) for _ in range(r.randint(2, 3))).capitalize()
        if name not in taken:
            taken.add(name)
            return name


def tool_use_tasks(root: str | Path, n: int = 40, *, towns: int = 12, seed: int = 0) -> TaskSet:
    """Write ``towns`` record files under ``root/records/`` and return ``n`` questions about
    them (a lookup, or a sum over two files), 40 / 20 / 40 % train/dev/test."""
    r = random.Random(seed)
    records = Path(root) / "records"
    records.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    facts: list[dict[str, int | str]] = []
    for _ in range(towns):
        town = _town(r, taken)
        fact: dict[str, int | str] = {
            "town": town,
            "file": f"records/{town.lower()}.txt",
            "population": r.randint(1_200, 98_000),
            "schools": r.randint(2, 60),
            "founded": r.randint(1150, 1950),
        }
        (Path(root) / str(fact["file"])).write_text(
            f"town: {town}\npopulation: {fact['population']}\nschools: {fact['schools']}\n"
            f"founded: {fact['founded']}\n",
            encoding="utf-8",
        )
        facts.append(fact)
    items = []
    for i, split in enumerate(_splits(n, 0.4, 0.2)):
        a, b = r.sample(facts, 2)
        field = r.choice(["population", "schools", "founded"])
        if i % 2 == 0 or field == "founded":
            question = {
                "population": f"How many people live in {a['town']}?",
                "schools": f"How many schools does {a['town']} have?",
                "founded": f"In which year was {a['town']} founded?",
            }[field]
            text = f"{question} The town's record is the file {a['file']} in the environment."
            answer, kind = int(a[field]), "lookup"
        else:
            text = (
                f"How many {'people live' if field == 'population' else 'schools are'} in "
                f"{a['town']} and {b['town']} together? Their records are the files {a['file']} "
                f"and {b['file']} in the environment."
            )
            answer, kind = int(a[field]) + int(b[field]), "sum"
        items.append(
            TaskItem(
                id=f"tool-{i:03d}",
                input=text,
                expected=answer,
                split=split,
                metadata={
                    "kind": kind,
                    "field": field,
                    "files": [a["file"]] + ([b["file"]] if kind == "sum" else []),
                },
            )
        )
    return TaskSet(name="tool_use", items=items, reward_name="numeric", reward=numeric)


def tool_use_workflow(directory: str | Path, root: str | Path | None = None) -> Path:
    """Write a seed workflow for the ``tool_use`` tasks to ``directory/workflows/tool_use.yaml``:
    one agent with the bundled environment server (over stdio) rooted at ``root`` (default: the
    shipped files, :func:`~.tasks.tool_use_root`)."""
    import sys

    import yaml

    from .tasks import tool_use_root

    root = Path(root) if root is not None else tool_use_root()
    spec = {
        "name": "tool_use",
        "description": "Answers questions about towns from their record files.",
        "version": 1,
        "build_type": "workflow",
        "mcp_config": {
            "mcpServers": {
                "env": {
                    "command": sys.executable,
                    "args": [
                        "-m",
                        "aworld_graph.environment.server",
                        "--root",
                        str(root.resolve()),
                    ],
                }
            }
        },
        "nodes": [
            {
                "kind": "agent",
                "name": "clerk",
                "description": "Looks facts up in the environment's files.",
                "system_prompt": "Answer the question.",
                "mcp_servers": ["env"],
                "max_steps": 6,
            }
        ],
    }
    path = Path(directory) / "workflows" / "tool_use.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


SHIPPED_SIZE = 250
"""Tasks in the shipped ``arithmetic`` and ``expressions`` sets: 100 / 50 / 100, so a held-out
difference of ~0.1 can be told from none (36 tasks could not)."""


def write_shipped(directory: str | Path = TASKSET_DIR) -> list[Path]:
    """Regenerate the shipped task sets in ``directory`` (``tool_use`` keeps its 40 questions:
    its generator asks about a dozen towns, so more questions would repeat earlier ones)."""
    directory = Path(directory)
    return [
        save_tasks(arithmetic_tasks(SHIPPED_SIZE), directory / "arithmetic.jsonl"),
        save_tasks(expression_tasks(SHIPPED_SIZE), directory / "expressions.jsonl"),
        save_tasks(tool_use_tasks(directory / "tool_use_files"), directory / "tool_use.jsonl"),
    ]


if __name__ == "__main__":  # pragma: no cover
    for written in write_shipped():
        print(written)
