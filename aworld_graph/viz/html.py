"""A self-contained HTML page: the topology, node cards, and a run's path to step through.

One file with everything inline (SVG, data, style, script) and a Content-Security-Policy
that forbids any network access, so it opens anywhere offline. The drawing is Graphviz's SVG
when ``dot`` is installed, else a layered layout computed here (:mod:`._layout`).
"""

from __future__ import annotations

import json
import re
import shutil
from html import escape
from importlib import resources
from typing import Any

from ._layout import layout_svg
from ._run import run_path
from ._view import View, view_of
from .dot import render_dot, to_dot

__all__ = ["page_data", "to_html"]


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [_json_safe(v) for v in items]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def page_data(view: View, response: Any = None) -> dict[str, Any]:
    """What the page script reads: nodes (with cards), clusters, edges and the run's path."""
    nodes = [
        {
            "id": n.id,
            "name": n.name,
            "kind": n.kind,
            "label": n.label,
            "root": n.root,
            "cluster": n.cluster,
            "card": n.card,
        }
        for n in view.nodes
    ] + [
        {
            "id": c.id,
            "name": c.name,
            "kind": "swarm",
            "label": c.label,
            "root": False,
            "cluster": c.cluster,
            "card": c.card,
        }
        for c in view.clusters
    ]
    edges = [
        {"id": f"e{i}", "source": e.source, "target": e.target, "kind": e.kind, "label": e.label}
        for i, e in enumerate(view.edges)
    ]
    data: dict[str, Any] = _json_safe(  # a dict comes back as a dict
        {
            "name": view.name,
            "build_type": view.build_type,
            "info": view.info,
            "nodes": nodes,
            "edges": edges,
            "run": run_path(response, view) if response is not None else None,
        }
    )
    return data


def _svg(view: View, swarm: Any, tools: bool, use_dot: bool | None) -> str:
    if use_dot is None:
        use_dot = shutil.which("dot") is not None
    if use_dot:
        text = render_dot(to_dot(swarm, tools=tools), "svg").decode()
        return text[text.index("<svg") :]
    return layout_svg(view)


def _script_json(data: Any) -> str:
    """JSON for a ``<script type="application/json">`` element: no ``</`` or ``<!--`` can
    end or confuse the element, since every ``<``, ``>`` and ``&`` is a JSON escape."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def to_html(
    swarm: Any, response: Any = None, *, tools: bool = False, use_dot: bool | None = None
) -> str:
    """One self-contained HTML page showing ``swarm`` (a ``Swarm`` or ``Agent``).

    With ``response`` (a ``TaskResponse``), the run's path is overlaid in order: the visited
    nodes are highlighted and numbered (badges placed clear of edge labels), the edges of its
    route (see :mod:`._run`) are highlighted, and a control steps through the steps with their
    timings, token usage, tool calls and results, rewards and errors. ``use_dot`` chooses
    Graphviz's layout (default: when ``dot`` is installed) over the built-in one.
    """
    view = view_of(swarm, tools=tools)
    template = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
    values = {
        "TITLE": escape(f"{view.name} ({view.build_type}) - aworld-graph"),
        "SVG": _svg(view, swarm, tools, use_dot),
        "DATA": _script_json(page_data(view, response)),
    }
    return re.sub(r"@@(TITLE|SVG|DATA)@@", lambda m: values[m.group(1)], template)
