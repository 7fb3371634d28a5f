"""Swarm → Graphviz DOT text, and DOT → SVG/PNG with the local ``dot`` binary.

Node kinds are styled apart by shape and colour; a nested swarm is a ``cluster`` subgraph
(edges into and out of it are clipped at its border with ``lhead``/``ltail``). Every node and
cluster carries its stable id and its kind as the SVG ``id``/``class``, which the HTML page
uses. Rendering never calls a web service.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from ..errors import ConfigError, RuntimeFailure
from ._view import View, ViewEdge, ViewNode, view_of

__all__ = ["dot_text", "render", "render_dot", "to_dot"]

_NODE_STYLE = {
    "agent": 'shape=box, style="rounded,filled", fillcolor="#e8f0fe", color="#3367d6"',
    "critic": 'shape=hexagon, style=filled, fillcolor="#fce8e6", color="#c5221f"',
    "human": 'shape=parallelogram, style=filled, fillcolor="#fef7e0", color="#e37400"',
    "function": 'shape=component, style=filled, fillcolor="#e6f4ea", color="#188038"',
    "tools": 'shape=cylinder, style=filled, fillcolor="#f1f3f4", color="#5f6368"',
    "join": 'shape=circle, style=filled, fillcolor="#3c4043", color="#202124", fontcolor="#ffffff", fontsize=9, width=0.5, fixedsize=true',
    "start": 'shape=oval, style=filled, fillcolor="#ffffff", color="#5f6368"',
    "end": 'shape=oval, style=filled, fillcolor="#ffffff", color="#5f6368"',
}

_EDGE_STYLE = {
    "flow": "",
    "parallel": "",
    "start": "",
    "end": "",
    "join": "",
    "otherwise": 'style=dashed, color="#80868b"',
    "loop": 'style=dashed, color="#3367d6", fontcolor="#3367d6", constraint=false',
    "critic": 'style=dashed, color="#c5221f", fontcolor="#c5221f", constraint=false',
    "handoff": 'penwidth=2.2, color="#7627bb", fontcolor="#7627bb"',
    "delegate": 'style=dotted, dir=both, color="#188038", fontcolor="#188038"',
    "tools": 'dir=both, color="#5f6368"',
}


def dot_text(text: str) -> str:
    """``text`` as a quoted DOT string: backslashes and quotes escaped, newlines as ``\\n``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{escaped}"'


def _node(node: ViewNode, pad: str) -> str:
    style = _NODE_STYLE.get(node.kind, _NODE_STYLE["agent"])
    classes = node.kind + (" root" if node.root else "")
    extra = ", penwidth=3" if node.root else ""
    return (
        f"{pad}{dot_text(node.id)} [id={dot_text(node.id)}, class={dot_text(classes)}, "
        f"label={dot_text(node.label)}, {style}{extra}];"
    )


def _edge(view: View, edge: ViewEdge, index: int) -> str:
    clusters = {c.id: c for c in view.clusters}
    attrs = [f'id="e{index}"']
    source, target = edge.source, edge.target
    if source in clusters:
        attrs.append(f"ltail={dot_text('cluster_' + source)}")
        source = clusters[source].exit
    if target in clusters:
        attrs.append(f"lhead={dot_text('cluster_' + target)}")
        target = clusters[target].entry
    if edge.label:
        attrs.append(f"label={dot_text(edge.label)}")
    attrs.append(f"class={dot_text(edge.kind)}")
    style = _EDGE_STYLE.get(edge.kind, "")
    if style:
        attrs.append(style)
    return f"    {dot_text(source)} -> {dot_text(target)} [{', '.join(attrs)}];"


def _body(view: View, cluster: str | None, depth: int) -> list[str]:
    pad = "    " * depth
    lines = [_node(n, pad) for n in view.nodes if n.cluster == cluster]
    for c in view.clusters:
        if c.cluster == cluster:
            lines.append(f"{pad}subgraph {dot_text('cluster_' + c.id)} {{")
            lines.append(
                f'{pad}    id={dot_text(c.id)}; class="swarm"; label={dot_text(c.label)}; '
                'style="dashed,rounded,filled"; fillcolor="#f8f9fa"; color="#80868b";'
            )
            lines += _body(view, c.id, depth + 1)
            lines.append(f"{pad}}}")
    return lines


def to_dot(swarm: Any, *, tools: bool = False, rankdir: str = "TB") -> str:
    """The topology of ``swarm`` (a ``Swarm`` or an ``Agent``) as Graphviz DOT text.

    ``tools=True`` also draws tool-execution nodes. Deterministic: sorted nodes and edges,
    ids derived from node names (the same ids as :func:`~aworld_graph.viz.to_mermaid`).
    """
    if rankdir not in ("TB", "LR", "BT", "RL"):
        raise ValueError(f"rankdir must be one of TB, LR, BT, RL; got {rankdir!r}")
    view = view_of(swarm, tools=tools)
    lines = [
        f"digraph {dot_text(view.name)} {{",
        f"    graph [label={dot_text(f'{view.name} ({view.build_type})')}, labelloc=t, "
        f'rankdir={rankdir}, compound=true, fontname="Helvetica", fontsize=14, nodesep=0.4, ranksep=0.5];',
        '    node [fontname="Helvetica", fontsize=11, margin="0.15,0.06"];',
        '    edge [fontname="Helvetica", fontsize=9, color="#5f6368"];',
        *_body(view, None, 1),
        *(_edge(view, e, i) for i, e in enumerate(view.edges)),
        "}",
    ]
    return "\n".join(lines) + "\n"


def render_dot(dot: str, fmt: str = "svg", *, timeout: float = 60.0) -> bytes:
    """Render DOT text with the local Graphviz ``dot`` binary; never calls a web service."""
    if fmt not in ("svg", "png"):
        raise ValueError(f"format must be 'svg' or 'png', got {fmt!r}")
    binary = shutil.which("dot")
    if binary is None:
        raise ConfigError(
            "Graphviz's `dot` program is not installed, so the topology cannot be rendered to "
            f"{fmt.upper()}; install it (Debian/Ubuntu: `apt-get install graphviz`, macOS: "
            "`brew install graphviz`) or use the mermaid/dot text formats"
        )
    try:
        done = subprocess.run(
            [binary, f"-T{fmt}"],
            input=dot.encode(),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeFailure(f"Graphviz `dot` took longer than {timeout:.0f}s to render") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise RuntimeFailure(f"Graphviz `dot` failed (exit {done.returncode}): {message}")
    return done.stdout


def render(swarm: Any, fmt: str = "svg", *, tools: bool = False, rankdir: str = "TB") -> bytes:
    """The topology of ``swarm`` rendered as SVG or PNG bytes by the local ``dot`` binary.

    Raises :class:`~aworld_graph.errors.ConfigError` saying how to install Graphviz when
    ``dot`` is missing.
    """
    return render_dot(to_dot(swarm, tools=tools, rankdir=rankdir), fmt)
