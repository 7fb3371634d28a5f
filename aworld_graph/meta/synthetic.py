"""A synthetic benchmark for the optimizer: a fake model whose accuracy has known causes.

The *student* (:func:`student_model`, a :class:`~aworld_graph.testing.FunctionModel`) solves
"Compute <expression>." tasks. What it gets right depends only on things the optimizer can
change, each through a different operator:

* **the prompt** (instruction rewrite): it uses the calculator tool only when its system
  prompt mentions the calculator (else it computes "mentally", right ``MENTAL`` of the time);
  with "step by step" in the prompt it miscopies the tool's result less often
  (``MISCOPY_CAREFUL`` instead of ``MISCOPY``);
* **the demonstrations** (mined demos): without any example answer in its context it appends
  a stray number to ``FORMAT_ERROR`` of its answers (the ``numeric`` reward reads the last
  number, so those fail);
* **the topology** (critic insertion): a critic that checks the answer against the tool's
  result (``agrees_with_tools``) sends a miscopied answer back, and a retry is a fresh draw.

Draws are hashes of the turn's text, so every run is deterministic. The *teacher*
(:func:`teacher_model`) plays the optimizer agent: it reads the failing runs it is shown and
adds the lesson they call for to the prompt (never one it was told had been tried).
:func:`oracle_spec` is the workflow with every feature, the best this world allows.
"""

from __future__ import annotations

import copy
import hashlib
import random
import re
from pathlib import Path
from typing import Any

import yaml

from ..checkpoint import open_store
from ..rewards import numeric
from ..testing import FunctionModel, tool_call
from .candidates import materialize
from .evaluate import evaluate
from .tasks import TaskItem, TaskSet

__all__ = [
    "FORMAT_ERROR",
    "LESSONS",
    "MENTAL",
    "MISCOPY",
    "MISCOPY_CAREFUL",
    "SEED_PROMPT",
    "oracle_spec",
    "seed_spec_dict",
    "student_model",
    "synthetic_tasks",
    "teacher_model",
    "write_seed",
]

MENTAL = 0.3
"""Chance of a right result without the calculator."""
MISCOPY = 0.4
"""Chance of miscopying the calculator's result into the answer."""
MISCOPY_CAREFUL = 0.25
"""The same, with "step by step" in the prompt."""
FORMAT_ERROR = 0.35
"""Chance of a stray trailing number in the answer when no demonstration is in context."""
SEED_PROMPT = "Answer the question."
"""The weak seed's system prompt."""

LESSONS = {
    "calculator": "Use the calculator tool for every computation.",
    "careful": "Work step by step and copy the calculator's result exactly into your answer.",
    "fallback": "Be precise.",
}
"""What the teacher may add to a prompt."""


def _draw(*parts: str) -> float:
    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()
    return int(digest[:12], 16) / float(16**12)


def _evaluate(expression: str) -> int:
    from ..environment.calculator import calculate

    return int(calculate(expression))


def _student(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    turn = str(messages[last_user]["content"])
    if "Answer to judge:" in turn:  # asked to be an LLM judge: lenient, adds nothing
        return '{"score": 1, "feedback": "Looks fine."}'
    system = str(messages[0]["content"]).lower() if messages[0]["role"] == "system" else ""
    match = re.search(r"Compute (.+?)\.(?:\s|$)", turn)
    if match is None:
        return "I cannot tell what to compute."
    expression = match.group(1)
    truth = _evaluate(expression)
    demos = any(
        m["role"] == "assistant" and m.get("content") and not m.get("tool_calls")
        for m in messages[1:last_user]
    )
    offered = any(t["function"]["name"] == "calculator" for t in tools)
    results = [m for m in messages[last_user + 1 :] if m["role"] == "tool"]
    if "calculator" in system and offered and not results:
        return tool_call("calculator", {"expression": expression})
    if results:
        value = int(re.findall(r"-?\d+", str(results[-1]["content"]))[0])
        rate = MISCOPY_CAREFUL if "step by step" in system else MISCOPY
        if _draw("copy", turn) < rate:
            value += 1 + int(_draw("by", turn) * 9)
    else:
        value = (
            truth if _draw("mental", turn) < MENTAL else truth + 1 + int(_draw("off", turn) * 20)
        )
    if not demos and _draw("format", turn) < FORMAT_ERROR:
        return f"The result is {value} (I needed 2 steps)."
    return f"The result is {value}."


def student_model() -> FunctionModel:
    """The synthetic solver model (see the module docstring)."""
    return FunctionModel(_student, name="synthetic-student")


def _teacher(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    text = str(messages[-1]["content"])
    current = re.search(r"<prompt>\n?(.*?)\n?</prompt>", text, re.S)
    prompt = current.group(1).strip() if current else ""
    tried_part = text.split("Prompts tried before", 1)[1] if "Prompts tried before" in text else ""
    tried = {p.strip() for p in re.findall(r"<prompt>\n?(.*?)\n?</prompt>", tried_part, re.S)}
    failing = text.split("## Failed run")[1:]
    wants = []
    if "calculator" in text.split("Its tools:", 1)[-1].split("\n", 1)[0] and any(
        "called calculator" not in run for run in failing
    ):
        wants.append("calculator")
    for run in failing:
        results = re.findall(r"-> (-?\d+)", run)
        answer = re.search(r"answered: (.*)", run)
        if "calculator" in run and results and answer and results[-1] not in answer.group(1):
            wants.append("careful")
            break
    wants.append("fallback")
    for want in wants:
        lesson = LESSONS[want]
        candidate = f"{prompt} {lesson}".strip()
        if lesson not in prompt and candidate not in tried:
            return f"Here is the improved prompt.\n<prompt>\n{candidate}\n</prompt>"
    return f"<prompt>\n{prompt}\n</prompt>"


def teacher_model() -> FunctionModel:
    """The synthetic optimizer-agent model (see the module docstring)."""
    return FunctionModel(_teacher, name="synthetic-teacher")


def synthetic_tasks(train: int = 20, dev: int = 12, test: int = 30, *, seed: int = 0) -> TaskSet:
    """ "Compute a * b + c." style tasks (reward ``numeric``)."""
    r = random.Random(seed)
    items = []
    for i, split in enumerate(["train"] * train + ["dev"] * dev + ["test"] * test):
        a, b, c = r.randint(12, 99), r.randint(3, 29), r.randint(10, 250)
        expression = r.choice([f"{a} * {b} + {c}", f"{a} * {b} - {c}", f"({a} + {c}) * {b}"])
        items.append(
            TaskItem(
                id=f"syn-{i:03d}",
                input=f"Compute {expression}.",
                expected=_evaluate(expression),
                split=split,
            )
        )
    return TaskSet(name="synthetic", items=items, reward=numeric, reward_name="numeric")


def seed_spec_dict() -> dict[str, Any]:
    """The weak seed: one solver with the calculator tool, a vague prompt, no demos, no critic."""
    return {
        "name": "synthetic",
        "version": 1,
        "build_type": "workflow",
        "nodes": [
            {
                "kind": "agent",
                "name": "solver",
                "version": 1,
                "description": "Solves arithmetic tasks; it has a calculator tool.",
                "system_prompt": SEED_PROMPT,
                "tools": ["calculator"],
                "max_steps": 6,
            }
        ],
    }


def write_seed(directory: str | Path) -> Path:
    """Write the seed workflow to ``directory/workflows/synthetic.yaml``; return its path."""
    path = Path(directory) / "workflows" / "synthetic.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(seed_spec_dict(), sort_keys=False), encoding="utf-8")
    return path


def oracle_spec() -> dict[str, Any]:
    """The seed with every feature: the full prompt, demonstrations and a critic loop."""
    spec = copy.deepcopy(seed_spec_dict())
    solver = spec["nodes"][0]
    solver["system_prompt"] = " ".join([SEED_PROMPT, LESSONS["calculator"], LESSONS["careful"]])
    solver["demos"] = [
        {"input": "Compute 12 * 3 + 4.", "output": "The result is 40."},
        {"input": "Compute 50 - 8.", "output": "The result is 42."},
    ]
    spec["nodes"].append(
        {
            "kind": "critic",
            "name": "solver_tool_check",
            "judges": "solver",
            "scorer": "agrees_with_tools",
            "threshold": 0.5,
            "max_rounds": 3,
        }
    )
    return spec


async def oracle_score(tasks: TaskSet, db: str | Path) -> float:
    """Mean test reward of :func:`oracle_spec` run on :func:`student_model` (the best this
    world allows), with its runs stored in the database ``db``."""
    with open_store(db) as saver:
        result = await evaluate(
            materialize(oracle_spec(), model=student_model()),
            tasks.test,
            reward=tasks.reward,
            checkpointer=saver,
        )
    return result.mean
