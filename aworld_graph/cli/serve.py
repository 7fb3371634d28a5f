"""``aworld-graph serve``: the LangGraph Platform API and the live run page over the store.

It serves aworld-graph workflows (``.yaml`` files, or an ``Agent`` or ``Swarm`` by
``MODULE:ATTR``) and any LangGraph application: a compiled graph, a ``StateGraph`` or a graph
factory, by ``MODULE:ATTR`` or ``./path/file.py:ATTR``, or every graph of a project's
``langgraph.json`` (``--config``, or the one in the current folder), read as ``langgraph
dev`` reads it: its ``graphs``, ``env`` and ``dependencies``.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigError
from ..secrets import scrub_text
from ._app import db_option, main

__all__ = ["load_served", "serve"]


def _load(target: str) -> Any:
    """What a command-line target serves: a workflow file's swarm, an ``Agent`` or
    ``Swarm``, or a LangGraph application named after its attribute (or the name it was
    compiled with)."""
    from ..server import load_graph, source_of
    from .run import load_target

    if target.endswith((".yaml", ".yml")):
        return load_target(target)
    obj = load_graph(target, where=target)
    name = target.rpartition(":")[2]
    own = getattr(obj, "name", None)
    if isinstance(own, str) and own and own != "LangGraph" and not callable(obj):
        name = own  # a graph compiled with a name of its own (name="…") keeps it
    return source_of(obj, name=name, where=target)


def load_served(targets: tuple[str, ...], config: str | None) -> tuple[list[Any], list[str], str]:
    """The assistants to serve: each target's, and each graph of ``config`` (a
    ``langgraph.json``; with no target and no config, the one here, else
    ``workflows/*.yaml``); the lines of targets that could not be loaded; and what was
    read (for the banner). A problem with the project file is a ConfigError."""
    from ..server import CONFIG_FILE, Assistant, read_project

    if config is None and not targets and Path(CONFIG_FILE).is_file():
        config = CONFIG_FILE
    found: list[Any] = []
    problems: list[str] = []
    label = ""
    if config is not None:
        project = read_project(config)
        project.apply()
        for graph_id, spec, source in project.sources():
            description = project.descriptions.get(graph_id)
            found.append(
                Assistant.of(source, target=spec, assistant_id=graph_id, description=description)
            )
        label = f" from {project.path}"
        if project.env:
            label += f" (env: {len(project.env)} variables set)"
    elif not targets:
        targets = tuple(str(p) for p in sorted(Path("workflows").glob("*.yaml")))
        if not targets:
            raise ConfigError(
                f"nothing to serve here: no {CONFIG_FILE} and no workflows/*.yaml; name "
                "workflow files, MODULE:ATTR or ./file.py:ATTR, or --config langgraph.json"
            )
    for target in targets:
        try:
            found.append(Assistant.of(_load(target), target=target))
        except Exception as exc:  # one broken workflow does not stop the others
            text = str(exc)
            problems.append(text if text.startswith(target) else f"{target}: {text}")
    return found, problems, label


class _WithTraceback(logging.Handler):
    """The server's errors on stderr as ``error: …`` with their traceback (secrets replaced):
    a 500 tells its client to see the log, so the log has it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"{record.levelname.lower()}: {record.getMessage()}\n"
            if record.exc_info:
                text += "".join(traceback.format_exception(*record.exc_info))
            sys.stderr.write(scrub_text(text))
        except Exception:  # logging must never break the server
            self.handleError(record)


@main.command("serve")
@click.argument("targets", nargs=-1)
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False),
    default=None,
    help="Serve the graphs of this langgraph.json (its graphs, env and dependencies, as "
    "langgraph dev reads them). Default, with no TARGETS: ./langgraph.json if there is one.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=2024, show_default=True, help="Port to bind.")
@db_option()
@click.option(
    "--insecure",
    is_flag=True,
    help="Allow a non-loopback --host without AWORLD_GRAPH_API_KEY (anyone who reaches it can run workflows).",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    help="Allow browser requests from this origin (repeatable); CORS is off by default.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="Also answer requests for this Host name (repeatable; '*': any). Loopback names "
    "are always answered; others are refused, so a page cannot rebind its DNS name to here.",
)
@click.option(
    "--header-timeout",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds a connection may take to start a request (send its headers); a request's "
    "body then has 30 seconds.",
)
@click.option(
    "--max-body",
    type=int,
    default=1 << 20,
    show_default=True,
    help="Largest request body accepted, in bytes.",
)
@click.option(
    "--mcp-stdio",
    is_flag=True,
    help="Serve the workflows as MCP tools over stdin/stdout (for desktop MCP clients) "
    "instead of HTTP.",
)
def serve(
    targets: tuple[str, ...],
    config: str | None,
    host: str,
    port: int,
    db: str | None,
    insecure: bool,
    cors_origins: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    header_timeout: float,
    max_body: int,
    mcp_stdio: bool,
) -> None:
    """Serve TARGETS over HTTP: workflow .yaml files, MODULE:ATTR or ./file.py:ATTR (an
    aworld-graph Agent or Swarm, or any LangGraph graph: compiled, a StateGraph, or a
    function returning one), and the graphs of --config langgraph.json (default, with no
    TARGETS: ./langgraph.json, else workflows/*.yaml). Served over the API that langgraph-sdk and RemoteGraph speak, MCP tools at /mcp, and a run
    page at /; with --mcp-stdio, the MCP tools over stdin/stdout instead.

    With AWORLD_GRAPH_API_KEY set, every route but /ok and /health needs the key (header
    x-api-key; the page: open /?key=KEY)."""
    try:
        import uvicorn

        from ..server import (
            API_KEY_ENV,
            Assistants,
            check_bind,
            create_app,
            host_names,
            http_protocol,
            serve_mcp_stdio,
        )
    except ImportError as exc:
        raise ConfigError(
            f"aworld-graph serve needs the 'serve' extra ({exc.name} is missing): "
            "pip install 'aworld-graph[serve]'"
        ) from None
    api_key = os.environ.get(API_KEY_ENV) or None
    check_bind(host, api_key, insecure=insecure)
    hosts = host_names(host, allowed_hosts)
    found, problems, label = load_served(targets, config)
    for line in problems:
        click.echo(f"not served: {line}", err=True)
    if not found:
        raise ConfigError("none of the workflows could be loaded (see above)")
    try:
        assistants = Assistants(found)
    except ValueError as exc:  # two targets under one name
        raise ConfigError(f"{exc}; serve one of them, or rename it") from None
    app = create_app(
        assistants,
        store=db,
        api_key=api_key,
        cors_origins=list(cors_origins),
        allowed_hosts=hosts,
        max_body=max_body,
    )
    if mcp_stdio:  # stdout carries the protocol: nothing else may be written to it
        import anyio

        anyio.run(serve_mcp_stdio, app)
        return
    names = ", ".join(a.assistant_id for a in assistants)
    store = app.state.server.saver.label
    click.echo(f"serving {names}{label} on http://{host}:{port} (store: {store})")
    errors = logging.getLogger("aworld_graph.server")
    handler = _WithTraceback(logging.ERROR)
    errors.addHandler(handler)
    errors.propagate = False  # not also as the CLI's one line
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            access_log=False,
            log_level="warning",
            http=http_protocol(header_timeout),
        )
    finally:
        errors.removeHandler(handler)
        errors.propagate = True
