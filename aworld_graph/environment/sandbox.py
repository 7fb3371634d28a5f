"""``Sandbox``: an agent's environment – the MCP servers of an ``mcpServers`` config.

.. code-block:: python

    sandbox = Sandbox(mcp_config={"mcpServers": {"env": {
        "command": "python", "args": ["-m", "aworld_graph.environment.server", "--root", "."]}}})
    tools = await sandbox.mcpservers.list_tools()      # OpenAI tool dicts: "env__calculator", …
    outcome = await sandbox.mcpservers.call_tool("env", "calculator", {"expression": "6 * 7"})

Connections open on first use, stay open for the run, reopen once after a server drops, and
close with ``async with`` (or :meth:`Sandbox.aclose`). Every call answers a
:class:`~aworld_graph.tools.ToolOutcome`: a bad argument, a tool error, a timeout, a dead or
missing server each become ``is_error=True`` with a message that names the server, the tool
and the fix – never an exception. A sandbox is a :class:`~aworld_graph.tools.ToolProvider`:
agents see its tools as ``server__tool``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio
import mcp_types
import pydantic
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from ..errors import ConfigError
from ..tools import ToolOutcome, ToolSpec
from ._connection import ServerConnection, ServerUnavailable
from ._results import ArgumentChecker, error_outcome, result_outcome
from .config import McpConfig, load_mcp_config

__all__ = ["McpServers", "Sandbox"]

DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds one tool call may take when neither the call nor the server's config says."""
DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds to start a server (or reach it) and finish the MCP handshake."""
_MAX_PAGES = 100
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class _ToolEntry:
    tool: mcp_types.Tool
    checker: ArgumentChecker


class McpServers:
    """The servers of one sandbox: list their tools and call them (``sandbox.mcpservers``)."""

    def __init__(
        self,
        config: McpConfig,
        servers: Sequence[str] | None,
        *,
        call_timeout: float,
        connect_timeout: float,
        skip_unavailable: bool,
    ) -> None:
        secrets = config.secrets()
        config.register_secrets()
        self._connections = {
            server.name: ServerConnection(server, connect_timeout=connect_timeout, secrets=secrets)
            for server in config.select(servers)
        }
        self.call_timeout = call_timeout
        """Per-call limit (seconds) for servers whose config gives no ``timeout``."""
        self.connect_timeout = connect_timeout
        """Seconds to start or reach a server and finish the handshake."""
        self.skip_unavailable = skip_unavailable
        """List tools of the servers that work, leaving out those that cannot be reached."""
        self.unavailable: dict[str, str] = {}
        """Why each left-out server could not be used (when ``skip_unavailable``)."""
        self._tools: dict[str, dict[str, _ToolEntry]] = {}
        self._exposed: dict[str, tuple[str, str]] = {}

    @property
    def names(self) -> list[str]:
        """Names of the servers in this sandbox."""
        return list(self._connections)

    def connection(self, server: str) -> ServerConnection:
        """The connection object of ``server`` (for diagnostics: ``connects``, ``last_stderr``)."""
        return self._connections[server]

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool of every server, in the OpenAI ``tools=[...]`` format, named ``server__tool``.

        Raises :class:`~aworld_graph.environment.ServerUnavailable` naming every server that
        cannot be reached (unless ``skip_unavailable``).
        """
        return [spec.openai() for spec in await self.tool_specs()]

    async def tool_specs(self) -> list[ToolSpec]:
        """Every tool of every server as :class:`~aworld_graph.tools.ToolSpec` (``server__tool``)."""
        names = self.names
        listed = await asyncio.gather(
            *(self._server_tools(n) for n in names), return_exceptions=True
        )
        specs: list[ToolSpec] = []
        failures: list[ServerUnavailable] = []
        self._exposed.clear()
        for name, tools in zip(names, listed, strict=True):
            if isinstance(tools, ServerUnavailable):
                failures.append(tools)
                self.unavailable[name] = str(tools)
                continue
            if isinstance(tools, BaseException):
                raise tools
            self.unavailable.pop(name, None)
            for entry in tools.values():
                exposed = self._expose(name, entry.tool.name)
                specs.append(
                    ToolSpec(
                        name=exposed,
                        description=entry.tool.description or entry.tool.title or "",
                        parameters=entry.checker.schema,
                    )
                )
        if failures and not self.skip_unavailable:
            raise ServerUnavailable(
                ", ".join(f.server for f in failures), "\n".join(str(f) for f in failures)
            )
        return specs

    def _expose(self, server: str, tool: str) -> str:
        base = _NAME_CHARS.sub("_", f"{server}__{tool}")[:64]
        exposed, n = base, 1
        while exposed in self._exposed and self._exposed[exposed] != (server, tool):
            n += 1
            exposed = f"{base[: 64 - len(str(n)) - 1]}_{n}"
        self._exposed[exposed] = (server, tool)
        return exposed

    def resolve(self, exposed: str) -> tuple[str, str] | None:
        """``(server, tool)`` for a name offered by :meth:`tool_specs`, if known."""
        return self._exposed.get(exposed)

    async def _server_tools(self, server: str, *, refresh: bool = False) -> dict[str, _ToolEntry]:
        """The tools of ``server`` (listed once, then cached)."""
        if not refresh and server in self._tools:
            return self._tools[server]
        connection = self._connections[server]
        session = await connection.session()
        try:
            with anyio.fail_after(self.connect_timeout):
                tools = await _list_all(session)
        except (MCPError, TimeoutError, pydantic.ValidationError) as exc:
            connection.mark_dropped()
            raise ServerUnavailable(
                server,
                f"MCP server '{server}' ({connection.describe()}) failed to list its tools "
                f"({type(exc).__name__}: {connection.redact(str(exc))[:300]}); "
                "check that the server works, e.g. with `aworld-graph env tools`",
            ) from None
        self._tools[server] = {
            tool.name: _ToolEntry(tool, ArgumentChecker(tool.input_schema)) for tool in tools
        }
        return self._tools[server]

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109  (becomes an error outcome, and the server is told to cancel)
    ) -> ToolOutcome:
        """Call ``tool`` on ``server``; failures come back as ``ToolOutcome(is_error=True)``.

        ``timeout`` (seconds) overrides the server's ``timeout`` and the sandbox default. When it
        runs out the server is told to cancel the request and the outcome says so; wrapping the
        call in ``asyncio.timeout`` instead cancels the caller (the exception propagates).
        """
        started = time.perf_counter()
        label = f"{server}__{tool}"

        def failed(message: str, kind: str) -> ToolOutcome:
            return error_outcome(
                message, kind=kind, server=server, started=started, now=time.perf_counter()
            )

        connection = self._connections.get(server)
        if connection is None:
            known = ", ".join(self._connections) or "none"
            return failed(
                f"No MCP server named '{server}' in this sandbox (servers: {known}); "
                "call a tool of one of those servers, or add the server to mcp_servers",
                "unknown_server",
            )
        try:
            tools = await self._server_tools(server)
            if tool not in tools:
                tools = await self._server_tools(server, refresh=True)
            session = await connection.session()
        except ServerUnavailable as exc:
            return failed(f"{exc}. The call to '{tool}' was not made.", "server_unavailable")
        entry = tools.get(tool)
        if entry is None:
            return failed(
                f"MCP server '{server}' has no tool '{tool}' (its tools: {', '.join(sorted(tools)) or 'none'}); "
                "call one of those",
                "unknown_tool",
            )
        arguments = dict(arguments) if isinstance(arguments, Mapping) else arguments
        problems = entry.checker.problems(arguments if arguments is not None else {})
        if problems:
            return failed(
                f"Invalid arguments for tool '{label}': {'; '.join(problems)}. "
                f"Call it again with arguments matching its schema: {_short_schema(entry.checker.schema)}",
                "invalid_arguments",
            )
        limit = timeout or connection.config.call_timeout or self.call_timeout
        try:
            result = await session.call_tool(tool, arguments or {}, read_timeout_seconds=limit)
        except MCPError as exc:
            return self._mcp_failure(exc, connection, tool, label, limit, failed)
        except pydantic.ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "(result)"
            return failed(
                f"MCP server '{server}' answered '{tool}' with a malformed result "
                f"({exc.error_count()} problem(s), e.g. {where}: {first['msg']}); "
                "the server is misbehaving: report it to its maintainer, or try another tool",
                "bad_response",
            )
        except Exception as exc:  # a transport failure we cannot classify: reconnect next time
            connection.mark_dropped()
            return failed(
                f"Calling '{tool}' on MCP server '{server}' failed "
                f"({type(exc).__name__}: {connection.redact(str(exc))[:300]}); "
                "the connection will be reopened on the next call",
                "call_failed",
            )
        return result_outcome(
            result, label=label, server=server, started=started, now=time.perf_counter()
        )

    def _mcp_failure(
        self,
        exc: MCPError,
        connection: ServerConnection,
        tool: str,
        label: str,
        limit: float,
        failed: Callable[[str, str], ToolOutcome],
    ) -> ToolOutcome:
        server = connection.name
        if exc.code == mcp_types.REQUEST_TIMEOUT:
            return failed(
                f"Tool '{label}' did not answer within {limit:g} s and was cancelled. Try a smaller "
                f"request, or raise the limit (call_tool(timeout=…) or mcpServers.{server}.timeout)",
                "timeout",
            )
        if exc.code == mcp_types.CONNECTION_CLOSED:
            connection.mark_dropped()
            garbage = connection.bad_output()
            if garbage is not None:
                return failed(
                    f"MCP server '{server}' wrote bytes that are not UTF-8 to its stdout while "
                    f"running '{tool}' ({garbage!r}…), so its answer was unreadable; the server "
                    "was stopped and will be restarted on the next call. If it happens again, "
                    "use another tool (or fix the server: the MCP stdio stream is UTF-8 JSON)",
                    "bad_encoding",
                )
            tail = connection.last_stderr()
            note = f"; its stderr ends with:\n{tail}\n" if tail else ". "
            return failed(
                f"MCP server '{server}' closed the connection while running '{tool}' "
                f"(it crashed or exited){note}It will be restarted on the next call; "
                "if it fails again, use another tool",
                "server_died",
            )
        return failed(
            f"MCP server '{server}' refused the call to '{tool}': "
            f"{connection.redact(exc.message)[:500]} (error {exc.code}); "
            "check the tool name and arguments",
            "server_error",
        )

    async def aclose(self) -> None:
        """Close every open connection, all at once (stdio server processes are stopped)."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as group:
                for connection in self._connections.values():
                    group.start_soon(connection.aclose)


class Sandbox:
    """An agent's environment: the MCP servers named in ``mcp_servers`` (all when omitted).

    A :class:`~aworld_graph.tools.ToolProvider`: :meth:`tool_specs` offers every tool as
    ``server__tool`` and :meth:`call_tool` runs one by that name.
    """

    def __init__(
        self,
        mcp_config: McpConfig | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        mcp_servers: Sequence[str] | None = None,
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        skip_unavailable: bool = False,
    ) -> None:
        if mcp_config is None:
            if mcp_servers:
                raise ConfigError(
                    f"Sandbox: mcp_servers={list(mcp_servers)!r} given without mcp_config; "
                    "pass the mcpServers config that defines them"
                )
            mcp_config = {"mcpServers": {}}
        self.config = load_mcp_config(mcp_config)
        """The parsed configuration (its ``repr`` hides env and headers)."""
        self.mcpservers = McpServers(
            self.config,
            mcp_servers,
            call_timeout=call_timeout,
            connect_timeout=connect_timeout,
            skip_unavailable=skip_unavailable,
        )
        """The servers: ``await sandbox.mcpservers.list_tools()`` / ``.call_tool(server, tool, args)``."""

    def __repr__(self) -> str:
        return f"Sandbox(mcp_servers={self.mcpservers.names!r})"

    @property
    def unavailable(self) -> dict[str, str]:
        """Servers left out of :meth:`tool_specs` (``skip_unavailable``), and why."""
        return dict(self.mcpservers.unavailable)

    async def tool_specs(self) -> list[ToolSpec]:
        """The tools offered to the model (``server__tool``)."""
        return await self.mcpservers.tool_specs()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run the tool the model knows as ``name`` (``server__tool``)."""
        target = self.mcpservers.resolve(name)
        if target is None:
            try:
                await self.mcpservers.tool_specs()
            except ServerUnavailable:
                pass  # the split below still finds the server, whose call reports the failure
            target = self.mcpservers.resolve(name) or _split(name, self.mcpservers.names)
        if target is None:
            started = time.perf_counter()
            return error_outcome(
                f"No tool named '{name}' in this sandbox; call one of the tools offered "
                f"(named server__tool, servers: {', '.join(self.mcpservers.names) or 'none'})",
                kind="unknown_tool",
                server=None,
                started=started,
                now=time.perf_counter(),
            )
        return await self.mcpservers.call_tool(target[0], target[1], arguments)

    async def aclose(self) -> None:
        """Close all connections; stdio server processes are stopped."""
        await self.mcpservers.aclose()

    cleanup = aclose
    """AWorld's name for :meth:`aclose`."""

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def _list_all(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _split(name: str, servers: Sequence[str]) -> tuple[str, str] | None:
    server, sep, tool = name.partition("__")
    return (server, tool) if sep and server in servers else None


def _short_schema(schema: dict[str, Any], limit: int = 600) -> str:
    text = json.dumps(
        {k: schema[k] for k in ("properties", "required") if k in schema}, ensure_ascii=False
    )
    return text if len(text) <= limit else text[:limit] + "…"
