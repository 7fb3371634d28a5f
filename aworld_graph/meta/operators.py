"""Rewrite operators: each proposes a child of a parent candidate.

1. :class:`RewritePrompt` – an optimizer *agent* (an :class:`~aworld_graph.agent.Agent` with
   its own model) reads the parent's failing training runs – what the node did, the answer, the
   expected answer, the critics' feedback – and writes a new system prompt for one node
   (reflective mutation, as in GEPA / TextGrad).
2. :class:`MineDemos` – few-shot demonstrations mined from high-reward training runs in the
   checkpoint database, written into one node's card (DSPy-style bootstrapping).
3. :class:`EditTopology` – insert a critic loop after a node, add or remove a handoff edge,
   drop a node, swap a node's model or its tools (see :mod:`._edits`).

An operator returns ``None`` when it has nothing (left) to try on the parent, or a
:class:`Proposal`; a proposal without ``spec`` records an attempt that produced nothing
usable (its cost still counts).
"""

from __future__ import annotations

import copy
import hashlib
import html
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..errors import AWorldGraphError, ConfigError
from ..export.runs import Run, load_run
from ..model import ChatModel
from ._edits import DEFAULT_CRITICS, apply_edit, bump_card, topology_edits
from ._store import Step
from .candidates import Candidate, materialize, next_version, node_of
from .tasks import TaskSet

__all__ = [
    "OPTIMIZER_PROMPT",
    "EditTopology",
    "MineDemos",
    "Operator",
    "OperatorContext",
    "Proposal",
    "RewritePrompt",
    "default_operators",
]

OPTIMIZER_PROMPT = (
    "You improve the instructions (system prompts) of agents in a multi-agent workflow. You "
    "read runs in which the workflow failed: the task, what the agent did, its answer, the "
    "expected answer and the critics' feedback. Find what went wrong and write a better system "
    "prompt for the agent. Reply with the complete new system prompt between <prompt> and "
    "</prompt>."
)
"""The optimizer agent's system prompt."""


@dataclass(kw_only=True)
class Proposal:
    """A child candidate an operator proposes (or an attempt that made none)."""

    spec: dict[str, Any] | None
    """The child's workflow spec; ``None`` when the attempt produced nothing usable."""
    operator: str
    """What made it (``rewrite_prompt``, ``demos``, or the topology edit's kind)."""
    target: str | None = None
    """The node changed."""
    change: str = ""
    """What changed, in words."""
    key: str = ""
    """Identifies the edit (one parent is not given the same edit twice)."""
    note: str = ""
    """Why nothing usable came out, when ``spec`` is ``None``."""
    cost: dict[str, float] = field(default_factory=dict)
    """What the attempt cost: ``llm_calls``, ``tokens``, ``seconds``."""


@dataclass(kw_only=True)
class OperatorContext:
    """What an operator may look at."""

    run_id: str
    """The optimization run (thread ids of its runs start with ``meta-<run_id>``)."""
    iteration: int
    """The current search iteration."""
    parent: Candidate
    """The candidate to derive a child from (evaluated on ``train``)."""
    candidates: list[Candidate]
    """Every candidate so far (with its evaluations)."""
    tasks: TaskSet
    """The task set (its ``threshold`` says which runs succeeded)."""
    saver: BaseCheckpointSaver[Any]
    """The checkpoint database with every evaluation run."""
    rng: random.Random
    """Randomness seeded by the run and the iteration (so a resumed search repeats itself)."""
    steps: Sequence[Step] = ()
    """The search's iterations so far (attempts that made no candidate are only there)."""

    def children(self, operator: str | None = None, target: str | None = None) -> list[Candidate]:
        """Candidates already derived from the parent (by ``operator`` on ``target``)."""
        return [
            c
            for c in self.candidates
            if c.parent == self.parent.id
            and (operator is None or c.operator == operator)
            and (target is None or c.target == target)
        ]

    def attempts(self, operator: str, target: str | None = None) -> int:
        """How often ``operator`` worked on ``target`` from the parent: the children it made
        and the attempts that made none."""
        empty = sum(
            1
            for s in self.steps
            if s.parent == self.parent.id
            and s.candidate is None
            and s.outcome == "invalid"
            and (target is None or s.target == target)
            and s.operator == operator
        )
        return len(self.children(operator, target)) + empty

    def tried(self) -> set[str]:
        """Keys of the edits already tried on the parent."""
        return {c.key for c in self.children() if c.key}

    def version(self, node: str) -> int:
        """The card version a changed ``node`` gets."""
        return next_version(self.candidates, node)

    def problem(self, spec: Mapping[str, Any]) -> str | None:
        """Why ``spec`` is not a valid workflow, or ``None``."""
        try:
            materialize(spec)
        except AWorldGraphError as exc:
            return str(exc)
        return None


class Operator(Protocol):
    """Proposes children of a candidate."""

    name: str
    """The operator family (``rewrite_prompt``, ``demos``, ``topology``)."""

    async def propose(self, ctx: OperatorContext) -> Proposal | None: ...


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


def _demo(run: Run, node: str) -> dict[str, str] | None:
    """``{"input", "output"}`` of ``node`` in ``run``: its first turn's input, its final output."""
    mine = [m for m in run.messages if m.get("_agent") == node]
    first = next((m for m in mine if m.get("role") == "user"), None)
    output = (run.values.get("outputs") or {}).get(node)
    if not isinstance(output, str):
        finals = [
            m
            for m in mine
            if m.get("role") == "assistant" and m.get("content") and not m.get("tool_calls")
        ]
        output = finals[-1]["content"] if finals else None
    if not output or not any(m.get("role") == "assistant" for m in mine):
        return None
    text = str(first["content"]) if first is not None else run.input
    return {"input": text, "output": str(output)}


@dataclass(kw_only=True)
class MineDemos:
    """Demonstrations mined from successful training runs, written into a node's card."""

    k: int = 3
    """Demonstrations per node."""
    max_attempts: int = 3
    """Different demonstration sets tried for one node from one parent."""
    name: str = "demos"
    """The operator's name."""

    def _successes(self, ctx: OperatorContext) -> list[tuple[str, str, str]]:
        """(candidate, task, thread) of successful training runs: the parent's first."""
        found = []
        for c in sorted(ctx.candidates, key=lambda c: (c.id != ctx.parent.id, c.id), reverse=False):
            ev = c.evals.get("train")
            if ev is None:
                continue
            for task, score in ev.scores.items():
                if score >= ctx.tasks.threshold:
                    found.append((c.id, task, ev.threads[task]))
        return found

    async def propose(self, ctx: OperatorContext) -> Proposal | None:
        agents = ctx.parent.agents()
        successes = self._successes(ctx)
        if not agents or not successes:
            return None
        attempts = {a: len(ctx.children(self.name, a)) for a in agents}
        tried = ctx.tried()
        for target in sorted(agents, key=lambda a: (attempts[a], agents.index(a))):
            if attempts[target] >= self.max_attempts:
                continue
            shift = (attempts[target] * self.k) % len(successes)
            demos: list[dict[str, str]] = []
            used: list[str] = []
            for _, _, thread in (successes[shift:] + successes[:shift])[: 8 * self.k]:
                run = load_run(ctx.saver, thread)
                demo = _demo(run, target) if run is not None else None
                if demo is None or any(d["input"] == demo["input"] for d in demos):
                    continue
                demos.append(demo)
                used.append(thread)
                if len(demos) >= self.k:
                    break
            node = node_of(ctx.parent.spec, target)
            if not demos or node is None or demos == node.get("demos"):
                continue
            digest = hashlib.sha1("\n".join(d["input"] for d in demos).encode()).hexdigest()[:8]
            key = f"{self.name}:{target}:{digest}"
            if key in tried:
                continue
            spec = copy.deepcopy(ctx.parent.spec)
            new_node = node_of(spec, target)
            assert new_node is not None
            new_node["demos"] = demos
            bump_card(new_node, ctx.version(target), self.name)
            return Proposal(
                spec=spec,
                operator=self.name,
                target=target,
                change=f"{target}: {len(demos)} demonstrations from runs {', '.join(used)}",
                key=key,
            )
        return None


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
        for edit in topology_edits(
            ctx.parent.spec, critics=self.critics, tools=self.tools, models=self.models
        ):
            if (self.kinds is not None and edit.kind not in self.kinds) or edit.key in tried:
                continue
            spec = apply_edit(ctx.parent.spec, edit, version=ctx.version(edit.node))
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


def default_operators(
    optimizer_model: ChatModel | None = None,
    *,
    names: Sequence[str] = ("rewrite_prompt", "demos", "topology"),
    models: Sequence[str] = (),
    tools: Sequence[str] = ("calculator",),
    critics: Sequence[Mapping[str, Any]] | None = None,
) -> list[Operator]:
    """The three operators (or those named), in the order the search takes turns with them."""
    made: dict[str, Operator] = {
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
