"""One MCP server connection, opened lazily and owned by a dedicated task.

The MCP SDK's transports are anyio context managers: their cancel scopes and task groups must be
entered and exited by the same task. Callers of a sandbox live in many tasks (graph nodes,
parallel branches), so each connection gets an *owner task* that enters the transport and the
``ClientSession``, signals that it is ready, and waits until it is told to stop or the server's
stream ends. Callers only send requests on the session, which is safe from any task.

When the server drops (its stream ends, or a call reports the connection closed), the owner
exits, which reaps a stdio server process; the next call opens a fresh connection – once per
call. If the event loop changes (a new ``asyncio.run``), the old connection died with its loop
and a new one is opened in the new loop.

A stdio server that writes bytes that are not UTF-8 is treated like one that crashed: the
bytes are kept for the tool message, the line they were on is dropped and the connection is
closed (the process stopped), so the call in flight fails at once and the next call starts the
server again. A line that is not JSON-RPC at all is logged as one warning line (the SDK would
log a whole traceback) and skipped.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import IO, Any

import anyio
import httpx2
import mcp_types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from ..errors import RuntimeFailure
from .config import HttpServerConfig, StdioServerConfig, safe_url

__all__ = ["ServerConnection", "ServerUnavailable"]

logger = logging.getLogger(__name__)
CLIENT_INFO = mcp_types.Implementation(name="aworld-graph", version="0.1.0")
CLOSE_TIMEOUT = 10.0
"""Seconds a connection may take to shut down before its owner task is cancelled outright."""

_DECODE_ERRORS = "aworld_graph.mcp_stdout"
"""The codec error handler of stdio servers' stdout: reports bad bytes to the connection."""
_BAD_BYTES: ContextVar[Callable[[bytes], None] | None] = ContextVar(
    "aworld_graph_mcp_bad_bytes", default=None
)
"""Set in a connection's owner task; the transport's reader task (started there) inherits it."""


def _on_decode_error(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    sink = _BAD_BYTES.get()
    if sink is not None:
        sink(bytes(exc.object[exc.start : exc.end]))
    return "\x00", exc.end  # a NUL makes the line invalid JSON: it is never taken as a reply


codecs.register_error(_DECODE_ERRORS, _on_decode_error)


class _OneLineParseWarning(logging.Filter):
    """The SDK logs every stdout line that is not JSON-RPC with a traceback; keep one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and str(record.msg).startswith("Failed to parse JSONRPC message"):
            exc = record.exc_info[1]
            shown = getattr(exc, "errors", None)
            detail = ""
            if callable(shown):
                with suppress(Exception):
                    first = shown(include_url=False)[0]
                    line = str(first.get("input", ""))
                    if "\x00" in line:  # bytes that were not UTF-8: reported by the connection
                        return False
                    detail = f": {line[:120]!r}"
            record.msg = "an MCP server wrote a line to stdout that is not JSON-RPC%s; skipped"
            record.args = (detail,)
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


logging.getLogger("mcp.client.stdio").addFilter(_OneLineParseWarning())


class ServerUnavailable(RuntimeFailure):
    """An MCP server could not be started or reached; the message names it and the fix."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(message)
        self.server = server
        """Name of the server in ``mcpServers``."""


@dataclass(eq=False)
class _Live:
    """One attempt at a connection, from start to the owner task's end."""

    loop: asyncio.AbstractEventLoop
    ready: asyncio.Future[ClientSession]
    wake: anyio.Event = field(default_factory=anyio.Event)
    """Set to make the owner stop; also set when the server's stream ends."""
    done: anyio.Event = field(default_factory=anyio.Event)
    """Set when the owner has left every context (process reaped, HTTP session closed)."""
    task: asyncio.Task[None] | None = None
    stderr: IO[str] | None = None
    """Where a stdio server's stderr goes, kept to explain failures."""
    stderr_tail: str = ""
    """The last lines of that stderr, saved when the connection ends."""
    bad_bytes: bytes | None = None
    """The first bytes a stdio server wrote to stdout that were not UTF-8, if any."""


class _WatchedReadStream:
    """The transport's read stream, calling ``on_end`` when the server's side of it ends."""

    def __init__(self, inner: Any, on_end: Any) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class ServerConnection:
    """The connection to one configured server; :meth:`session` opens it on first use."""

    def __init__(
        self,
        config: StdioServerConfig | HttpServerConfig,
        *,
        connect_timeout: float,
        secrets: set[str],
    ) -> None:
        self.config = config
        """The server's configuration."""
        self.connect_timeout = connect_timeout
        """Seconds to start the server and finish the MCP handshake."""
        self._secrets = secrets
        self._live: _Live | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self.connects = 0
        """How many connections were opened so far (reconnects included)."""

    @property
    def name(self) -> str:
        return self.config.name

    def _lock_in(self, loop: asyncio.AbstractEventLoop) -> asyncio.Lock:
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    def connected(self) -> bool:
        """Whether a live connection exists in the running loop (no I/O)."""
        live = self._live
        return (
            live is not None
            and live.loop is asyncio.get_running_loop()
            and live.ready.done()
            and not live.ready.cancelled()
            and live.ready.exception() is None
            and not live.wake.is_set()
        )

    async def session(self) -> ClientSession:
        """The live session, connecting (or reconnecting once, after a drop) first if needed.

        Raises :class:`ServerUnavailable` when the server cannot be started or reached.
        """
        if self.connected():
            assert self._live is not None
            return self._live.ready.result()
        loop = asyncio.get_running_loop()
        async with self._lock_in(loop):
            if self.connected():
                assert self._live is not None
                return self._live.ready.result()
            old = self._live
            if old is not None and old.loop is loop:
                await self._finish(old)
            live = self._live = _Live(loop=loop, ready=loop.create_future())
            live.task = loop.create_task(self._own(live), name=f"mcp-server:{self.name}")
            self.connects += 1
            # A failed start is reported at once; its cleanup finishes in the owner task
            # (awaited by the next call or by aclose).
            return await asyncio.shield(live.ready)

    def mark_dropped(self) -> None:
        """The connection failed under a call: make the next call reconnect."""
        if self._live is not None:
            logger.debug("MCP server %r dropped; the next call reconnects", self.name)
            self._live.wake.set()

    async def aclose(self) -> None:
        """Close the connection (stops a stdio server process); safe to call more than once."""
        live, self._live = self._live, None
        if live is None or live.loop is not asyncio.get_running_loop():
            return  # never opened, or its loop – and with it the connection – is gone
        live.wake.set()
        await self._finish(live)

    async def _finish(self, live: _Live) -> None:
        """Wait (shielded, bounded) until ``live``'s owner has cleaned up."""
        live.wake.set()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(CLOSE_TIMEOUT):
                await live.done.wait()
            if not live.done.is_set() and live.task is not None:
                live.task.cancel()
                with anyio.move_on_after(CLOSE_TIMEOUT):
                    await live.done.wait()

    async def _own(self, live: _Live) -> None:
        """The owner task: enter transport and session, then wait until told to stop."""
        _BAD_BYTES.set(lambda data: self._bad_bytes(live, data))
        try:
            async with AsyncExitStack() as stack:
                read, write = await self._open_transport(stack, live)
                session = await stack.enter_async_context(
                    ClientSession(
                        _WatchedReadStream(read, live.wake.set), write, client_info=CLIENT_INFO
                    )
                )
                try:
                    with anyio.fail_after(self.connect_timeout):
                        await session.initialize()
                except Exception as exc:  # report now; stopping the process may take a while
                    self._fail(live, exc)
                    raise
                if not live.ready.done():
                    live.ready.set_result(session)
                logger.debug("MCP server %r connected (%s)", self.name, self.describe())
                await live.wake.wait()
                logger.debug("MCP server %r: closing its connection", self.name)
        except BaseException as exc:  # reported to the caller; the owner task itself ends quietly
            self._fail(live, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            live.wake.set()
            self._close_stderr(live)
            live.done.set()

    def _bad_bytes(self, live: _Live, data: bytes) -> None:
        if live.bad_bytes is None:
            live.bad_bytes = data[:32]
            logger.warning(
                "MCP server %r wrote bytes that are not UTF-8 to stdout (%r); restarting it",
                self.name,
                live.bad_bytes,
            )
        live.wake.set()

    def bad_output(self) -> bytes | None:
        """Bytes that were not UTF-8 on the current (or just ended) stdio connection's stdout."""
        return self._live.bad_bytes if self._live is not None else None

    def _fail(self, live: _Live, exc: BaseException) -> None:
        if not live.ready.done():
            live.ready.set_exception(ServerUnavailable(self.name, self._explain_connect(exc, live)))

    async def _open_transport(self, stack: AsyncExitStack, live: _Live) -> tuple[Any, Any]:
        config = self.config
        if isinstance(config, StdioServerConfig):
            params = StdioServerParameters(
                command=config.command, args=config.args, env=config.env or None, cwd=config.cwd
            ).model_copy(update={"encoding_error_handler": _DECODE_ERRORS})
            live.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            return await stack.enter_async_context(stdio_client(params, errlog=live.stderr))
        timeout = config.timeout or 30.0
        read_timeout = config.sse_read_timeout or 300.0
        if config.type == "sse":
            return await stack.enter_async_context(
                sse_client(
                    config.url,
                    headers=config.headers,
                    timeout=timeout,
                    sse_read_timeout=read_timeout,
                )
            )
        client = create_mcp_http_client(
            headers=config.headers, timeout=httpx2.Timeout(timeout, read=read_timeout)
        )
        await stack.enter_async_context(client)
        return await stack.enter_async_context(
            streamable_http_client(config.url, http_client=client)
        )

    def _stderr_tail(self, live: _Live | None, lines: int = 8) -> str:
        handle = live.stderr if live is not None else None
        if handle is None or handle.closed:
            return ""
        with suppress(OSError, ValueError):
            handle.flush()
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 4000))
            tail = handle.read().splitlines()[-lines:]
            return self.redact("\n".join(line.rstrip() for line in tail)).strip()
        return ""

    def _close_stderr(self, live: _Live) -> None:
        if live.stderr is not None:
            live.stderr_tail = self._stderr_tail(live)
            with suppress(OSError):
                live.stderr.close()

    def last_stderr(self) -> str:
        """The last lines the current (or just ended) stdio server process wrote to stderr,
        secrets masked; ``""`` for HTTP servers or before the first connection."""
        live = self._live
        if live is None:
            return ""
        return self._stderr_tail(live) or live.stderr_tail

    def redact(self, text: str) -> str:
        """``text`` with every configured secret replaced by ``***``."""
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def describe(self) -> str:
        """How the server is reached, for messages (no secrets)."""
        config = self.config
        if isinstance(config, StdioServerConfig):
            return f"stdio command {config.command!r}"
        return f"{config.type} endpoint {safe_url(config.url)}"

    def _explain_connect(self, exc: BaseException, live: _Live) -> str:
        leaf = _leaf(exc)
        config = self.config
        where = f"MCP server '{self.name}' ({self.describe()})"
        if isinstance(config, StdioServerConfig) and isinstance(leaf, FileNotFoundError):
            if config.cwd and not os.path.isdir(config.cwd):
                return f"{where}: working directory {config.cwd!r} does not exist; fix mcpServers.{self.name}.cwd"
            if shutil.which(config.command) is None:
                return (
                    f"{where}: command {config.command!r} was not found; install it or fix "
                    f"mcpServers.{self.name}.command (it must be on PATH or an absolute path)"
                )
        if isinstance(leaf, MCPError) and leaf.code == mcp_types.CONNECTION_CLOSED:
            return (
                f"{where} exited or closed its output before the MCP handshake finished; "
                f"check mcpServers.{self.name} (command, args, env) by running it by hand"
                + self._stderr_note(live)
            )
        if isinstance(leaf, TimeoutError):
            return (
                f"{where} did not finish the MCP handshake within {self.connect_timeout:g} s; "
                "check that it is an MCP server and that it starts quickly"
                + self._stderr_note(live)
            )
        if isinstance(leaf, httpx2.HTTPError | OSError):
            return (
                f"{where} cannot be reached ({type(leaf).__name__}: {self.redact(str(leaf))}); "
                f"start the server or fix mcpServers.{self.name}.url"
            )
        return (
            f"{where} failed to start ({type(leaf).__name__}: {self.redact(str(leaf)) or 'no detail'}); "
            f"check mcpServers.{self.name} and that the server runs on its own"
            + self._stderr_note(live)
        )

    def _stderr_note(self, live: _Live) -> str:
        tail = self._stderr_tail(live)
        return f"; its stderr ends with:\n{tail}" if tail else ""


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
