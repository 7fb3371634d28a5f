"""``Swarm``: agents, critics, humans and nested swarms wired into a topology.

Build types follow AWorld:

* ``WORKFLOW`` – a DAG. In ``topology`` the outer sequence and any tuple are serial chains, a
  list is a parallel group (fan-out, then a join that waits for every branch). ``Swarm(a, b, c)``
  with no topology is the chain ``a → b → c``. Cycles are build errors unless declared as loops
  (``Edge(..., max_rounds=N)``) or made by a :class:`~aworld_graph.nodes.Critic`.
* ``HANDOFF`` – ``(left, right)`` pairs; ``right`` becomes a handoff tool of ``left``; cycles are
  allowed; the active agent is remembered across the tasks of one session.
* ``TEAM`` – the root agent leads; the others are delegate tools that run and report back.
* ``HYBRID`` – a team whose members may also hand off to one another.

Everything is validated when the swarm is built, and every problem is reported at once.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx

from ..agent import Agent
from ..errors import DefinitionError
from .conditions import Condition, compile_condition
from .nodes import Critic, Human, Node

__all__ = [
    "Edge",
    "GraphBuildType",
    "HandoffSwarm",
    "HybridSwarm",
    "Swarm",
    "TeamSwarm",
    "WorkflowSwarm",
]

NodeDef = Agent | Critic | Human | Node | Any  # Any: a nested Swarm


class GraphBuildType(enum.StrEnum):
    """How a swarm's topology is read (AWorld's names)."""

    WORKFLOW = "workflow"
    HANDOFF = "handoff"
    TEAM = "team"
    HYBRID = "hybrid"


@dataclass(kw_only=True, frozen=True)
class Edge:
    """A directed edge of a swarm."""

    source: str
    """Node the edge leaves."""
    target: str
    """Node the edge enters."""
    kind: str = "flow"
    """``flow`` (workflow order), ``loop`` (a declared cycle), ``handoff``, ``delegate`` or ``critic``
    (a critic sending work back)."""
    condition: Condition | None = None
    """Taken only when this holds (evaluated on the state at run time)."""
    max_rounds: int | None = None
    """For loops: most times the edge is taken in one run."""

    @property
    def label(self) -> str | None:
        if self.kind == "critic":
            return f"retry (max {self.max_rounds})"
        parts = [self.condition.text] if self.condition else []
        if self.max_rounds is not None:
            parts.append(f"max {self.max_rounds}")
        if self.kind in ("handoff", "delegate"):
            parts.insert(0, self.kind)
        return ", ".join(parts) or None


def _name(item: Any) -> str:
    return item if isinstance(item, str) else getattr(item, "name", repr(item))


def edge(source: Any, target: Any, when: Any = None, *, max_rounds: int | None = None) -> Edge:
    """An :class:`Edge` from node objects or names; ``when`` is a predicate or an expression."""
    return Edge(
        source=_name(source),
        target=_name(target),
        kind="loop" if max_rounds is not None else "flow",
        condition=compile_condition(when, f"edge {_name(source)} -> {_name(target)}")
        if when is not None
        else None,
        max_rounds=max_rounds,
    )


class Swarm:
    """A multi-agent system as one LangGraph graph. See the module docstring for topologies."""

    def __init__(
        self,
        *nodes: NodeDef,
        topology: Sequence[Any] | None = None,
        root_agent: Any = None,
        build_type: GraphBuildType | str = GraphBuildType.WORKFLOW,
        edges: Iterable[Edge | tuple[Any, ...]] = (),
        max_steps: int | None = None,
        name: str | None = None,
        description: str = "",
        info: dict[str, Any] | None = None,
    ) -> None:
        try:
            self.build_type = GraphBuildType(build_type)
        except ValueError:
            raise DefinitionError(
                f"build_type {build_type!r} is unknown; use one of {', '.join(t.value for t in GraphBuildType)}"
            ) from None
        self.name = name or f"{self.build_type.value}_swarm"
        self.description = description
        self.max_steps = max_steps
        self.info: dict[str, Any] = dict(info or {})
        """Facts kept in run metadata: workflow file, version (set by the YAML loader)."""
        self.topology = list(topology) if topology is not None else None
        self.nodes: dict[str, NodeDef] = {}
        self.edges: list[Edge] = []
        self.declared_edges: list[Edge] = []
        """The edges given with ``edges=`` (the rest are implied by the topology and critics)."""
        self.joins: dict[str, list[str]] = {}
        self.entries: list[str] = []
        self.root: str | None = None
        problems: list[str] = []
        self._collect(nodes, problems)
        if self.topology is not None:
            self._collect(_flatten(self.topology), problems)
        if root_agent is not None and not isinstance(root_agent, str):
            self._collect([root_agent], problems)
        if not self.nodes and not problems:
            problems.append(
                f"swarm {self.name!r} has no nodes; pass agents, e.g. Swarm(agent_a, agent_b)"
            )
        if self.nodes:
            wire = {
                GraphBuildType.WORKFLOW: self._wire_workflow,
                GraphBuildType.HANDOFF: self._wire_handoff,
                GraphBuildType.TEAM: self._wire_team,
                GraphBuildType.HYBRID: self._wire_team,
            }[self.build_type]
            wire(root_agent, problems)
            implied = len(self.edges)
            for item in edges:
                self._add_explicit(item, problems)
            self.declared_edges = self.edges[implied:]
            if self.build_type is GraphBuildType.WORKFLOW:
                self._through_critics()
            self._validate(problems)
        if problems:
            raise DefinitionError(
                f"swarm {self.name!r} has {len(problems)} problem(s):\n"
                + "\n".join(f"  - {p}" for p in problems)
            )

    # -- collecting nodes ---------------------------------------------------------------------
    def _collect(self, items: Iterable[Any], problems: list[str]) -> None:
        for item in items:
            if isinstance(item, str):
                continue  # a reference, resolved later
            if not isinstance(item, (Agent, Critic, Human, Node, Swarm)):
                problems.append(f"{item!r} is not an Agent, Critic, Human, Node or Swarm")
                continue
            existing = self.nodes.get(item.name)
            if existing is None:
                self.nodes[item.name] = item
            elif existing is not item:
                problems.append(
                    f"two different nodes are named {item.name!r}; node names must be unique"
                )

    def _ref(self, item: Any, where: str, problems: list[str]) -> str | None:
        name = _name(item)
        if name not in self.nodes:
            known = ", ".join(sorted(self.nodes)) or "none"
            problems.append(f"{where}: unknown node {name!r} (known: {known})")
            return None
        return name

    # -- workflow -----------------------------------------------------------------------------
    def _wire_workflow(self, root_agent: Any, problems: list[str]) -> None:
        items: Sequence[Any] = (
            self.topology if self.topology is not None else list(self.nodes.values())
        )
        entries, _ = self._chain(tuple(items), problems)
        self.entries = entries
        if root_agent is not None:
            root = self._ref(root_agent, "root_agent", problems)
            if root is not None and root not in entries:
                problems.append(
                    f"root_agent {root!r} is not where the workflow starts ({', '.join(entries)})"
                )
        self.root = entries[0] if entries else None
        for node in self.nodes.values():
            if isinstance(node, Critic):
                judged = self._ref(node.judged_name, f"critic {node.name!r} judges", problems)
                if judged is not None:
                    placed = any(node.name in (e.source, e.target) for e in self.edges)
                    if not placed:  # judged -> critic; _through_critics moves the rest
                        self.edges.append(Edge(source=judged, target=node.name))
                    self.edges.append(
                        Edge(
                            source=node.name,
                            target=judged,
                            kind="critic",
                            max_rounds=node.max_rounds,
                        )
                    )

    def _through_critics(self) -> None:
        """Every flow or loop edge out of a judged node leaves through its critic's pass route
        (the critic stands in front of the node's branches, conditional or not), so nothing
        after the node runs on an answer the critic has not passed."""
        for critic in [n for n in self.nodes.values() if isinstance(n, Critic)]:
            judged = critic.judged_name
            if not self._has_edge(judged, critic.name):
                continue
            moved = [
                e
                for e in self.edges
                if e.source == judged and e.kind in ("flow", "loop") and e.target != critic.name
            ]
            kept = [e for e in self.edges if e not in moved]
            self.edges = kept + [
                replace(e, source=critic.name)
                for e in moved
                if replace(e, source=critic.name) not in kept
            ]
            for targets in self.joins.values():
                targets[:] = [critic.name if t == judged else t for t in targets]

    def _chain(self, item: Any, problems: list[str]) -> tuple[list[str], list[str]]:
        """Wire ``item``; return its entry and exit node names."""
        if isinstance(item, tuple):  # serial
            entries: list[str] = []
            exits: list[str] = []
            for i, part in enumerate(item):
                e_in, e_out = self._chain(part, problems)
                if i == 0:
                    entries = e_in
                else:
                    for target in e_in:
                        for source in exits:
                            self.edges.append(Edge(source=source, target=target))
                        if len(exits) > 1:
                            self.joins[target] = list(exits)
                exits = e_out
            return entries, exits
        if isinstance(item, list):  # parallel
            if len(item) < 2:
                problems.append(
                    f"a parallel group needs at least two branches, got {[_name(i) for i in item]}"
                )
            all_in: list[str] = []
            all_out: list[str] = []
            for part in item:
                e_in, e_out = self._chain(part, problems)
                all_in += e_in
                all_out += e_out
            return all_in, all_out
        name = self._ref(item, "topology", problems)
        return ([name], [name]) if name else ([], [])

    def _has_edge(self, source: str, target: str) -> bool:
        return any(e.source == source and e.target == target for e in self.edges)

    def _add_explicit(self, item: Edge | tuple[Any, ...], problems: list[str]) -> None:
        try:
            e = item if isinstance(item, Edge) else edge(*item)
        except (TypeError, DefinitionError) as exc:
            problems.append(f"edge {item!r}: {exc}")
            return
        ok = self._ref(e.source, "edge source", problems) and self._ref(
            e.target, "edge target", problems
        )
        if ok:
            self.edges.append(e)

    # -- handoff / team -----------------------------------------------------------------------
    def _pairs(self, problems: list[str]) -> list[tuple[str, str]]:
        pairs = []
        for item in self.topology or []:
            if not isinstance(item, tuple) or len(item) != 2:
                problems.append(
                    f"{self.build_type.value} topology entries are (left, right) pairs, got {item!r}"
                )
                continue
            left = self._ref(item[0], "topology", problems)
            right = self._ref(item[1], "topology", problems)
            if left and right:
                pairs.append((left, right))
        return pairs

    def _wire_handoff(self, root_agent: Any, problems: list[str]) -> None:
        pairs = self._pairs(problems)
        for name, node in self.nodes.items():
            if not isinstance(node, Agent):
                what = "nested swarm" if isinstance(node, Swarm) else type(node).__name__
                problems.append(
                    f"node {name!r}: a handoff swarm holds agents only, since control passes "
                    f"between them in one conversation and a {what} cannot take a turn in it; "
                    "let an agent delegate to it (TeamSwarm or HybridSwarm: members may be "
                    "swarms and hybrid members hand off), or wire both swarms into a workflow"
                )
        self.root = (
            self._ref(root_agent, "root_agent", problems)
            if root_agent is not None
            else (pairs[0][0] if pairs else next(iter(self.nodes), None))
        )
        self.edges += [Edge(source=a, target=b, kind="handoff") for a, b in pairs]
        self.entries = [self.root] if self.root else []

    def _wire_team(self, root_agent: Any, problems: list[str]) -> None:
        pairs = (
            self._pairs(problems)
            if self.topology is not None and all(isinstance(i, tuple) for i in self.topology)
            else []
        )
        root = (
            self._ref(root_agent, "root_agent", problems)
            if root_agent is not None
            else (pairs[0][0] if pairs else next(iter(self.nodes), None))
        )
        self.root = root
        self.entries = [root] if root else []
        if root is not None and not isinstance(self.nodes.get(root), Agent):
            problems.append(f"the team leader {root!r} must be an Agent")
        for name, node in self.nodes.items():
            if name == root:
                continue
            if not isinstance(node, (Agent, Swarm)):
                problems.append(
                    f"team member {name!r} must be an Agent or a Swarm (got {type(node).__name__})"
                )
            self.edges.append(Edge(source=root or "", target=name, kind="delegate"))
        for a, b in pairs:
            if a == root:
                continue
            if self.build_type is GraphBuildType.TEAM:
                problems.append(
                    f"({a!r}, {b!r}): members of a TEAM cannot hand off to each other; use build_type=HYBRID"
                )
            else:
                self.edges.append(Edge(source=a, target=b, kind="handoff"))

    # -- validation ---------------------------------------------------------------------------
    def to_networkx(self) -> nx.DiGraph[str]:
        """The topology as a ``networkx.DiGraph``: node attributes ``kind``/``card``, edge ``kind``/``label``."""
        graph: nx.DiGraph[str] = nx.DiGraph(
            name=self.name, build_type=self.build_type.value, root=self.root
        )
        for name, node in self.nodes.items():
            card = node.card() if hasattr(node, "card") else {"kind": "swarm", "name": name}
            graph.add_node(
                name, kind=card["kind"], card=card, root=name == self.root, join=name in self.joins
            )
        for e in self.edges:
            graph.add_edge(
                e.source,
                e.target,
                kind=e.kind,
                label=e.label,
                condition=e.condition.text if e.condition else None,
                max_rounds=e.max_rounds,
            )
        return graph

    def _validate(self, problems: list[str]) -> None:
        graph = self.to_networkx()
        if self.build_type is GraphBuildType.WORKFLOW:
            flow = nx.DiGraph([(e.source, e.target) for e in self.edges if e.kind == "flow"])
            try:
                cycle = nx.find_cycle(flow)
            except nx.NetworkXNoCycle:
                cycle = None
            if cycle:
                back = _back_edge(cycle, self.declared_edges)
                start = cycle.index(back) + 1  # the path starts where the back edge returns
                hops = cycle[start:] + cycle[:start]
                path = " -> ".join([hops[0][0], *(v for _, v in hops)])
                problems.append(
                    f"workflow cycle {path}; declare its back edge as a loop, "
                    f"edge({back[0]!r}, {back[1]!r}, max_rounds=N), or use a Critic"
                )
        reachable: set[str] = set()
        for entry in self.entries:
            reachable |= {entry} | nx.descendants(graph, entry)
        for name in self.nodes:
            if name not in reachable:
                problems.append(
                    f"node {name!r} is unreachable from {', '.join(self.entries) or 'the start'}; connect it or remove it"
                )

    def card(self) -> dict[str, Any]:
        return {
            "kind": "swarm",
            "name": self.name,
            "build_type": self.build_type.value,
            "root": self.root,
            "description": self.description,
            "nodes": list(self.nodes),
        }

    def __repr__(self) -> str:
        return f"Swarm(name={self.name!r}, build_type={self.build_type.value!r}, nodes={list(self.nodes)})"


def _back_edge(cycle: list[tuple[str, str]], declared: list[Edge]) -> tuple[str, str]:
    """The hop of ``cycle`` that goes back: one the user declared with ``edges=`` (the
    topology itself is a DAG), else the hop that closes the cycle."""
    given = {(e.source, e.target) for e in declared}
    return next((hop for hop in reversed(cycle) if tuple(hop) in given), cycle[-1])


def _flatten(items: Any) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out += _flatten(item)
        else:
            out.append(item)
    return out


def _typed(build_type: GraphBuildType) -> Callable[..., None]:
    def init(self: Swarm, *nodes: NodeDef, **kwargs: Any) -> None:
        kwargs.pop("build_type", None)
        Swarm.__init__(self, *nodes, build_type=build_type, **kwargs)

    return init


class WorkflowSwarm(Swarm):
    """A ``Swarm`` with ``build_type=WORKFLOW``."""

    __init__ = _typed(GraphBuildType.WORKFLOW)


class HandoffSwarm(Swarm):
    """A ``Swarm`` with ``build_type=HANDOFF``."""

    __init__ = _typed(GraphBuildType.HANDOFF)


class TeamSwarm(Swarm):
    """A ``Swarm`` with ``build_type=TEAM``."""

    __init__ = _typed(GraphBuildType.TEAM)


class HybridSwarm(Swarm):
    """A ``Swarm`` with ``build_type=HYBRID``."""

    __init__ = _typed(GraphBuildType.HYBRID)
