"""Rewrite operators: each proposes a child of a parent candidate.

1. :class:`RewritePrompt` – an optimizer *agent* (an :class:`~aworld_graph.agent.Agent` with
   its own model) reads the parent's failing training runs – what the node did, the answer, the
   expected answer, the critics' feedback – and writes a new system prompt for one node
   (reflective mutation, as in GEPA / TextGrad); for a strong optimizer model.
2. :class:`PatternPrompt` (``instructions``, :mod:`.instructions`) – new system prompts
   without a model: role patterns chosen by what the failing runs show, mutation and crossover
   of earlier winners.
3. :class:`MineDemos` (:mod:`.demos`) – few-shot demonstrations (question → tool call → result
   → answer) mined from successful training runs, written into one node's card (DSPy-style
   bootstrapping).
4. :class:`EditTopology` – insert a critic loop after a node (or give a critic more rounds),
   change a node's sampling (temperature, max tokens), self-consistency (k samples and a vote),
   add or remove a handoff edge, drop a node, swap a node's model or its tools (see
   :mod:`.edits`).

An operator returns ``None`` when it has nothing (left) to try on the parent, or a
:class:`Proposal`; a proposal without ``spec`` records an attempt that produced nothing
usable (its cost still counts).
"""

from __future__ import annotations

import copy
import hashlib
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError
from ..export.runs import Run, load_run
from ..model import ChatModel
from ._context import Operator, OperatorContext, Proposal
from .candidates import node_of
from .demos import MineDemos
from .edits import DEFAULT_CRITICS, apply_edit, bump_card, topology_edits
from .instructions import PatternPrompt

__all__ = [
    "OPERATOR_NAMES",
    "OPTIMIZER_PROMPT",
    "EditTopology",
    "MineDemos",
    "Operator",
    "OperatorContext",
    "PatternPrompt",
    "Proposal",
    "RewritePrompt",
    "default_operators",
    "strong_optimizer",
]

OPTIMIZER_PROMPT = (
    "You improve the instructions (system prompts) of agents in a multi-agent workflow. You "
    "read runs in which the workflow failed: the task, what the agent did, its answer, the "
    "expected answer and the critics' feedback. Find what went wrong and write a better system "
    "prompt for the agent. Reply with the complete new system prompt between <prompt> and "
    "</prompt>."
)
"""The optimizer agent's system prompt."""


def _short(value: Any, limit: int = 400) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _digest(run: Run, node: str, expected: Any, score: float) -> str:
    """What the optimizer agent reads about one failing run."""
    lines = [f"Task: {_short(run.input, 800)}", f"Expected answer: {_short(expected)}"]
    did = []
    for m in run.messages:
        if m.get("_agent") != node:
            continue
        if m.get("role") == "assistant":
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", {})
                did.append(f"- called {fn.get('name')}({_short(fn.get('arguments', ''), 200)})")
            if m.get("content") and not m.get("tool_calls"):
                did.append(f"- answered: {_short(m['content'])}")
        elif m.get("role") == "tool":
            did.append(f"  -> {_short(m.get('content', ''), 200)}")
    lines.append(f"What {node} did:\n" + ("\n".join(did) if did else "- nothing (it did not run)"))
    lines.append(f"Final answer of the workflow: {_short(run.answer) if run.answer else '(none)'}")
    if run.status != "finished":
        lines.append(
            f"The run ended with status {run.status}: {_short(run.values.get('error') or '')}"
        )
    for r in run.rewards:
        if r.get("level") == "episode":
            lines.append(
                f"Reward: {score:g}" + (f" ({r['feedback']})" if r.get("feedback") else "")
            )
        elif r.get("feedback"):
            lines.append(
                f"Critic {r.get('source')} on {r.get('judged')} (score {r.get('score')}): {_short(r['feedback'], 300)}"
            )
    return "\n".join(lines)


def _describe(spec: Mapping[str, Any]) -> str:
    parts = []
    for n in spec.get("nodes") or []:
        if isinstance(n, dict):
            extra = f" judging {n['judges']}" if n.get("kind") == "critic" else ""
            parts.append(f"{n.get('name')} ({n.get('kind')}{extra})")
    return f"{spec.get('name')} ({spec.get('build_type', 'workflow')}): " + ", ".join(parts)


def _extract_prompt(text: str | None) -> str:
    if not text:
        return ""
    text = html.unescape(text)  # some local chat formats escape the tags
    match = re.search(r"<prompt>(.*?)(?:</prompt>|$)", text, re.S | re.I)
    return (match.group(1) if match else text).strip()


@dataclass(kw_only=True)
class RewritePrompt:
    """Instruction rewrite by an optimizer agent that reads failing runs and critics' feedback."""

    model: ChatModel | None = None
    """The optimizer agent's model; ``None`` uses ``LLM_*`` settings, else the embedded model."""
    max_examples: int = 4
    """Failing runs shown to the optimizer agent per attempt."""
    max_attempts: int = 4
    """Rewrites of one node tried from one parent."""
    max_chars: int = 4000
    """Longer prompts are refused."""
    name: str = "rewrite_prompt"
    """The operator's name (in steps, reports and ``default_operators(names=...)``)."""

    async def propose(self, ctx: OperatorContext) -> Proposal | None:
        from ..agent import Agent
        from ..runner import Runners

        ev = ctx.parent.evals.get("train")
        agents = ctx.parent.agents()
        if ev is None or not agents:
            return None
        items = {t.id: t for t in ctx.tasks.train}
        failing = [t for t, s in ev.scores.items() if s < ctx.tasks.threshold and t in items]
        if not failing:
            return None
        attempts = {a: ctx.attempts(self.name, a) for a in agents}
        runs: dict[str, Run] = {}
        for t in failing:
            if len(runs) >= 4 * self.max_examples:
                break
            run = load_run(ctx.saver, ev.threads[t])
            if run is not None:
                runs[t] = run
        blame = {
            a: sum(1 for r in runs.values() if a in r.agents and (r.agents[-1] == a))
            for a in agents
        }
        target = min(agents, key=lambda a: (attempts[a], -blame[a], agents.index(a)))
        if ctx.explore:
            target = ctx.rng.choice(agents)
        if attempts[target] >= self.max_attempts or not runs:
            return None
        node = node_of(ctx.parent.spec, target)
        assert node is not None
        current = str(node.get("system_prompt") or "You are a helpful assistant.")
        order = list(runs)
        # another attempt shows other failures (or the same ones in another order)
        shift = attempts[target] * max(1, min(self.max_examples, len(order) - 1)) % len(order)
        chosen = (order[shift:] + order[:shift])[: self.max_examples]
        tried = [
            (c.node(target) or {}).get("system_prompt", "") for c in ctx.children(self.name, target)
        ]
        scores = [c.score("train") for c in ctx.children(self.name, target)]
        tools = [*(node.get("tools") or []), *(node.get("mcp_servers") or [])]
        text = [
            f"Agent to improve: {target}",
            f"Its role: {node.get('description') or '(not described)'}",
            f"Its tools: {', '.join(tools) if tools else '(none)'}",
            f"The workflow: {_describe(ctx.parent.spec)}",
            f"Current system prompt:\n<prompt>\n{current}\n</prompt>",
            f"On {ev.n} training tasks the workflow scored {ev.mean:.2f} on average; "
            f"{len(failing)} runs failed. Some of them:",
        ]
        for i, t in enumerate(chosen, 1):
            text.append(
                f"## Failed run {i}\n" + _digest(runs[t], target, items[t].expected, ev.scores[t])
            )
        if tried:
            text.append("Prompts tried before for this agent that did not do better:")
            text += [
                f"<prompt>\n{p}\n</prompt> (score {s:.2f})"
                if s is not None
                else f"<prompt>\n{p}\n</prompt>"
                for p, s in zip(tried, scores, strict=True)
            ]
        text.append(
            f"Write the complete new system prompt for {target} between <prompt> and </prompt>. "
            "Keep what works, fix what made these runs fail, and keep it general: it must work "
            "for other tasks of the same kind."
        )
        agent = Agent(
            name="prompt_optimizer", system_prompt=OPTIMIZER_PROMPT, model=self.model, max_steps=1
        )
        response = await Runners.run(
            "\n\n".join(text),
            agent=agent,
            task_id=f"meta-{ctx.run_id}-i{ctx.iteration:03d}-optimizer",
            checkpointer=ctx.saver,
        )
        cost = {
            "llm_calls": response.llm_calls,
            "tokens": int(response.usage.get("total_tokens", 0)),
            "seconds": response.time_cost,
        }
        prompt = _extract_prompt(response.answer)
        made = Proposal(spec=None, operator=self.name, target=target, cost=cost)
        if not prompt or len(prompt) > self.max_chars:
            note = f"the optimizer agent gave no usable prompt ({len(prompt)} chars)"
            return replace(made, note=note)
        if prompt == current or prompt in tried:
            return replace(made, note="the optimizer agent repeated a prompt already tried")
        spec = copy.deepcopy(ctx.parent.spec)
        new_node = node_of(spec, target)
        assert new_node is not None
        new_node["system_prompt"] = prompt
        bump_card(new_node, ctx.version(target), self.name)
        key = f"{self.name}:{target}:{hashlib.sha1(prompt.encode()).hexdigest()[:8]}"
        return replace(
            made, spec=spec, change=f"{target}: new system prompt ({_short(prompt, 80)!r})", key=key
        )


@dataclass(kw_only=True)
class EditTopology:
    """Topology edits: critic loops, handoff edges, dropped nodes, swapped models and tools."""

    critics: Sequence[Mapping[str, Any]] = field(default_factory=lambda: list(DEFAULT_CRITICS))
    """Critic templates for ``insert_critic``."""
    tools: Sequence[str] = ("calculator",)
    """Tools (built-in names or ``package.module:function``) that may be given or taken."""
    models: Sequence[str] = ()
    """Model names an agent may be switched to (``model.llm_model_name``)."""
    kinds: Sequence[str] | None = None
    """Only these edit kinds (``None``: all)."""
    name: str = "topology"
    """The operator's name (its children are named by the edit kind)."""

    async def propose(self, ctx: OperatorContext) -> Proposal | None:
        tried = ctx.tried()
        edits = topology_edits(
            ctx.parent.spec, critics=self.critics, tools=self.tools, models=self.models
        )
        if ctx.explore:
            ctx.rng.shuffle(edits)
        for edit in edits:
            if (self.kinds is not None and edit.kind not in self.kinds) or edit.key in tried:
                continue
            spec = apply_edit(
                ctx.parent.spec, edit, version=ctx.version(edit.node), version_of=ctx.version
            )
            if ctx.problem(spec) is not None:
                continue
            return Proposal(
                spec=spec,
                operator=edit.kind,
                target=edit.node,
                change=edit.description,
                key=edit.key,
            )
        return None


OPERATOR_NAMES = ("instructions", "rewrite_prompt", "demos", "topology")
"""Every operator :func:`default_operators` can make."""


def strong_optimizer(model: ChatModel | None) -> bool:
    """Whether the reflective rewrite has a model that can do it: ``model`` itself, or (for
    ``None``) an ``LLM_*`` endpoint; the embedded SmolLM2 model mostly repeats the prompt it is
    shown, so it does not count."""
    from ..agent import resolve_model
    from ..config import AgentConfig
    from ..local import LocalModel

    return not isinstance(model if model is not None else resolve_model(AgentConfig()), LocalModel)


def default_operators(
    optimizer_model: ChatModel | None = None,
    *,
    names: Sequence[str] | None = None,
    models: Sequence[str] = (),
    tools: Sequence[str] = ("calculator",),
    critics: Sequence[Mapping[str, Any]] | None = None,
) -> list[Operator]:
    """The operators named (default: ``instructions``, ``demos``, ``topology``, and first
    ``rewrite_prompt`` when :func:`strong_optimizer` says its model can do it), in the order the
    search takes turns with them."""
    if names is None:
        strong = strong_optimizer(optimizer_model)
        names = ("rewrite_prompt",) * strong + ("instructions", "demos", "topology")
    made: dict[str, Operator] = {
        "instructions": PatternPrompt(),
        "rewrite_prompt": RewritePrompt(model=optimizer_model),
        "demos": MineDemos(),
        "topology": EditTopology(
            models=models,
            tools=tools,
            critics=list(critics) if critics is not None else list(DEFAULT_CRITICS),
        ),
    }
    unknown = [n for n in names if n not in made]
    if unknown:
        raise ConfigError(f"unknown operator(s) {', '.join(unknown)}; use {', '.join(made)}")
    return [made[n] for n in names]
