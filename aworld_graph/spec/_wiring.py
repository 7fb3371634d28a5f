"""A workflow's topology, edges and references: checked against its nodes, converted to the
Python form :class:`~aworld_graph.swarm.Swarm` takes, and the swarm's own findings mapped back
to the lines that cause them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import DefinitionError
from ..swarm import Edge, edge
from ..swarm.conditions import FIELDS, Condition, compile_condition
from ._problems import Problem, did_you_mean
from ._registry import ImportProblem, Unchecked, import_ref
from ._validate import check
from .models import EdgeSpec, Parallel, Serial, Step
from .source import Path_, Source

__all__ = ["Wiring"]

_PREDICATE = re.compile(r"^[\w.]+:[\w.]+$")
_CONDITION_FIX = (
    f"a condition reads {', '.join(FIELDS)}; compares with == != < <= > >= in; combines with "
    'and/or/not (e.g. "score >= 0.8"); or names a predicate package.module:function'
)


@dataclass(kw_only=True)
class Wiring:
    """The references of one workflow (or inline nested workflow) and what was found wrong."""

    source: Source
    prefix: Path_
    """Where the workflow is in its file (``()`` for a whole file)."""
    nodes: dict[str, Path_]
    """Node names and where each is defined."""
    broken: set[str] = field(default_factory=set)
    """Names of nodes whose definition failed (already reported; references to them are not)."""
    problems: list[Problem] = field(default_factory=list)
    execute: bool = True
    """Import the module of a ``module:function`` predicate (``False``: check its source)."""
    incomplete: bool = False
    """Something was left out of the swarm; its own reachability findings would mislead."""
    blocked: bool = False
    """The swarm cannot be built for checking at all."""
    pairs: dict[tuple[str, str], Path_] = field(default_factory=dict)
    declared: list[tuple[EdgeSpec, Path_]] = field(default_factory=list)

    def ref(self, name: Any, path: Path_, what: str = "node") -> bool:
        """Whether ``name`` is a node; if not, say so (once per cause)."""
        if name in self.nodes:
            return True
        self.incomplete = True
        if name not in self.broken:
            known = sorted(self.nodes)
            self.problems.append(
                self.source.problem(
                    path,
                    f"unknown {what} {name!r}{did_you_mean(str(name), known)}",
                    f"use one of the nodes: {', '.join(known) or 'none'}",
                )
            )
        return False

    # -- topology -----------------------------------------------------------------------------
    def topology(self, raw: Any, build_type: str | None) -> list[Any] | None:
        if raw is None:
            return None
        where = self.prefix + ("topology",)
        if not isinstance(raw, list):
            self.problems.append(
                self.source.problem(
                    where, "expected a list", "write the steps (or pairs) as a YAML list"
                )
            )
            self.blocked = True
            return None
        steps = []
        for i, item in enumerate(raw):
            step, problems = check(Step, item, self.source, where + (i,))
            self.problems += problems
            self.blocked = self.blocked or step is None
            steps.append(step)
        if build_type is None:  # the header is broken: still check every name it uses
            for i, step in enumerate(steps):
                self._names(step, where + (i,))
        if self.blocked or build_type is None:
            self.blocked = True
            return None
        if build_type == "workflow":
            converted = [self._step(s, where + (i,)) for i, s in enumerate(steps)]
            return [c for c in converted if c is not None]
        pairs = [self._pair(s, where + (i,), build_type) for i, s in enumerate(steps)]
        return [p for p in pairs if p is not None]

    def _names(self, step: Any, path: Path_) -> None:
        """Check the node names of a step of any shape (when the build type is unknown)."""
        if isinstance(step, str):
            for name in step.split("->") if step.count("->") == 1 else [step]:
                self.ref(name.strip(), path)
        elif isinstance(step, list):
            for j, name in enumerate(step):
                self.ref(name, path + (j,))
        elif isinstance(step, Parallel | Serial):
            key = "parallel" if isinstance(step, Parallel) else "serial"
            for j, part in enumerate(getattr(step, key)):
                self._names(part, path + (key, j))

    def _step(self, step: Any, path: Path_) -> Any:
        if isinstance(step, str) and "->" not in step:
            return step if self.ref(step, path) else None
        if isinstance(step, Parallel | Serial):
            key = "parallel" if isinstance(step, Parallel) else "serial"
            done = [self._step(s, path + (key, j)) for j, s in enumerate(getattr(step, key))]
            done = [d for d in done if d is not None]
            return list(done) if key == "parallel" else tuple(done)
        self.problems.append(
            self.source.problem(
                path,
                f"{step!r} is a pair, but a workflow topology lists steps",
                "list the steps in order (a top-level list is a chain), use {parallel: [a, b]} for "
                "branches, or set build_type: handoff / team / hybrid for pairs",
            )
        )
        self.blocked = True
        return None

    def _pair(self, step: Any, path: Path_, build_type: str) -> tuple[str, str] | None:
        pair: list[str] | None = None
        if isinstance(step, str) and step.count("->") == 1:
            pair = [part.strip() for part in step.split("->")]
        elif isinstance(step, list) and len(step) == 2:
            pair = step
        if pair is None:
            shown = repr(step) if isinstance(step, str | list) else "a {parallel/serial} group"
            self.problems.append(
                self.source.problem(
                    path,
                    f"{shown} is not a pair; {build_type} topology entries are pairs",
                    "write one pair per entry: 'a -> b' or [a, b] (workflows list steps instead)",
                )
            )
            self.blocked = True
            return None
        ok = [
            self.ref(name, path + (j,) if isinstance(step, list) else path)
            for j, name in enumerate(pair)
        ]
        if not all(ok):
            return None
        self.pairs[(pair[0], pair[1])] = path
        return pair[0], pair[1]

    # -- edges --------------------------------------------------------------------------------
    def edges(self, raw: Any) -> list[Edge]:
        where = self.prefix + ("edges",)
        if raw is None:
            return []
        if not isinstance(raw, list):
            self.problems.append(
                self.source.problem(
                    where,
                    "expected a list of edges",
                    "write `edges: [{from: a, to: b, when: ...}]`",
                )
            )
            self.blocked = True
            return []
        edges: list[Edge] = []
        for i, item in enumerate(raw):
            spec, problems = check(EdgeSpec, item, self.source, where + (i,))
            self.problems += problems
            if spec is None:
                self.incomplete = True
                continue
            ok = [self.ref(spec.from_, where + (i, "from")), self.ref(spec.to, where + (i, "to"))]
            condition = None
            if spec.when is not None:
                condition = self._condition(spec, where + (i, "when"))
            if all(ok):  # a bad condition is reported; the edge still counts for reachability
                edges.append(edge(spec.from_, spec.to, condition, max_rounds=spec.max_rounds))
                self.declared.append((spec, where + (i,)))
        return edges

    def _condition(self, spec: EdgeSpec, path: Path_) -> Condition | None:
        text = str(spec.when).strip()
        try:
            if _PREDICATE.match(text):
                fn = import_ref(text, {}, "predicate", execute=self.execute)
                return compile_condition(fn, f"edge {spec.from_} -> {spec.to}")
            return compile_condition(text, f"edge {spec.from_} -> {spec.to}")
        except Unchecked as exc:
            self.problems.append(self.source.problem(path, exc.message, "", warning=True))
            return compile_condition(exc.stand_in, f"edge {spec.from_} -> {spec.to}")
        except ImportProblem as exc:
            self.problems.append(self.source.problem(path, exc.message, exc.fix))
        except DefinitionError as exc:
            message = str(exc).split(": ", 1)[-1].split("; write e.g.")[0]
            name = re.search(r"unknown name '([^']+)'", message)
            if name:
                message = message.split(" (known:")[0] + did_you_mean(name.group(1), FIELDS)
            self.problems.append(self.source.problem(path, message, _CONDITION_FIX))
        return None

    # -- what the Swarm itself finds ----------------------------------------------------------
    def swarm_problems(self, text: str) -> None:
        """Map a :class:`Swarm` build error's findings to the lines that cause them."""
        lines = [ln[4:] for ln in text.splitlines() if ln.startswith("  - ")] or [text]
        for message in lines:
            if "parallel group needs" in message or "unknown node" in message:
                continue  # reported already, where it was written
            if "unreachable" in message and self.incomplete:
                continue  # a consequence of something already reported
            self.problems.append(self._map(message))

    def _map(self, message: str) -> Problem:
        problem = self.source.problem
        cycle = re.match(r"workflow cycle (.+?);", message)
        if cycle:
            hops = cycle.group(1).split(" -> ")
            steps = set(zip(hops, hops[1:], strict=False))
            for spec, path in self.declared:
                if (spec.from_, spec.to) in steps and spec.max_rounds is None:
                    return problem(
                        path,
                        f"workflow cycle {cycle.group(1)}",
                        "add `max_rounds: N` to this edge to declare a loop, or remove it",
                    )
            return problem(
                self.prefix + ("topology",),
                f"workflow cycle {cycle.group(1)}",
                "list each node once; declare loops as edges with max_rounds",
            )
        head, _, tail = message.partition("; ")
        quoted = re.findall(r"'([^']+)'", head)
        if "cannot hand off" in head:
            path = (
                self.pairs.get((quoted[0], quoted[1]), self.prefix + ("topology",))
                if len(quoted) > 1
                else self.prefix + ("topology",)
            )
            return problem(
                path, head.split(": ", 1)[-1], "set `build_type: hybrid`, or remove the pair"
            )
        if head.startswith("root_agent") or "team leader" in head:
            return problem(
                self.prefix + ("root_agent",),
                head,
                tail or "make root_agent the agent where the run starts",
            )
        named = next((self.nodes[q] for q in quoted if q in self.nodes), self.prefix)
        if "unreachable" in head:
            return problem(named, head, "reach it from the topology or an edge, or remove it")
        if "holds agents only" in head:
            return problem(
                named, head, tail.replace("TeamSwarm or HybridSwarm", "build_type: team or hybrid")
            )
        if "team member" in head:
            return problem(named, head, "make it an agent, or use build_type: workflow")
        return problem(named, head, tail)
