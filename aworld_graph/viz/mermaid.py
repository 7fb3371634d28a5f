"""Swarm → Mermaid flowchart text (renders on GitHub, GitLab and in Mermaid tooling).

Node kinds get their own shape and class: agent (rounded), critic (hexagon), human
(trapezoid), function (subroutine), tool execution (cylinder), join (circle), start/end
(stadium). A nested swarm is a ``subgraph``. Handoffs are thick arrows, delegations dotted
two-way arrows, loops and critic retries dotted arrows; every edge that carries a condition,
a round limit or a kind is labelled.
"""

from __future__ import annotations

import json
from typing import Any

from ._view import View, ViewEdge, ViewNode, view_of

__all__ = ["to_mermaid", "mermaid_text"]

_SHAPES = {
    "agent": ('("', '")'),
    "critic": ('{{"', '"}}'),
    "human": ('[/"', '"\\]'),
    "function": ('[["', '"]]'),
    "tools": ('[("', '")]'),
    "join": ('(("', '"))'),
    "start": ('(["', '"])'),
    "end": ('(["', '"])'),
}

_ARROWS = {
    "flow": "-->",
    "parallel": "-->",
    "start": "-->",
    "end": "-->",
    "join": "-->",
    "otherwise": "-.->",
    "loop": "-.->",
    "critic": "-.->",
    "handoff": "==>",
    "delegate": "<-.->",
    "tools": "<-->",
}

_CLASSES = {
    "agent": "fill:#e8f0fe,stroke:#3367d6,color:#0b1f44",
    "critic": "fill:#fce8e6,stroke:#c5221f,color:#3c0a07",
    "human": "fill:#fef7e0,stroke:#e37400,color:#3d2300",
    "function": "fill:#e6f4ea,stroke:#188038,color:#0b2e17",
    "tools": "fill:#f1f3f4,stroke:#5f6368,color:#202124",
    "join": "fill:#3c4043,stroke:#202124,color:#ffffff",
    "terminal": "fill:#ffffff,stroke:#5f6368,color:#202124",
    "root": "stroke-width:3px",
}

_ENTITIES = {
    "#": "#35;",
    '"': "#quot;",
    "&": "#amp;",
    "<": "#lt;",
    ">": "#gt;",
    "|": "#124;",
    "`": "#96;",
    "\\": "#92;",
}


def mermaid_text(text: str) -> str:
    """``text`` made safe inside a quoted Mermaid label: special characters become entity
    codes and newlines become ``<br/>``."""
    out = "".join(_ENTITIES.get(ch, ch) for ch in text.replace("\r\n", "\n"))
    return "<br/>".join(out.split("\n"))


def _class(node: ViewNode) -> str:
    cls = "terminal" if node.kind in ("start", "end") else node.kind
    return cls if cls in _CLASSES else "agent"


def _node(node: ViewNode) -> str:
    left, right = _SHAPES.get(node.kind, _SHAPES["agent"])
    return f"{node.id}{left}{mermaid_text(node.label)}{right}:::{_class(node)}"


def _edge(edge: ViewEdge) -> str:
    arrow = _ARROWS.get(edge.kind, "-->")
    label = f'|"{mermaid_text(edge.label)}"|' if edge.label else ""
    return f"{edge.source} {arrow}{label} {edge.target}"


def _body(view: View, cluster: str | None, depth: int) -> list[str]:
    pad = "    " * depth
    lines = [pad + _node(n) for n in view.nodes if n.cluster == cluster]
    for c in view.clusters:
        if c.cluster == cluster:
            lines.append(f'{pad}subgraph {c.id}["{mermaid_text(c.label)}"]')
            lines.append(f"{pad}    direction TB")
            lines += _body(view, c.id, depth + 1)
            lines.append(f"{pad}end")
    return lines


def to_mermaid(swarm: Any, *, tools: bool = False, direction: str = "TD") -> str:
    """The topology of ``swarm`` (a ``Swarm`` or an ``Agent``) as a Mermaid flowchart.

    ``tools=True`` also draws each tool-using agent's tool-execution node. The text is
    deterministic: nodes and edges are sorted and ids are derived from node names.
    """
    if direction not in ("TD", "TB", "LR", "RL", "BT"):
        raise ValueError(f"direction must be one of TD, TB, LR, RL, BT; got {direction!r}")
    view = view_of(swarm, tools=tools)
    lines = [
        "---",
        f"title: {json.dumps(f'{view.name} ({view.build_type})')}",
        "---",
        f"flowchart {direction}",
        *_body(view, None, 1),
        *(f"    {_edge(e)}" for e in view.edges),
    ]
    roots = [n.id for n in view.nodes if n.root]
    used = {_class(n) for n in view.nodes} | ({"root"} if roots else set())
    lines += [f"    classDef {name} {style}" for name, style in _CLASSES.items() if name in used]
    if roots:
        lines.append(f"    class {','.join(roots)} root")
    for c in view.clusters:
        lines.append(f"    style {c.id} fill:#f8f9fa,stroke:#80868b,stroke-dasharray:4 3")
    return "\n".join(lines) + "\n"
