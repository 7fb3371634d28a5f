"""A drawing-neutral view of a swarm: the nodes, clusters and edges every renderer draws.

Mermaid, DOT, the fallback SVG layout and the HTML page all read this one structure, so
they agree on ids, kinds and labels. Ids are stable: derived from node names, prefixed by
what they are (``n_`` node, ``j_`` join gate, ``t_`` tool execution, ``s__`` start/end),
disambiguated in sorted order, and safe in Mermaid, DOT, SVG and HTML.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..agent import Agent
from ..swarm import Edge, GraphBuildType, Swarm

__all__ = ["START", "END", "View", "as_swarm", "ViewCluster", "ViewEdge", "ViewNode", "view_of"]

START = "s__start"
END = "s__end"


@dataclass(frozen=True, kw_only=True)
class ViewNode:
    """One drawn node."""

    id: str
    """Stable id (Mermaid node id, DOT node id, SVG element id)."""
    name: str
    """The node's name in its swarm (``""`` for start/end)."""
    kind: str
    """``agent`` | ``critic`` | ``human`` | ``function`` | ``tools`` | ``join`` | ``start`` | ``end``."""
    label: str
    """Text to show; may hold newlines."""
    root: bool = False
    """The swarm's root agent (where a run starts)."""
    cluster: str | None = None
    """Id of the nested swarm this node is drawn inside, if any."""
    card: dict[str, Any] = field(default_factory=dict, compare=False)
    """The node's card (prompt, tools, model, …)."""


@dataclass(frozen=True, kw_only=True)
class ViewCluster:
    """A nested swarm, drawn as a subgraph around its own nodes."""

    id: str
    name: str
    label: str
    cluster: str | None
    """Id of the enclosing cluster, if nested deeper."""
    entry: str
    """Id of the inner node an edge into the cluster points at."""
    exit: str
    """Id of the inner node an edge out of the cluster leaves from."""
    card: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, kw_only=True)
class ViewEdge:
    """One drawn edge; ``source``/``target`` are node or cluster ids."""

    source: str
    target: str
    kind: str
    """``flow`` | ``parallel`` | ``loop`` | ``critic`` | ``handoff`` | ``delegate`` | ``join`` |
    ``tools`` | ``start`` | ``end`` | ``otherwise``."""
    label: str | None = None


@dataclass(kw_only=True)
class View:
    """Everything a renderer needs, in a deterministic order."""

    name: str
    build_type: str
    nodes: list[ViewNode] = field(default_factory=list)
    clusters: list[ViewCluster] = field(default_factory=list)
    edges: list[ViewEdge] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def node(self, id: str) -> ViewNode | None:
        return next((n for n in self.nodes if n.id == id), None)

    def find(self, name: str, within: str | None = None) -> str | None:
        """Id of the node or cluster called ``name``, preferring those inside cluster ``within``
        (searched at any depth), then the top level, then anywhere."""
        items = [(n.id, n.name, n.cluster) for n in self.nodes if n.kind not in ("start", "end")]
        items += [(c.id, c.name, c.cluster) for c in self.clusters]
        inside = self._inside(within) if within else set()
        scopes: tuple[Callable[[str | None], bool], ...] = (
            lambda c: c in inside,
            lambda c: c is None,
            lambda c: True,
        )
        for scope in scopes:
            hit = sorted(i for i, n, c in items if n == name and scope(c))
            if hit:
                return hit[0]
        return None

    def _inside(self, cluster: str | None) -> set[str | None]:
        found: set[str | None] = {cluster}
        grew = True
        while grew:
            more = {c.id for c in self.clusters if c.cluster in found} - found
            found |= more
            grew = bool(more)
        return found


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_") or "node"


def as_swarm(obj: Any) -> Swarm:
    """A swarm for ``obj``: a Swarm, an Agent, or a runnable source wrapping an agent."""
    if isinstance(obj, Swarm):
        return obj
    agent = obj if isinstance(obj, Agent) else getattr(obj, "agent", None)
    if isinstance(agent, Agent):
        return Swarm(agent, name=agent.name)
    raise TypeError(f"cannot draw {obj!r}: pass a Swarm or an Agent")


def _subtitle(card: dict[str, Any]) -> str | None:
    kind = card.get("kind")
    if kind == "agent":
        tools = list(card.get("tools") or []) + list(card.get("mcp_servers") or [])
        if tools:
            shown = ", ".join(str(t) for t in tools[:3]) + (", ..." if len(tools) > 3 else "")
            return f"tools: {shown}"
        return None
    if kind == "critic":
        return f"critic, pass >= {card.get('threshold')}"
    if kind == "human":
        return "human input"
    if kind == "function":
        return "function"
    return None


class _Builder:
    def __init__(self, swarm: Swarm, tools: bool) -> None:
        self.view = View(name=swarm.name, build_type=swarm.build_type.value, info=dict(swarm.info))
        self.tools = tools
        self.used: set[str] = {START, END}

    def new_id(self, prefix: str, path: str) -> str:
        base = f"{prefix}{path}"
        candidate, n = base, 1
        while candidate in self.used:
            n += 1
            candidate = f"{base}_{n}"
        self.used.add(candidate)
        return candidate

    def add(self, swarm: Swarm, cluster: str | None, path: str) -> dict[str, str]:
        """Draw ``swarm``'s nodes and edges; return its node names → ids."""
        ids: dict[str, str] = {}
        inner: dict[str, Swarm] = {}
        for name in sorted(swarm.nodes):
            node = swarm.nodes[name]
            ids[name] = self.new_id("n_", path + _slug(name))
            if isinstance(node, Swarm):
                inner[name] = node
        cards = swarm.info.get("cards")
        versions: dict[str, Any] = cards if isinstance(cards, dict) else {}
        for name in sorted(swarm.nodes):
            node = swarm.nodes[name]
            card = dict(node.card())
            found = versions.get(name)
            lineage: dict[str, Any] = found if isinstance(found, dict) else {}
            card.update({k: v for k, v in lineage.items() if v is not None and k not in card})
            if name in inner:
                sub = self.add(inner[name], ids[name], ids[name][2:] + "__")
                entry = sub.get(inner[name].root or "") or sorted(sub.values())[0]
                self.view.clusters.append(
                    ViewCluster(
                        id=ids[name],
                        name=name,
                        label=f"{name} ({inner[name].build_type.value} swarm)",
                        cluster=cluster,
                        entry=entry,
                        exit=_exit_of(inner[name], sub),
                        card=card,
                    )
                )
                continue
            label = name + (" (root)" if name == swarm.root else "")
            sub_title = _subtitle(card)
            kind = str(card.get("kind", "agent"))
            self.view.nodes.append(
                ViewNode(
                    id=ids[name],
                    name=name,
                    kind=kind,
                    label=label + (f"\n{sub_title}" if sub_title else ""),
                    root=name == swarm.root,
                    cluster=cluster,
                    card=card,
                )
            )
            if self.tools and isinstance(node, Agent) and (node.tools or node.mcp_config):
                tid = self.new_id("t_", ids[name][2:])
                self.view.nodes.append(
                    ViewNode(
                        id=tid,
                        name=f"{name}__tools",
                        kind="tools",
                        label=f"{name} tools",
                        cluster=cluster,
                        card={"kind": "tools", "agent": name, "tools": card.get("tools")},
                    )
                )
                self.view.edges.append(
                    ViewEdge(source=ids[name], target=tid, kind="tools", label="tool calls")
                )
        self.wire(swarm, ids, cluster is None)
        return ids

    def wire(self, swarm: Swarm, ids: dict[str, str], top: bool) -> None:
        edges: list[ViewEdge] = []
        gates: dict[str, str] = {}
        for join in sorted(swarm.joins):
            gate = self.new_id("j_", ids[join][2:])
            gates[join] = gate
            preds = ", ".join(sorted(swarm.joins[join]))
            self.view.nodes.append(
                ViewNode(
                    id=gate,
                    name=f"{join}__join",
                    kind="join",
                    label="join",
                    cluster=self.cluster_of(ids[join]),
                    card={"kind": "join", "joins": join, "waits_for": sorted(swarm.joins[join])},
                )
            )
            edges.append(
                ViewEdge(source=gate, target=ids[join], kind="join", label=f"all of {preds}")
            )
        fanout = {
            name: sum(
                1
                for e in swarm.edges
                if e.source == name and e.kind == "flow" and e.condition is None
            )
            for name in swarm.nodes
        }
        for e in swarm.edges:
            src, dst = ids[e.source], ids[e.target]
            kind, label = e.kind, e.label
            if e.kind == "flow" and e.target in gates and e.source in swarm.joins[e.target]:
                dst = gates[e.target]
            elif e.kind == "flow" and e.condition is None and fanout[e.source] > 1:
                kind, label = "parallel", "parallel"
            edges.append(ViewEdge(source=src, target=dst, kind=kind, label=label))
        if top:
            start_kind = "parallel" if len(swarm.entries) > 1 else "start"
            for entry in swarm.entries:
                edges.append(
                    ViewEdge(
                        source=START,
                        target=ids[entry],
                        kind=start_kind,
                        label="parallel" if start_kind == "parallel" else None,
                    )
                )
            if swarm.build_type is GraphBuildType.WORKFLOW:
                edges += _ends(swarm, ids)
        self.view.edges += sorted(
            set(edges), key=lambda e: (e.source, e.target, e.kind, e.label or "")
        )

    def cluster_of(self, node_id: str) -> str | None:
        node = self.view.node(node_id)
        return (
            node.cluster
            if node
            else next((c.cluster for c in self.view.clusters if c.id == node_id), None)
        )


def _onward(swarm: Swarm, name: str) -> list[Edge]:
    return [e for e in swarm.edges if e.source == name and e.kind in ("flow", "loop")]


def _ends(swarm: Swarm, ids: dict[str, str]) -> list[ViewEdge]:
    """Edges to END: from nodes with no onward edge, and (dotted) from nodes whose onward edges
    are all conditional, since the run ends there when no condition holds."""
    out: list[ViewEdge] = []
    for name in swarm.nodes:
        onward = _onward(swarm, name)
        if not onward:
            out.append(ViewEdge(source=ids[name], target=END, kind="end"))
        elif all(e.condition is not None or e.kind == "loop" for e in onward):
            out.append(ViewEdge(source=ids[name], target=END, kind="otherwise", label="otherwise"))
    return out


def _exit_of(swarm: Swarm, ids: dict[str, str]) -> str:
    if swarm.build_type is GraphBuildType.WORKFLOW:
        last = sorted(ids[n] for n in swarm.nodes if not _onward(swarm, n))
        if last:
            return last[0]
    return ids.get(swarm.root or "") or sorted(ids.values())[0]


def view_of(obj: Any, *, tools: bool = False) -> View:
    """The :class:`View` of a swarm (or a lone agent); ``tools`` draws tool-execution nodes."""
    swarm = as_swarm(obj)
    builder = _Builder(swarm, tools)
    builder.add(swarm, None, "")
    view = builder.view
    view.nodes.insert(0, ViewNode(id=START, name="", kind="start", label="start"))
    if any(e.target == END for e in view.edges):
        view.nodes.append(ViewNode(id=END, name="", kind="end", label="end"))
    order = {"start": 0, "end": 2}
    view.nodes.sort(key=lambda n: (order.get(n.kind, 1), n.id))
    view.clusters.sort(key=lambda c: c.id)
    view.edges.sort(key=lambda e: (e.source, e.target, e.kind, e.label or ""))
    return view
