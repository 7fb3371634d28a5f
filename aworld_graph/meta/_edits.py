"""Pure edits of workflow specs (plain data in, new data out): the topology rewrites.

Every function deep-copies the spec it is given. Whether the result is a valid workflow is
decided by loading it (:func:`~aworld_graph.meta.candidates.materialize`), which reports every
problem at once; an edit that breaks the workflow is simply not a candidate.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
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
"""Critic templates the ``insert_critic`` edit uses: one with a Python scorer that checks the
answer against the agent's tool results (for agents with tools), and an LLM judge. The critic
is named ``<agent>_<template name>``."""


@dataclass(kw_only=True, frozen=True)
class Edit:
    """One topology edit of a workflow."""

    kind: str
    """``insert_critic``, ``add_tool``, ``remove_tool``, ``swap_model``, ``add_handoff``,
    ``remove_handoff`` or ``drop_node``."""
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


def _critic_for(spec: Mapping[str, Any], agent: str) -> bool:
    return any(n.get("kind") == "critic" and n.get("judges") == agent for n in nodes_of(spec))


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
            if _critic_for(spec, a["name"]):
                continue
            for t in critics:
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
    return edits


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


def apply_edit(spec: Mapping[str, Any], edit: Edit, *, version: int) -> dict[str, Any]:
    """``spec`` with ``edit`` applied; the changed node becomes card version ``version``."""
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
