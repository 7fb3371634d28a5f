"""An SVG drawing of a view without Graphviz: layered with networkx, nested swarms as blocks.

Used by the HTML page when ``dot`` is not installed. Each swarm level is laid out in layers
(the topological generations, from networkx, of its graph without back edges); a nested
swarm is laid out first and then placed as one block in its parent's layers. The SVG has the
structure the page script reads from Graphviz output: ``g.node`` / ``g.cluster`` / ``g.edge``
groups whose ``id`` is the view id.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import networkx as nx

from ._view import View, ViewNode

__all__ = ["layout_svg"]

_W, _H, _GAP_X, _GAP_Y, _PAD, _TITLE = 150.0, 46.0, 40.0, 60.0, 16.0, 26.0
_COLORS = {
    "agent": ("#e8f0fe", "#3367d6"),
    "critic": ("#fce8e6", "#c5221f"),
    "human": ("#fef7e0", "#e37400"),
    "function": ("#e6f4ea", "#188038"),
    "tools": ("#f1f3f4", "#5f6368"),
    "join": ("#3c4043", "#202124"),
    "start": ("#ffffff", "#5f6368"),
    "end": ("#ffffff", "#5f6368"),
}
_DASHED = {"loop", "critic", "otherwise", "delegate"}
_BACK = {"loop", "critic", "otherwise"}


@dataclass
class _Box:
    x: float = 0.0
    """Centre."""
    y: float = 0.0
    w: float = _W
    h: float = _H


def _size(kind: str) -> tuple[float, float]:
    if kind == "join":
        return 40.0, 40.0
    if kind in ("start", "end"):
        return 90.0, 36.0
    return _W, _H


class _Layout:
    def __init__(self, view: View) -> None:
        self.view = view
        self.boxes: dict[str, _Box] = {}
        self.parent: dict[str, str | None] = {n.id: n.cluster for n in view.nodes}
        self.parent.update({c.id: c.cluster for c in view.clusters})

    def item_at(self, ident: str, level: str | None) -> str | None:
        """The item of ``level`` that holds ``ident`` (itself, or the child cluster around it)."""
        current: str | None = ident
        while current is not None and self.parent.get(current, "?") != level:
            current = self.parent.get(current)
        return current

    def place(self, level: str | None) -> tuple[float, float]:
        """Lay out ``level`` with its top-left at (0, 0); returns its width and height."""
        items = [n.id for n in self.view.nodes if n.cluster == level]
        items += [c.id for c in self.view.clusters if c.cluster == level]
        for ident in items:
            node = self.view.node(ident)
            if node is not None:
                w, h = _size(node.kind)
                self.boxes[ident] = _Box(w=w, h=h)
            else:
                w, h = self.place(ident)  # its contents now span (0, 0)-(w, h)
                self.boxes[ident] = _Box(
                    x=w / 2, y=(h - _TITLE) / 2, w=w + 2 * _PAD, h=h + 2 * _PAD + _TITLE
                )
        graph: nx.DiGraph[str] = nx.DiGraph()
        graph.add_nodes_from(sorted(items))
        for e in self.view.edges:
            u, v = self.item_at(e.source, level), self.item_at(e.target, level)
            if u is not None and v is not None and u != v and e.kind not in _BACK:
                graph.add_edge(u, v)
        dag: nx.DiGraph[str] = nx.DiGraph()
        dag.add_nodes_from(graph.nodes)
        for u, v in sorted(graph.edges):
            dag.add_edge(u, v)
            if not nx.is_directed_acyclic_graph(dag):
                dag.remove_edge(u, v)
        layers = [sorted(layer) for layer in nx.topological_generations(dag)]
        width = max(
            (sum(self.boxes[i].w for i in layer) + _GAP_X * (len(layer) - 1) for layer in layers),
            default=0.0,
        )
        y = 0.0
        order: dict[str, float] = {}
        for layer in layers:
            layer.sort(
                key=lambda i: (_mean([order[p] for p in dag.predecessors(i) if p in order]), i)
            )
            row = sum(self.boxes[i].w for i in layer) + _GAP_X * (len(layer) - 1)
            x = (width - row) / 2
            tallest = max(self.boxes[i].h for i in layer)
            for ident in layer:
                box = self.boxes[ident]
                self.move(ident, x + box.w / 2 - box.x, y + tallest / 2 - box.y)
                order[ident] = box.x
                x += box.w + _GAP_X
            y += tallest + _GAP_Y
        return width, max(y - _GAP_Y, 0.0)

    def move(self, ident: str, dx: float, dy: float) -> None:
        """Shift ``ident`` and, for a cluster, everything inside it."""
        self.boxes[ident].x += dx
        self.boxes[ident].y += dy
        for child, parent in self.parent.items():
            if parent == ident:
                self.move(child, dx, dy)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _shape(node: ViewNode, b: _Box) -> str:
    fill, stroke = _COLORS.get(node.kind, _COLORS["agent"])
    style = f'fill="{fill}" stroke="{stroke}" stroke-width="{3 if node.root else 1.2}"'
    w, h = b.w / 2, b.h / 2
    if node.kind in ("start", "end"):
        return f'<ellipse cx="{b.x:.1f}" cy="{b.y:.1f}" rx="{w:.1f}" ry="{h:.1f}" {style}/>'
    if node.kind == "join":
        return f'<circle cx="{b.x:.1f}" cy="{b.y:.1f}" r="{h:.1f}" {style}/>'
    if node.kind == "critic":
        pts = [(-w, 0), (-w + 14, -h), (w - 14, -h), (w, 0), (w - 14, h), (-w + 14, h)]
    elif node.kind == "human":
        pts = [(-w + 12, -h), (w, -h), (w - 12, h), (-w, h)]
    else:
        rx = 10 if node.kind == "agent" else 2
        return f'<rect x="{b.x - w:.1f}" y="{b.y - h:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" rx="{rx}" {style}/>'
    points = " ".join(f"{b.x + px:.1f},{b.y + py:.1f}" for px, py in pts)
    return f'<polygon points="{points}" {style}/>'


def _text(label: str, x: float, y: float, color: str = "#202124") -> str:
    lines = label.split("\n")
    top = y - (len(lines) - 1) * 7
    return "".join(
        f'<text x="{x:.1f}" y="{top + i * 14 + 4:.1f}" text-anchor="middle" font-size="{12 if i == 0 else 10}" '
        f'fill="{color}">{escape(line[:30])}</text>'
        for i, line in enumerate(lines)
    )


def _path(s: _Box, t: _Box) -> tuple[str, float, float]:
    """An edge path from box ``s`` to box ``t``, and where its label goes."""
    if t.y - t.h / 2 > s.y + s.h / 2:  # downwards
        x1, y1, x2, y2 = s.x, s.y + s.h / 2, t.x, t.y - t.h / 2 - 3
        return f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}", (x1 + x2) / 2 + 4, (y1 + y2) / 2
    x1, y1, x2, y2 = s.x + s.w / 2, s.y, t.x + t.w / 2 + 3, t.y
    bend = max(x1, x2) + 50
    return (
        f"M{x1:.1f},{y1:.1f} C{bend:.1f},{y1:.1f} {bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}",
        bend - 20,
        (y1 + y2) / 2,
    )


def layout_svg(view: View) -> str:
    """An SVG document (as text) drawing ``view``; edge ``i`` of ``view.edges`` has id ``e<i>``."""
    layout = _Layout(view)
    width, height = layout.place(None)
    boxes = layout.boxes
    for ident in boxes:
        boxes[ident].x += 30
        boxes[ident].y += 30
    parts: list[str] = []
    for cluster in sorted(view.clusters, key=lambda c: _depth(layout, c.id)):
        b = boxes[cluster.id]
        parts.append(
            f'<g id="{escape(cluster.id)}" class="cluster swarm"><title>{escape(cluster.name)}</title>'
            f'<rect x="{b.x - b.w / 2:.1f}" y="{b.y - b.h / 2:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" rx="8" '
            f'fill="#f8f9fa" stroke="#80868b" stroke-dasharray="5,3"/>'
            + _text(cluster.label, b.x, b.y - b.h / 2 + 16)
            + "</g>"
        )
    for i, edge in enumerate(view.edges):
        d, lx, ly = _path(boxes[edge.source], boxes[edge.target])
        dash = ' stroke-dasharray="6,4"' if edge.kind in _DASHED else ""
        stroke = 2.4 if edge.kind == "handoff" else 1.3
        label = _text(edge.label, lx, ly, "#5f6368") if edge.label else ""
        parts.append(
            f'<g id="e{i}" class="edge {edge.kind}"><title>{escape(edge.source)}-&gt;{escape(edge.target)}</title>'
            f'<path d="{d}" fill="none" stroke="#5f6368" stroke-width="{stroke}"{dash} marker-end="url(#arrow)"/>{label}</g>'
        )
    for node in view.nodes:
        b = boxes[node.id]
        classes = f"node {node.kind}" + (" root" if node.root else "")
        parts.append(
            f'<g id="{escape(node.id)}" class="{classes}"><title>{escape(node.name or node.label)}</title>'
            + _shape(node, b)
            + _text(node.label, b.x, b.y, "#ffffff" if node.kind == "join" else "#202124")
            + "</g>"
        )
    w, h = width + 140, height + 60
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
        f'viewBox="0 0 {w:.0f} {h:.0f}" font-family="Helvetica, Arial, sans-serif">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#5f6368"/>'
        f'</marker></defs><g id="graph0" class="graph">{"".join(parts)}</g></svg>'
    )


def _depth(layout: _Layout, ident: str) -> int:
    depth, current = 0, layout.parent.get(ident)
    while current is not None:
        depth, current = depth + 1, layout.parent.get(current)
    return depth
