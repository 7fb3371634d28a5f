"""See a swarm: its topology as Mermaid or DOT text, as an SVG/PNG picture, and as an HTML page
with a run's path overlaid.

The text forms are pure functions of the swarm; rendering pictures needs Graphviz's ``dot``
program locally and never calls a web service.

>>> print(to_mermaid(swarm))                      # doctest: +SKIP
>>> Path("swarm.svg").write_bytes(render(swarm))  # doctest: +SKIP
>>> Path("run.html").write_text(to_html(swarm, response))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from ._run import load_run, run_path
from ._view import as_swarm, view_of
from .dot import render, to_dot
from .html import _svg, to_html
from .mermaid import to_mermaid

__all__ = [
    "load_run",
    "render",
    "run_path",
    "to_dot",
    "to_html",
    "to_mermaid",
    "to_networkx",
    "to_svg",
    "view_of",
]


def to_networkx(swarm: Any) -> nx.DiGraph[str]:
    """The topology as a ``networkx.DiGraph`` (see :meth:`aworld_graph.swarm.Swarm.to_networkx`);
    a lone ``Agent`` becomes a one-node graph."""
    return as_swarm(swarm).to_networkx()


def to_svg(swarm: Any, *, tools: bool = False, use_dot: bool | None = None) -> str:
    """The topology as SVG text, the drawing of :func:`to_html`'s page: Graphviz's when
    ``use_dot`` (default: when ``dot`` is installed), else a layered layout made here."""
    return _svg(view_of(swarm, tools=tools), swarm, tools, use_dot)
