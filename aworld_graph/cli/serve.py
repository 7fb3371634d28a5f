"""``aworld-graph serve``: the LangGraph Platform API and the live run page over the store."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path

import click

from ..errors import ConfigError
from ..secrets import scrub_text
from ._app import db_option, main

__all__ = ["serve"]


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
    """Serve TARGETS (workflow .yaml files or MODULE:ATTR; default: workflows/*.yaml) over
    HTTP: the API that langgraph-sdk and RemoteGraph speak, MCP tools at /mcp, and a run
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
    from .run import load_target

    api_key = os.environ.get(API_KEY_ENV) or None
    check_bind(host, api_key, insecure=insecure)
    hosts = host_names(host, allowed_hosts)
    if not targets:
        targets = tuple(str(p) for p in sorted(Path("workflows").glob("*.yaml")))
        if not targets:
            raise ConfigError("no workflows/*.yaml here; name workflow files or MODULE:ATTR")
    assistants, problems = Assistants.load(targets, load_target)
    for line in problems:
        click.echo(f"not served: {line}", err=True)
    if not list(assistants):
        raise ConfigError("none of the workflows could be loaded (see above)")
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
    click.echo(f"serving {names} on http://{host}:{port} (store: {app.state.server.saver.label})")
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
