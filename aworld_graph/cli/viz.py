"""``aworld-graph viz``: draw a swarm's topology, or a stored run's path through it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from ._app import db_option, main
from .run import load_target

__all__ = ["viz"]

_FORMATS = ("mermaid", "dot", "svg", "png", "html")
_SUFFIXES = {
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".dot": "dot",
    ".gv": "dot",
    ".svg": "svg",
    ".png": "png",
    ".html": "html",
    ".htm": "html",
}


def _stored_run(source: Any, thread: str, db: str | None) -> Any:
    from ..checkpoint import open_store
    from ..viz import load_run

    with open_store(db, create=False) as saver:
        return asyncio.run(load_run(source, thread, saver))


@main.command("viz")
@click.argument("target")
@click.option(
    "--format",
    "-f",
    "fmt",
    type=click.Choice(_FORMATS),
    default=None,
    help="Output format [default: from -o's suffix, else html with --run, else mermaid].",
)
@click.option(
    "--run", "thread", default=None, help="Overlay this stored run (thread id); HTML only."
)
@db_option("Checkpoint database for --run (default: $AWORLD_GRAPH_DB or checkpoints/aworld.db).")
@click.option(
    "--tools", is_flag=True, help="Also draw each tool-using agent's tool-execution node."
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write here instead of stdout.",
)
def viz(
    target: str,
    fmt: str | None,
    thread: str | None,
    db: str | None,
    tools: bool,
    output: str | None,
) -> None:
    """Draw TARGET (MODULE:ATTRIBUTE of an Agent or Swarm, or a workflow .yaml).

    Mermaid and DOT are text; SVG and PNG are rendered locally by Graphviz's `dot`; HTML is one
    self-contained page (no network needed) with node cards and, with --run, the run's path
    to step through.
    """
    from .. import viz as views
    from ..run import SingleAgent

    fmt = fmt or (_SUFFIXES.get(Path(output).suffix.lower()) if output else None)
    fmt = fmt or ("html" if thread else "mermaid")
    if thread and fmt != "html":
        raise click.UsageError("--run shows a run's path, which only --format html draws")
    source = load_target(target)
    drawn = source.agent if isinstance(source, SingleAgent) else source
    data: str | bytes
    if fmt == "mermaid":
        data = views.to_mermaid(drawn, tools=tools)
    elif fmt == "dot":
        data = views.to_dot(drawn, tools=tools)
    elif fmt in ("svg", "png"):
        data = views.render(drawn, fmt, tools=tools)
    else:
        response = _stored_run(source, thread, db) if thread else None
        data = views.to_html(drawn, response, tools=tools)
    if output:
        Path(output).write_bytes(data if isinstance(data, bytes) else data.encode())
        click.echo(f"wrote {output} ({fmt})", err=True)
    elif isinstance(data, bytes) and fmt == "png":
        if sys.stdout.isatty():
            raise click.UsageError("PNG is binary; pass -o FILE or redirect stdout")
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        click.echo(data.decode() if isinstance(data, bytes) else data, nl=False)
