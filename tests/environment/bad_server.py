"""A misbehaving MCP server for tests, run as ``python tests/environment/bad_server.py``.

Well-behaved tools (``echo``, ``pid``, ``big``, ``picture``, ``record``, ``fail``) sit next to
ones that crash the process mid-call, hang, or write garbage (non-JSON lines, bytes that are
not UTF-8) onto the protocol stream.
``--crash-at-start`` exits before the handshake; ``--silent-start`` never answers it.
"""

from __future__ import annotations

import base64
import os
import sys
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

server: MCPServer = MCPServer(name="bad-server", log_level="ERROR")
WIRE = os.dup(1)
"""The protocol pipe; the SDK diverts fd 1 to stderr while serving, so garbage goes here."""


class Record(BaseModel):
    name: str
    count: int


@server.tool(structured_output=False)
def echo(text: str, times: int = 1) -> str:
    """Echo the text, ``times`` times."""
    return text * times


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool(structured_output=False)
def big(size: int) -> str:
    """A text of ``size`` characters."""
    return "x" * size


@server.tool()
def record(name: str) -> Record:
    """Structured output only."""
    return Record(name=name, count=3)


@server.tool(structured_output=False)
def picture(big_kib: int = 0) -> list[object]:
    """An image (a 1x1 PNG) and a caption."""
    from mcp.server.mcpserver.utilities.types import Image

    if big_kib:  # an "image" of zero bytes, larger than the trajectory keeps
        return [Image(data=bytes(big_kib * 1024), format="png")]
    return ["a tiny picture", Image(data=PNG_1PX, format="png")]


@server.tool(structured_output=False)
def fail(reason: str = "it went wrong") -> str:
    """Always reports an error (isError)."""
    raise ToolError(reason)


@server.tool(structured_output=False)
def crash(leak: bool = False) -> str:
    """Exits the process in the middle of the call (optionally printing API_TOKEN to stderr)."""
    if leak:
        print(
            f"fatal: token {os.environ.get('API_TOKEN', '')} rejected", file=sys.stderr, flush=True
        )
    os._exit(3)


@server.tool(structured_output=False)
async def hang() -> str:
    """Never answers."""
    await anyio.sleep(3600)
    return "unreachable"


@server.tool(structured_output=False)
def garbage(ctx: Context) -> str:
    """Writes a non-JSON line, then a malformed response for this request, onto stdout."""
    request_id = ctx.request_id
    os.write(WIRE, b"this is not json at all\n")
    wire_id = request_id if str(request_id).lstrip("-").isdigit() else f'"{request_id}"'
    os.write(
        WIRE,
        f'{{"jsonrpc": "2.0", "id": {wire_id}, "result": {{"content": "not a list"}}}}\n'.encode(),
    )
    return "the real answer, too late"


@server.tool(structured_output=False)
def latin1(ctx: Context, where: str = "result") -> str:
    """Answers with bytes that are not UTF-8: inside this call's result (``where="result"``)
    or on a line of their own (``where="line"``)."""
    request_id = ctx.request_id
    wire_id = request_id if str(request_id).lstrip("-").isdigit() else f'"{request_id}"'
    if where == "line":
        os.write(WIRE, b"\xff\xfe garbage \xc3\x28\n")
    else:
        os.write(
            WIRE,
            b'{"jsonrpc": "2.0", "id": ' + str(wire_id).encode() + b', "result": {"content": '
            b'[{"type": "text", "text": "caf\xe9 \xff"}]}}\n',
        )
    return "the real answer, too late"


@server.tool(structured_output=False)
def noisy(text: str) -> str:
    """Writes a line that is not JSON onto stdout, then answers normally."""
    os.write(WIRE, b"DEBUG: this line is not JSON-RPC\n")
    return text


if __name__ == "__main__":
    if "--crash-at-start" in sys.argv:
        print(
            f"bad-server: cannot start, token {os.environ.get('API_TOKEN', '')} invalid",
            file=sys.stderr,
        )
        sys.exit(2)
    if "--silent-start" in sys.argv:
        time.sleep(3600)
    server.run("stdio")
