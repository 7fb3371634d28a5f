"""The ``demos`` operator: few-shot demonstrations mined from successful training runs.

A demonstration is a node's turn in a run that succeeded: the question it was given, the tool
calls it made with their results, and its answer (question → call → result → answer). The
agent sees it as turns of its own (:func:`demo_messages` of the agent room), rendered as
its conversation is, so a small model is shown how to call the tool and copy its result. A
demonstration set is kept only when it raises the training score (the search measures that on
the training tasks that are not themselves demonstrations).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..export.runs import Run, load_run
from ._context import OperatorContext, Proposal
from .candidates import node_of
from .edits import bump_card

__all__ = ["MineDemos", "demo_inputs"]


def demo_inputs(spec: dict[str, Any]) -> set[str]:
    """The inputs of every demonstration in ``spec`` (tasks asked there are not measured)."""
    return {
        str(d.get("input"))
        for n in spec.get("nodes") or []
        if isinstance(n, dict)
        for d in n.get("demos") or []
        if isinstance(d, dict)
    }


def _calls_of(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The tool calls of one turn with their results (``None`` when one cannot be shown)."""
    results = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    calls: list[dict[str, Any]] = []
    for m in messages:
        for tc in (m.get("tool_calls") or []) if m.get("role") == "assistant" else []:
            fn = tc.get("function") or {}
            try:
                arguments = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                return None
            if not isinstance(arguments, dict) or tc.get("id") not in results:
                return None
            calls.append(
                {"name": fn.get("name"), "arguments": arguments, "result": str(results[tc["id"]])}
            )
    return calls


def _demo(run: Run, node: str, *, with_calls: bool = True) -> dict[str, Any] | None:
    """``{"input", "output"[, "tool_calls"]}`` of ``node`` in ``run``: its first turn's input,
    its final output and (``with_calls``) the tool calls of the turn that gave it, with their
    results – the question, the call, the result and the answer."""
    mine = [m for m in run.messages if m.get("_agent") == node]
    first = next((m for m in mine if m.get("role") == "user"), None)
    output = (run.values.get("outputs") or {}).get(node)
    finals = [
        m
        for m in mine
        if m.get("role") == "assistant" and m.get("content") and not m.get("tool_calls")
    ]
    if not isinstance(output, str):
        output = finals[-1]["content"] if finals else None
    if not output or not any(m.get("role") == "assistant" for m in mine):
        return None
    text = str(first["content"]) if first is not None else run.input
    demo: dict[str, Any] = {"input": text, "output": str(output)}
    if with_calls:
        turn = finals[-1].get("_turn") if finals else None
        calls = _calls_of([m for m in mine if m.get("_turn") == turn])
        if calls is None:
            return None
        if calls:
            demo["tool_calls"] = calls
    return demo


@dataclass(kw_only=True)
class MineDemos:
    """Demonstrations mined from successful training runs, written into a node's card."""

    k: int = 3
    """Demonstrations per node."""
    max_attempts: int = 3
    """Different demonstration sets tried for one node from one parent."""
    with_calls: bool = True
    """Demonstrations carry the node's tool calls and their results (when it made any)."""
    name: str = "demos"
    """The operator's name."""

    def _successes(self, ctx: OperatorContext) -> list[str]:
        """Threads of successful training runs, the parent's first (shuffled when exploring)."""
        found: list[str] = []
        for c in sorted(ctx.candidates, key=lambda c: (c.id != ctx.parent.id, c.id)):
            ev = c.evals.get("train")
            if ev is None:
                continue
            found += [ev.threads[t] for t, s in ev.scores.items() if s >= ctx.tasks.threshold]
        if ctx.explore:
            ctx.rng.shuffle(found)
        return list(dict.fromkeys(found))

    def _mine(self, ctx: OperatorContext, target: str, threads: Sequence[str]) -> list[Any]:
        """(demo, thread) pairs of ``target`` from ``threads``: distinct inputs, those with
        tool calls first when the node has tools."""
        node = node_of(ctx.parent.spec, target) or {}
        has_tools = bool(node.get("tools") or node.get("mcp_servers") or node.get("mcp_config"))
        found: list[tuple[dict[str, Any], str]] = []
        for thread in threads:
            run = load_run(ctx.saver, thread)
            demo = _demo(run, target, with_calls=self.with_calls) if run is not None else None
            if demo is not None and all(d["input"] != demo["input"] for d, _ in found):
                found.append((demo, thread))
        if has_tools and self.with_calls and not ctx.explore:
            found.sort(key=lambda pair: not pair[0].get("tool_calls"))  # stable: order kept
        return found

    async def propose(self, ctx: OperatorContext) -> Proposal | None:
        agents = ctx.parent.agents()
        successes = self._successes(ctx)
        if not agents or not successes:
            return None
        attempts = {a: len(ctx.children(self.name, a)) for a in agents}
        tried = ctx.tried()
        order = sorted(agents, key=lambda a: (attempts[a], agents.index(a)))
        if ctx.explore:
            ctx.rng.shuffle(order)
        for target in order:
            if attempts[target] >= self.max_attempts:
                continue
            mined = self._mine(ctx, target, successes[: 12 * self.k])
            if not mined:
                continue
            shift = (attempts[target] * self.k) % len(mined)
            chosen = (mined[shift:] + mined[:shift])[: self.k]
            demos = [d for d, _ in chosen]
            node = node_of(ctx.parent.spec, target)
            if node is None or demos == node.get("demos"):
                continue
            digest = hashlib.sha1(json.dumps(demos, sort_keys=True).encode()).hexdigest()[:8]
            key = f"{self.name}:{target}:{digest}"
            if key in tried:
                continue
            spec = copy.deepcopy(ctx.parent.spec)
            new_node = node_of(spec, target)
            assert new_node is not None
            new_node["demos"] = demos
            bump_card(new_node, ctx.version(target), self.name)
            calls = sum(1 for d in demos if d.get("tool_calls"))
            return Proposal(
                spec=spec,
                operator=self.name,
                target=target,
                change=f"{target}: {len(demos)} demonstrations ({calls} with tool calls) from "
                f"runs {', '.join(t for _, t in chosen)}",
                key=key,
            )
        return None
