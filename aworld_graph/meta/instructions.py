"""The ``instructions`` operator: new system prompts without an optimizer model.

A small model asked to rewrite a prompt mostly repeats it, so this operator writes prompts
itself, from three sources:

* **patterns for the node's role** – short imperative sentences for an agent with tools (use
  the tool for every computation, pass the question's numbers to it exactly as written, copy
  its result) and for the kind of answer the reward reads (answer with the number only, …);
* **what the failing runs show** (read from the checkpoint database, no model call): no tool
  call → the "use the tool" patterns first; a tool call whose numbers are not the question's →
  "copy the question into the call"; an answer that does not state the tool's result → "copy
  the result"; extra words or numbers → "the number only";
* **earlier winners** – mutation (a pattern added, a sentence dropped, the prompt replaced by
  the patterns alone) and crossover (the sentences of two accepted prompts for the node).

Each attempt from one parent tries the next idea: the best-supported pattern added, the short
imperative prompt, a crossover of the two best winners, then mutations drawn with the search's
seeded randomness (all of them drawn at random in random search).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..export.runs import Run, load_run
from ._context import OperatorContext, Proposal
from .candidates import Candidate, node_of
from .checks import argument_text, literal_expression, same_value
from .edits import bump_card

__all__ = ["PATTERNS", "PatternPrompt", "diagnose", "sentences"]

PATTERNS: dict[str, tuple[str, ...]] = {
    "use_tool": (
        "Use the {tool} tool for every computation.",
        "Always call the {tool} tool before you answer; never compute in your head.",
    ),
    "arguments": (
        "Pass the expression from the question to the {tool} tool exactly as it is written.",
        "Copy every number and operator of the question into the {tool} call; drop nothing.",
        "Keep every parenthesis of the question in the {tool} call.",
    ),
    "copy_result": (
        "Copy the {tool} tool's result exactly into your answer.",
        "Your answer is the number the {tool} tool returned.",
    ),
    "number_only": (
        "Answer with the number only.",
        "Reply with the final number and nothing else.",
    ),
    "brief": ("Be brief.", "Do not explain your steps."),
}
"""Instruction patterns by what they fix; ``{tool}`` is the node's tool."""

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def sentences(prompt: str) -> list[str]:
    """The sentences of a prompt, in order."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", prompt.strip()) if s.strip()]


def _numbers(text: str) -> list[str]:
    return sorted(n.lstrip("0") or "0" for n in _NUMBER.findall(text.replace(",", "")))


def diagnose(run: Run, node: str, question: str) -> list[str]:
    """What went wrong in ``node``'s part of a failed run, as :data:`PATTERNS` keys."""
    mine = [m for m in run.messages if m.get("_agent") == node]
    calls = [tc for m in mine if m.get("role") == "assistant" for tc in m.get("tool_calls") or []]
    results = [str(m.get("content", "")) for m in mine if m.get("role") == "tool"]
    answers = [
        str(m["content"])
        for m in mine
        if m.get("role") == "assistant" and m.get("content") and not m.get("tool_calls")
    ]
    found: list[str] = []
    if not calls:
        found.append("use_tool")
    else:
        args = str((calls[-1].get("function") or {}).get("arguments", ""))
        literal = literal_expression(question)
        same = same_value(literal, argument_text(args)) if literal is not None else None
        if same is False or (same is None and _numbers(args) != _numbers(question)):
            found.append("arguments")
    answer = answers[-1] if answers else ""
    if results and answer:
        result = _NUMBER.findall(results[-1].replace(",", ""))
        if result and result[-1] not in answer.replace(",", ""):
            found.append("copy_result")
    if answer and (len(_NUMBER.findall(answer)) > 1 or len(answer.split()) > 12):
        found.append("number_only")
    if run.status in ("max_steps", "error"):
        found.append("brief")
    return found


@dataclass(kw_only=True)
class PatternPrompt:
    """System prompts from role patterns, failure diagnosis, mutation and crossover."""

    max_attempts: int = 6
    """Prompts tried for one node from one parent."""
    max_runs: int = 16
    """Failing training runs read for the diagnosis."""
    name: str = "instructions"
    """The operator's name."""

    def _tool(self, node: dict[str, Any], runs: Sequence[Run]) -> str | None:
        tools = [str(t).rpartition(":")[2] for t in node.get("tools") or []]
        called = [
            str((tc.get("function") or {}).get("name"))
            for r in runs
            for m in r.messages
            if m.get("_agent") == node["name"]
            for tc in m.get("tool_calls") or []
        ]
        names = list(dict.fromkeys(tools + called))
        return names[0] if names else None

    def _facets(self, ctx: OperatorContext, target: str, tool: str | None) -> list[str]:
        """Pattern keys for the node, the most often diagnosed first."""
        ev = ctx.parent.evals["train"]
        items = {t.id: t for t in ctx.tasks.train}
        counts: dict[str, int] = {}
        failing = [t for t, s in ev.scores.items() if s < ctx.tasks.threshold and t in items]
        for t in failing[: self.max_runs]:
            run = load_run(ctx.saver, ev.threads[t])
            if run is not None:
                for key in diagnose(run, target, items[t].input):
                    counts[key] = counts.get(key, 0) + 1
        keys = [k for k in PATTERNS if tool is not None or k not in _TOOL_KEYS]
        if ctx.tasks.reward_name not in ("numeric", "exact"):
            keys = [k for k in keys if k != "number_only"]
        return sorted(keys, key=lambda k: (-counts.get(k, 0), list(PATTERNS).index(k)))

    def _ideas(
        self, ctx: OperatorContext, target: str, current: str, tool: str | None
    ) -> list[tuple[str, str]]:
        """(prompt, how it was made) in the order they are tried."""
        facets = self._facets(ctx, target, tool)
        fill = [p.format(tool=tool or "") for k in facets for p in PATTERNS[k]]
        first = [PATTERNS[k][0].format(tool=tool or "") for k in facets]
        base = sentences(current)
        ideas: list[tuple[str, str]] = []
        for pattern in first:
            if pattern not in base:
                ideas.append((" ".join([*base, pattern]), f"pattern added: {pattern!r}"))
                break
        short = [p for p in first if p != PATTERNS["brief"][0]][:4]
        ideas.append((" ".join(short), "short imperative prompt from the role's patterns"))
        winners = self._winners(ctx, target)
        if len(winners) >= 2:
            a, b = (sentences(w) for w in winners[:2])
            ideas.append((" ".join(dict.fromkeys(a + b)), "crossover of the two best prompts"))
        rng = ctx.rng
        for _ in range(3 * self.max_attempts):
            parts = list(rng.choice([base, *(sentences(w) for w in winners)] or [base]))
            move = rng.choice(("add", "add", "drop", "swap", "cross"))
            if move == "add" or not parts:
                parts.insert(rng.randrange(len(parts) + 1), rng.choice(fill))
            elif move == "drop" and len(parts) > 1:
                parts.pop(rng.randrange(len(parts)))
            elif move == "swap":
                parts[rng.randrange(len(parts))] = rng.choice(fill)
            elif winners:
                other = sentences(rng.choice(winners))
                parts = list(dict.fromkeys(parts + rng.sample(other, max(1, len(other) // 2))))
            ideas.append((" ".join(dict.fromkeys(parts)), f"mutation ({move})"))
        if ctx.explore:
            rng.shuffle(ideas)
        return ideas

    def _winners(self, ctx: OperatorContext, target: str) -> list[str]:
        """The node's prompts in accepted candidates (and the seed), best training score first."""
        pool: list[Candidate] = [
            c for c in ctx.candidates if c.status in ("seed", "accepted") and "train" in c.evals
        ]
        pool.sort(key=lambda c: -c.evals["train"].mean)
        prompts = [str((c.node(target) or {}).get("system_prompt") or "") for c in pool]
        return [p for p in dict.fromkeys(prompts) if p]

    async def propose(self, ctx: OperatorContext) -> Proposal | None:
        ev = ctx.parent.evals.get("train")
        agents = ctx.parent.agents()
        if ev is None or not agents or all(s >= ctx.tasks.threshold for s in ev.scores.values()):
            return None
        tried = ctx.tried()
        attempts = {a: ctx.attempts(self.name, a) for a in agents}
        order = sorted(agents, key=lambda a: (attempts[a], agents.index(a)))
        if ctx.explore:
            ctx.rng.shuffle(order)
        for target in order:
            if attempts[target] >= self.max_attempts:
                continue
            node = node_of(ctx.parent.spec, target)
            assert node is not None
            current = str(node.get("system_prompt") or "")
            runs = [
                r
                for t in list(ev.threads)[: self.max_runs]
                if (r := load_run(ctx.saver, ev.threads[t])) is not None
            ]
            tool = self._tool(node, runs)
            for prompt, how in self._ideas(ctx, target, current, tool):
                key = f"{self.name}:{target}:{hashlib.sha1(prompt.encode()).hexdigest()[:8]}"
                if not prompt or prompt == current or key in tried:
                    continue
                spec = copy.deepcopy(ctx.parent.spec)
                new_node = node_of(spec, target)
                assert new_node is not None
                new_node["system_prompt"] = prompt
                bump_card(new_node, ctx.version(target), self.name)
                short = prompt if len(prompt) <= 80 else prompt[:79] + "…"
                return Proposal(
                    spec=spec,
                    operator=self.name,
                    target=target,
                    change=f"{target}: {how}: {short!r}",
                    key=key,
                )
        return None


_TOOL_KEYS = ("use_tool", "arguments", "copy_result")
