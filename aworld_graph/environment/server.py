"""The bundled local environment: an MCP server with tools that work offline.

Tools:

* ``calculator(expression)`` – safe arithmetic (parsed with :mod:`ast`, never ``eval``).
* ``list_files(path)``, ``read_file(path)``, ``search_files(pattern, path)`` – confined to the
  root directory given at start; ``..``, absolute paths and links that leave it are refused.
* ``note_set(key, value)``, ``note_get(key)``, ``note_list()`` – a small key-value notebook per
  client session (per process over stdio, per session over streamable HTTP and SSE).

Run it with ``aworld-graph env serve`` or, with no installed script,
``python -m aworld_graph.environment.server --root DIR [--transport streamable-http --port N]``.
Over HTTP (``streamable-http``, or the legacy ``sse``) the server prints ``serving TRANSPORT on
URL`` to stderr once its socket listens, so a parent process can wait for that line
(``--port 0`` picks a free port).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ._files import SEARCH_SECONDS, FileAccessError, RootedFiles
from .calculator import CalculatorError, calculate

__all__ = ["SERVER_NAME", "Transport", "build_server", "main", "serve"]

SERVER_NAME = "aworld-graph-env"
"""The name the server reports in its MCP handshake."""

Transport = Literal["stdio", "streamable-http", "sse"]
"""Transports the bundled server speaks."""

MAX_NOTES = 1_000
"""Keys one session's notebook may hold."""
MAX_NOTE_CHARS = 100_000
"""Longest value one note may hold."""

_INSTRUCTIONS = (
    "Local environment: a calculator, read-only access to files under one root directory, "
    "and a key-value notebook that lasts for this session."
)


def _session_key(ctx: Context) -> str:
    """Which notebook a request uses: its streamable-HTTP or SSE session, or the stdio client."""
    headers = ctx.headers or {}
    if headers.get("mcp-session-id"):
        return f"http:{headers['mcp-session-id']}"
    request = ctx.request_context.request
    query = getattr(request, "query_params", None)
    if query is not None and query.get("session_id"):
        return f"sse:{query.get('session_id')}"
    return "stdio"  # one process serves one stdio client


def build_server(
    root: str | os.PathLike[str] = ".", *, search_seconds: float = SEARCH_SECONDS
) -> MCPServer:
    """An :class:`MCPServer` with the environment's tools, file tools confined to ``root``;
    one ``search_files`` call matches for at most ``search_seconds``."""
    files = RootedFiles.at(root, search_seconds=search_seconds)
    notebooks: dict[str, dict[str, str]] = {}
    server: MCPServer = MCPServer(name=SERVER_NAME, instructions=_INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    def calculator(expression: str) -> int | float:
        """Evaluate an arithmetic expression, e.g. "2 * (3 + 4) ** 2" or "sqrt(2) / 3".

        Supports numbers, + - * / // % **, parentheses, unary minus, the constants pi, e, tau
        and the functions abs, round, min, max, sqrt, exp, log, log10, log2, sin, cos, tan,
        asin, acos, atan, floor, ceil, factorial.
        """
        try:
            return calculate(expression)
        except CalculatorError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(structured_output=False)
    def list_files(path: str = ".") -> str:
        """List a directory under the environment root (directories end with '/')."""
        return _files_call(files.list_files, path)

    @server.tool(structured_output=False)
    def read_file(path: str) -> str:
        """Read a text file under the environment root (path relative to the root)."""
        return _files_call(files.read_file, path)

    @server.tool(structured_output=False)
    def search_files(pattern: str, path: str = ".") -> str:
        """Search text files under a directory of the environment root for a regex or plain
        text (case-insensitive); answers 'file:line: text' lines and matching file names."""
        return _files_call(files.search_files, pattern, path)

    @server.tool(structured_output=False)
    def note_set(key: str, value: str, ctx: Context) -> str:
        """Save a note under a key in this session's notebook (replaces an existing note)."""
        notes = notebooks.setdefault(_session_key(ctx), {})
        if len(value) > MAX_NOTE_CHARS:
            raise ToolError(f"value is longer than {MAX_NOTE_CHARS} characters")
        if key not in notes and len(notes) >= MAX_NOTES:
            raise ToolError(f"the notebook is full ({MAX_NOTES} keys)")
        notes[key] = value
        return f"saved note {key!r}"

    @server.tool(structured_output=False)
    def note_get(key: str, ctx: Context) -> str:
        """Read the note saved under a key in this session's notebook."""
        notes = notebooks.get(_session_key(ctx), {})
        if key not in notes:
            known = ", ".join(repr(k) for k in sorted(notes)) or "none yet"
            raise ToolError(f"no note {key!r}; saved keys: {known}")
        return notes[key]

    @server.tool()
    def note_list(ctx: Context) -> list[str]:
        """The keys saved in this session's notebook, sorted."""
        return sorted(notebooks.get(_session_key(ctx), {}))

    return server


def _files_call(method: object, *args: str) -> str:
    assert callable(method)
    try:
        result = method(*args)
    except FileAccessError as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"{exc.strerror or type(exc).__name__}: {args[-1]!r}") from None
    assert isinstance(result, str)
    return result


def serve(
    transport: Transport = "stdio",
    *,
    root: str | os.PathLike[str] = ".",
    host: str = "127.0.0.1",
    port: int = 8765,
) -> None:
    """Run the environment server until it is stopped (stdin closed, or SIGINT/SIGTERM)."""
    server = build_server(root)
    if transport == "stdio":
        server.run("stdio")
    elif transport in ("streamable-http", "sse"):
        anyio.run(_serve_http, server, transport, host, port)
    else:
        raise ValueError(
            f"unknown transport {transport!r}; use 'stdio', 'streamable-http' or 'sse'"
        )


async def _serve_http(server: MCPServer, transport: Transport, host: str, port: int) -> None:
    import uvicorn

    if transport == "sse":
        path, app = "/sse", server.sse_app(host=host)
    else:
        path, app = "/mcp", server.streamable_http_app(host=host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)  # connections queue from here on, so announcing now is safe
    bound_port = sock.getsockname()[1]
    shown_host = f"[{host}]" if family == socket.AF_INET6 else host
    print(
        f"serving {transport} on http://{shown_host}:{bound_port}{path}",
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m aworld_graph.environment.server``: the same options as ``env serve``."""
    parser = argparse.ArgumentParser(
        prog="python -m aworld_graph.environment.server",
        description="Serve the aworld-graph local environment over MCP.",
    )
    parser.add_argument("--transport", choices=["stdio", "streamable-http", "sse"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--root", default=".", help="directory the file tools may see")
    args = parser.parse_args(argv)
    if not Path(args.root).is_dir():
        parser.error(f"--root {args.root!r} is not a directory; pass an existing directory")
    try:
        serve(args.transport, root=args.root, host=args.host, port=args.port)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
