"""Pure edits of workflow specs (plain data in, new data out): the topology rewrites.

Every function deep-copies the spec it is given. Whether the result is a valid workflow is
decided by loading it (:func:`~aworld_graph.meta.candidates.materialize`), which reports every
problem at once; an edit that breaks the workflow is simply not a candidate.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .candidates import node_of, nodes_of

__all__ = [
    "DEFAULT_CRITICS",
    "Edit",
    "apply_edit",
    "bump_card",
    "topology_edits",
]

DEFAULT_CRITICS: list[dict[str, Any]] = [
    {
        "name": "tool_check",
        "scorer": "agrees_with_tools",
        "threshold": 0.5,
        "max_rounds": 3,
        "description": "Sends the agent back when its answer does not state its tools' result.",
        "needs_tools": True,
    },
    {
        "name": "tool_args",
        "scorer": "aworld_graph.meta.checks:arguments_match_question",
        "threshold": 0.5,
        "max_rounds": 3,
        "description": "Sends the agent back when its calculator call does not use the "
        "question's numbers.",
        "needs_tools": True,
    },
    {
        "name": "judge",
        "system_prompt": (
            "You check answers. Give score 1 when the answer is correct, complete and states the "
            "final result clearly; otherwise give a lower score and say what to fix."
        ),
        "threshold": 0.7,
        "max_rounds": 2,
        "description": "An LLM judge that sends the agent back with feedback.",
    },
]
"""Critic templates the ``insert_critic`` edit uses: Python scorers that check the answer
against the agent's tool results and the tool's arguments against the question (for agents with
tools), and an LLM judge. The critic is named ``<agent>_<template name>``."""

TEMPERATURES = (0.0, 0.4, 0.8)
"""Sampling temperatures ``set_temperature`` may give an agent (``model.llm_temperature``)."""
MAX_TOKENS = (64, 128, 512)
"""Reply lengths ``set_max_tokens`` may give an agent (``model.params.max_tokens``)."""
SAMPLES = 3
"""Samples of a node in a ``self_consistency`` rewrite."""
SAMPLE_TEMPERATURE = 0.7
"""Temperature of the extra samples (the first keeps the node's own settings)."""
MAX_ROUNDS = 4
"""``raise_rounds`` gives a critic at most this many rounds."""
VOTE = "aworld_graph.meta.checks:majority_vote"
"""The vote node's function."""


@dataclass(kw_only=True, frozen=True)
class Edit:
    """One topology edit of a workflow."""

    kind: str
    """``insert_critic``, ``raise_rounds``, ``add_tool``, ``swap_model``, ``set_temperature``,
    ``set_max_tokens``, ``add_handoff``, ``remove_handoff``, ``remove_tool``, ``drop_node`` or
    ``self_consistency``."""
    node: str
    """The node it changes (the source of a handoff edge)."""
    arg: Any = None
    """The critic template, tool name, model name or handoff target."""
    description: str = ""
    """In words, for reports."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        arg = json.dumps(self.arg, sort_keys=True) if not isinstance(self.arg, str) else self.arg
        return f"{self.kind}:{self.node}:{hashlib.sha1(str(arg).encode()).hexdigest()[:8]}"


def bump_card(node: dict[str, Any], version: int, operator: str) -> None:
    """Mark ``node`` (a card dict) as a new version made by ``operator``."""
    old = int(node.get("version") or 1)
    node["parent"] = f"{node['name']}@{old}"
    node["version"] = version
    node["operator"] = operator
    node.pop("score", None)


def _pairs(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for item in spec.get("topology") or []:
        if isinstance(item, str) and "->" in item:
            a, _, b = item.partition("->")
            out.append((a.strip(), b.strip()))
        elif isinstance(item, list) and len(item) == 2:
            out.append((str(item[0]), str(item[1])))
    return out


def _critics_of(spec: Mapping[str, Any], agent: str) -> list[dict[str, Any]]:
    return [n for n in nodes_of(spec) if n.get("kind") == "critic" and n.get("judges") == agent]


def _has_template(spec: Mapping[str, Any], agent: str, template: Mapping[str, Any]) -> bool:
    """Whether a critic of ``agent`` already does what ``template`` would (same check)."""
    for c in _critics_of(spec, agent):
        if c["name"] == f"{agent}_{template['name']}":
            return True
        if template.get("scorer") and c.get("scorer") == template.get("scorer"):
            return True
        if template.get("system_prompt") and c.get("system_prompt"):
            return True  # one LLM judge per agent
    return False


def _turns(spec: Mapping[str, Any], agent: str) -> int:
    """How many turns ``agent`` may get in one run: one, plus each critic's retries."""
    return 1 + sum(max(0, int(c.get("max_rounds") or 3) - 1) for c in _critics_of(spec, agent))


def _fit_steps(new: dict[str, Any], old: Mapping[str, Any], agent: str) -> None:
    """Raise ``agent``'s ``max_steps`` (LLM calls over all its turns) and the workflow's with its
    critics' rounds in ``new``: the calls one turn had in ``old``, for every turn it may get now
    (a critic's extra round is of no use when the judged node has no calls left for it)."""
    before, after = node_of(old, agent), node_of(new, agent)
    if before is None or after is None:
        return
    per_turn = max(1, int(before.get("max_steps") or 10) // _turns(old, agent))
    turns = _turns(new, agent)
    after["max_steps"] = max(int(after.get("max_steps") or 10), per_turn * turns)
    if new.get("max_steps") is not None:
        needed = turns * (2 * per_turn + len(_critics_of(new, agent))) + 2
        new["max_steps"] = max(int(new["max_steps"]), needed)


def _sampling(node: Mapping[str, Any]) -> tuple[float | None, int | None]:
    model = node.get("model") or {}
    tokens = (model.get("params") or {}).get("max_tokens")
    return model.get("llm_temperature"), int(tokens) if tokens is not None else None


def topology_edits(
    spec: Mapping[str, Any],
    *,
    critics: Sequence[Mapping[str, Any]] = DEFAULT_CRITICS,
    tools: Iterable[str] = ("calculator",),
    models: Iterable[str] = (),
) -> list[Edit]:
    """Every topology edit of ``spec`` worth trying, most promising kinds first: insert a critic
    loop, add a tool, swap a model, add / remove a handoff edge, remove a tool, drop a node."""
    build = spec.get("build_type", "workflow")
    nodes = nodes_of(spec)
    agents = [n for n in nodes if n.get("kind") == "agent"]
    edits: list[Edit] = []
    if build == "workflow":
        for a in agents:
            for t in critics:
                if _has_template(spec, a["name"], t):
                    continue
                if t.get("needs_tools") and not (
                    a.get("tools") or a.get("mcp_servers") or a.get("mcp_config")
                ):
                    continue
                name = f"{a['name']}_{t['name']}"
                edits.append(
                    Edit(
                        kind="insert_critic",
                        node=a["name"],
                        arg=dict(t),
                        description=f"insert critic {name} after {a['name']}",
                    )
                )
        for c in nodes_of(spec):
            if c.get("kind") == "critic" and int(c.get("max_rounds") or 3) < MAX_ROUNDS:
                rounds = int(c.get("max_rounds") or 3) + 1
                edits.append(
                    Edit(
                        kind="raise_rounds",
                        node=c["name"],
                        arg=rounds,
                        description=f"give critic {c['name']} {rounds} rounds (and "
                        f"{c.get('judges')} the calls for them)",
                    )
                )
    tool_names = list(tools)
    for a in agents:
        for tool in tool_names:
            if tool not in (a.get("tools") or []):
                edits.append(
                    Edit(
                        kind="add_tool",
                        node=a["name"],
                        arg=tool,
                        description=f"give {a['name']} the {tool} tool",
                    )
                )
    for a in agents:
        current = (a.get("model") or {}).get("llm_model_name")
        for m in models:
            if m != current:
                edits.append(
                    Edit(
                        kind="swap_model",
                        node=a["name"],
                        arg=m,
                        description=f"run {a['name']} on model {m}",
                    )
                )
    for a in agents:
        temperature, max_tokens = _sampling(a)
        for value in TEMPERATURES:
            if value != temperature and not (temperature is None and value == 0.0):
                edits.append(
                    Edit(
                        kind="set_temperature",
                        node=a["name"],
                        arg=value,
                        description=f"sample {a['name']} at temperature {value:g}",
                    )
                )
        for limit in MAX_TOKENS:
            if limit != max_tokens:
                edits.append(
                    Edit(
                        kind="set_max_tokens",
                        node=a["name"],
                        arg=limit,
                        description=f"let {a['name']} write at most {limit} tokens per reply",
                    )
                )
    if build in ("handoff", "hybrid"):
        present = set(_pairs(spec))
        names = [a["name"] for a in agents]
        for x in names:
            for y in names:
                if x != y and (x, y) not in present:
                    edits.append(
                        Edit(
                            kind="add_handoff", node=x, arg=y, description=f"add handoff {x} -> {y}"
                        )
                    )
        for x, y in sorted(present):
            edits.append(
                Edit(kind="remove_handoff", node=x, arg=y, description=f"remove handoff {x} -> {y}")
            )
    for a in agents:
        for tool in a.get("tools") or []:
            edits.append(
                Edit(
                    kind="remove_tool",
                    node=a["name"],
                    arg=tool,
                    description=f"take the {tool} tool from {a['name']}",
                )
            )
    root = spec.get("root_agent") or (nodes[0]["name"] if nodes else None)
    for n in nodes:
        if n["name"] != root and len(nodes) > 1:
            edits.append(
                Edit(kind="drop_node", node=n["name"], description=f"drop node {n['name']}")
            )
    if build == "workflow" and not any(n.get("function") == VOTE for n in nodes):
        for a in agents:
            if not any(a["name"] in (e.get("from"), e.get("to")) for e in spec.get("edges") or []):
                edits.append(
                    Edit(
                        kind="self_consistency",
                        node=a["name"],
                        arg=SAMPLES,
                        description=f"self-consistency: {SAMPLES} samples of {a['name']} "
                        f"(the extra ones at temperature {SAMPLE_TEMPERATURE:g}) and a vote",
                    )
                )
    return edits


def _replace_in_topology(items: list[Any], name: str, by: list[Any]) -> list[Any]:
    """``items`` with the step ``name`` replaced by the steps ``by`` (serial lists only)."""
    out: list[Any] = []
    for item in items:
        if item == name:
            out += by
        elif isinstance(item, dict) and "serial" in item:
            out.append({"serial": _replace_in_topology(list(item["serial"]), name, by)})
        elif isinstance(item, dict) and "parallel" in item:
            inner = [{"serial": by} if part == name else part for part in list(item["parallel"])]
            out.append({"parallel": inner})
        else:
            out.append(item)
    return out


def _drop_from_topology(items: list[Any], name: str) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, str):
            if "->" in item:
                a, _, b = item.partition("->")
                if name in (a.strip(), b.strip()):
                    continue
            elif item == name:
                continue
            out.append(item)
        elif isinstance(item, list):
            if name not in item:
                out.append(item)
        elif isinstance(item, dict):
            key = "parallel" if "parallel" in item else "serial"
            rest = _drop_from_topology(list(item[key]), name)
            if key == "parallel" and len(rest) == 1:
                out.append(rest[0] if isinstance(rest[0], str) else rest[0])
            elif rest:
                out.append({key: rest})
        else:
            out.append(item)
    return out


def _self_consistency(new: dict[str, Any], node: dict[str, Any], k: int) -> None:
    """``node`` run ``k`` times side by side (copies ``<node>_s2``… sampled at
    :data:`SAMPLE_TEMPERATURE`) and joined by a vote node ``<node>_vote`` that keeps the answer
    most samples agree on. The node's critics go: the vote is its check (a critic of one sample
    would read the other samples' tool calls in the shared conversation)."""
    name = node["name"]
    critics = {c["name"] for c in _critics_of(new, name)}
    new["nodes"] = [n for n in new["nodes"] if not (isinstance(n, dict) and n["name"] in critics)]
    for critic in critics:
        if new.get("topology") is not None:
            new["topology"] = _drop_from_topology(list(new["topology"]), critic)
    copies: list[dict[str, Any]] = []
    for i in range(2, k + 1):
        twin = copy.deepcopy(node)
        for key in ("parent", "score"):
            twin.pop(key, None)
        twin.update(name=f"{name}_s{i}", version=1, operator="self_consistency")
        twin["model"] = {**(twin.get("model") or {}), "llm_temperature": SAMPLE_TEMPERATURE}
        copies.append(twin)
    vote = {
        "kind": "function",
        "name": f"{name}_vote",
        "version": 1,
        "operator": "self_consistency",
        "description": f"Keeps the answer most samples of {name} agree on.",
        "function": VOTE,
    }
    at = next(i for i, n in enumerate(new["nodes"]) if isinstance(n, dict) and n["name"] == name)
    new["nodes"][at + 1 : at + 1] = [*copies, vote]
    samples = [name] + [c["name"] for c in copies]
    if new.get("max_steps") is not None:  # the samples' steps, side by side
        new["max_steps"] = int(new["max_steps"]) * k
    if new.get("topology") is None:
        new["topology"] = [n["name"] for n in nodes_of(new) if n["name"] not in samples[1:]]
        new["topology"].remove(vote["name"])
    new["topology"] = _replace_in_topology(
        list(new["topology"]), name, [{"parallel": samples}, vote["name"]]
    )


def apply_edit(
    spec: Mapping[str, Any],
    edit: Edit,
    *,
    version: int,
    version_of: Callable[[str], int] | None = None,
) -> dict[str, Any]:
    """``spec`` with ``edit`` applied; the changed node becomes card version ``version``, another
    node it changes too (the agent a critic judges) version ``version_of(name)`` (default: one
    more than it had)."""
    new = copy.deepcopy(dict(spec))
    node = node_of(new, edit.node)
    if node is None:
        raise KeyError(f"no node {edit.node!r} in the workflow")
    if edit.kind == "insert_critic":
        template = {k: v for k, v in dict(edit.arg).items() if k not in ("name", "needs_tools")}
        critic = {
            "kind": "critic",
            "name": f"{edit.node}_{edit.arg['name']}",
            "version": 1,
            "operator": "insert_critic",
            "judges": edit.node,
            **template,
        }
        index = new["nodes"].index(node)
        new["nodes"].insert(index + 1, critic)
        steps = node.get("max_steps")
        _fit_steps(new, spec, edit.node)
        if node.get("max_steps") != steps:
            bump_card(node, version, edit.kind)
    elif edit.kind == "raise_rounds":
        judged = str(node.get("judges"))
        node["max_rounds"] = int(edit.arg)
        bump_card(node, version, edit.kind)
        agent = node_of(new, judged)
        steps = agent.get("max_steps") if agent is not None else None
        _fit_steps(new, spec, judged)
        if agent is not None and agent.get("max_steps") != steps:
            number = version_of(judged) if version_of else int(agent.get("version") or 1) + 1
            bump_card(agent, number, edit.kind)
    elif edit.kind == "set_temperature":
        node["model"] = {**(node.get("model") or {}), "llm_temperature": float(edit.arg)}
        bump_card(node, version, edit.kind)
    elif edit.kind == "set_max_tokens":
        model = dict(node.get("model") or {})
        model["params"] = {**(model.get("params") or {}), "max_tokens": int(edit.arg)}
        node["model"] = model
        bump_card(node, version, edit.kind)
    elif edit.kind == "self_consistency":
        _self_consistency(new, node, int(edit.arg))
    elif edit.kind == "add_tool":
        node["tools"] = [*(node.get("tools") or []), edit.arg]
        bump_card(node, version, edit.kind)
    elif edit.kind == "remove_tool":
        node["tools"] = [t for t in node.get("tools") or [] if t != edit.arg]
        if not node["tools"]:
            del node["tools"]
        bump_card(node, version, edit.kind)
    elif edit.kind == "swap_model":
        node["model"] = {**(node.get("model") or {}), "llm_model_name": edit.arg}
        bump_card(node, version, edit.kind)
    elif edit.kind == "add_handoff":
        new["topology"] = [*(new.get("topology") or []), f"{edit.node} -> {edit.arg}"]
    elif edit.kind == "remove_handoff":
        new["topology"] = [
            item
            for item in new.get("topology") or []
            if _pairs({"topology": [item]}) != [(edit.node, edit.arg)]
        ]
    elif edit.kind == "drop_node":
        dropped = {edit.node} | {
            n["name"]
            for n in nodes_of(new)
            if n.get("kind") == "critic" and n.get("judges") == edit.node
        }
        new["nodes"] = [
            n for n in new["nodes"] if not (isinstance(n, dict) and n.get("name") in dropped)
        ]
        for name in dropped:
            if new.get("topology") is not None:
                new["topology"] = _drop_from_topology(list(new["topology"]), name)
            new["edges"] = [
                e for e in new.get("edges") or [] if name not in (e.get("from"), e.get("to"))
            ]
        if not new.get("edges"):
            new.pop("edges", None)
    else:
        raise ValueError(f"unknown edit kind {edit.kind!r}")
    return new
