"""Graph parts the topology edits insert, named in cards by import path:

* ``aworld_graph.meta.checks:arguments_match_question`` – a critic scorer that checks the judged
  agent's tool call against the question: where the question writes an expression out ("What
  is (50 + 55) * 18?"), the call must compute it (same value: a dropped operand or parenthesis
  fails); otherwise every number of the question, and no other, must be in the call's
  arguments (most misses of a small model with a calculator are a dropped operand, a lost
  parenthesis or an invented decimal in the call, which a check of the answer against the
  tool's result cannot see). It reads the question and the call only, never the expected
  answer;
* ``aworld_graph.meta.checks:majority_vote`` – the vote node of a ``self_consistency`` rewrite:
  of the answers of ``<node>``, ``<node>_s2``, … it keeps the one most of them agree on (by the
  last number in it, as the ``numeric`` reward reads answers; by the text otherwise), the first
  sample's on a tie.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..state import SwarmState

__all__ = [
    "argument_text",
    "arguments_match_question",
    "literal_expression",
    "majority_vote",
    "same_value",
]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _numbers(text: str) -> Counter[str]:
    return Counter(n.lstrip("-").lstrip("0") or "0" for n in _NUMBER.findall(text.replace(",", "")))


def _question(state: SwarmState) -> str:
    return str(state.get("input") or "")


def arguments_match_question(output: str, state: SwarmState) -> tuple[float, str]:
    """1 when the judged agent's last tool call uses exactly the question's numbers (see the
    module docstring); 0 with what is missing or extra otherwise. A question without numbers,
    or a call without any, passes (there is nothing to compare)."""
    wanted = _numbers(_question(state))
    messages = list(state.get("messages") or [])
    last: Mapping[str, Any] = next(
        (m for m in reversed(messages) if m.get("role") == "assistant"), {}
    )
    turn = [  # the judged agent's latest turn (the critic runs right after it)
        m
        for m in messages
        if m.get("_agent") == last.get("_agent") and m.get("_turn") == last.get("_turn")
    ]
    calls = [tc for m in turn if m.get("role") == "assistant" for tc in m.get("tool_calls") or []]
    if not wanted:
        return 1.0, "The question has no numbers to check the tool call against."
    if not calls:
        return 0.0, (
            "You answered without calling a tool. Call the calculator with the expression from "
            "the question, then answer with its result."
        )
    arguments = str((calls[-1].get("function") or {}).get("arguments") or "")
    literal = literal_expression(_question(state))
    if literal is not None:  # the question writes the expression out: the call must compute it
        same = same_value(literal, argument_text(arguments))
        if same is not None:
            if same:
                return 1.0, "The tool call computes the question's expression."
            return 0.0, (
                f"Your tool call {arguments} does not compute the question's expression "
                f"{literal}. Call the calculator again with {literal} exactly as written "
                "(keep every number, operator and parenthesis), then answer with its result."
            )
    used = _numbers(arguments)
    if not used:
        return 1.0, "The tool call has no numbers to check."
    missing, extra = wanted - used, used - wanted
    if not missing and not extra:
        return 1.0, "The tool call uses the question's numbers."
    parts = []
    if missing:
        parts.append(f"it leaves out {', '.join(sorted(missing.elements()))}")
    if extra:
        parts.append(
            f"it uses {', '.join(sorted(extra.elements()))}, which the question does not have"
        )
    return 0.0, (
        f"Your tool call {arguments} does not match the question: {'; '.join(parts)}. Call the "
        "calculator again with the expression written exactly as in the question, then answer "
        "with its result."
    )


_LITERAL = re.compile(r"[\d(][\d\s+\-*/().]*[\d)]")
_OPERATOR = re.compile(r"\d\s*\)?\s*[-+*/]\s*\(?\s*\d")


def literal_expression(question: str) -> str | None:
    """The arithmetic expression the question writes out (``(50 + 55) * 18``), if it has one."""
    found = [m.group(0).strip() for m in _LITERAL.finditer(question)]
    found = [f for f in found if _OPERATOR.search(f) and f.count("(") == f.count(")")]
    return max(found, key=len) if found else None


def argument_text(arguments: str) -> str:
    """The expression a call's arguments hold (the JSON's string values; else the raw text)."""
    try:
        data = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(data, dict):
        return " ".join(str(v) for v in data.values() if isinstance(v, (str, int, float)))
    return str(data)


def same_value(want: str, got: str) -> bool | None:
    """Whether two expressions have the same value (``None`` when ``want`` has none)."""
    from ..environment.calculator import CalculatorError, calculate

    try:
        expected = float(calculate(want))
    except (CalculatorError, ArithmeticError, ValueError):
        return None
    try:
        return abs(float(calculate(got)) - expected) < 1e-9 * max(1.0, abs(expected))
    except (CalculatorError, ArithmeticError, ValueError):
        return False


def _key(answer: str) -> str:
    numbers = _NUMBER.findall(answer.replace(",", ""))
    if numbers:
        value = float(numbers[-1])
        return f"{value:g}"
    return " ".join(answer.lower().split())


def majority_vote(state: SwarmState) -> dict[str, Any]:
    """The vote node of a self-consistency rewrite (see the module docstring)."""
    outputs = state.get("outputs") or {}
    groups: dict[str, list[tuple[int, str]]] = {}
    for name, value in outputs.items():
        match = re.fullmatch(r"(.+)_s(\d+)", str(name))
        if match and isinstance(value, str) and isinstance(outputs.get(match.group(1)), str):
            groups.setdefault(match.group(1), []).append((int(match.group(2)), value))
    if not groups:
        return {}
    base = max(groups, key=lambda b: len(groups[b]))
    samples = [str(outputs[base])] + [v for _, v in sorted(groups[base])]
    samples = [s for s in samples if s.strip()] or samples
    counts = Counter(_key(s) for s in samples)
    top = max(counts.values())
    winner = next(s for s in samples if counts[_key(s)] == top)  # ties: the first sample's
    return {"output": winner}
