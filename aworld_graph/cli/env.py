"""``aworld-graph env serve`` / ``env tools``: the bundled environment server, and a config check."""

from __future__ import annotations

import asyncio

import click

from ._app import main

__all__ = ["env"]


@main.group("env")
def env() -> None:
    """The local MCP environment: serve it, or list the tools of an mcpServers config."""


@env.command("serve")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "streamable-http", "sse"]),
    default="stdio",
    show_default=True,
    help="stdio for a client that starts this process; streamable-http (or legacy sse) to listen on a port.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (HTTP).")
@click.option(
    "--port", type=int, default=8765, show_default=True, help="Port (HTTP); 0 picks a free one."
)
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False),
    default=".",
    show_default=True,
    help="Directory the file tools may see; nothing outside it is reachable.",
)
def serve(transport: str, host: str, port: int, root: str) -> None:
    """Serve the bundled environment (calculator, files under ROOT, notebook) over MCP.

    Over HTTP it prints `serving TRANSPORT on URL` to stderr once listening (--port 0: any free port).
    """
    from ..environment.server import Transport
    from ..environment.server import serve as run_server

    kinds: dict[str, Transport] = {
        "stdio": "stdio",
        "streamable-http": "streamable-http",
        "sse": "sse",
    }
    try:
        run_server(kinds[transport], root=root, host=host, port=port)
    except KeyboardInterrupt:
        pass


@env.command("tools")
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--server", "servers", multiple=True, help="Only this server (repeatable); default all."
)
def tools(config: str, servers: tuple[str, ...]) -> None:
    """List the tools each server of an mcpServers CONFIG file (JSON or YAML) offers."""
    from ..environment import Sandbox

    async def listing() -> list[tuple[str, str]]:
        async with Sandbox(mcp_config=config, mcp_servers=list(servers) or None) as sandbox:
            specs = await sandbox.tool_specs()
        return [(spec.name, (spec.description.strip().splitlines() or [""])[0]) for spec in specs]

    rows = asyncio.run(listing())
    width = max((len(name) for name, _ in rows), default=0)
    for name, description in rows:
        click.echo(f"{name.ljust(width)}  {description}".rstrip())
    if not rows:
        click.echo("no tools")
